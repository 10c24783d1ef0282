"""The tuning sweep of the course's flash-attention kernel: time every candidate configuration, keep the fastest.

The launcher (``helpers.kernels.flash_attention``) looks its configuration up in
``TUNED_H200``; this sweep is where that table comes from (the results' table ``tuned``). A
candidate that fails to compile or computes a wrong result is logged with its reason and skipped.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import triton.testing

from helpers.kernels.flash_attention import choose_path, flash_attention, sdpa_with_kernel_conventions
from helpers.kernels.flash_attention_configs import FlashConfig, candidates

LIMIT = {torch.float32: 1e-4}  # relative error against SDPA; 2e-2 for bf16 and fp16


def _bench_ms(fn) -> float:
    # Shorter than do_bench's defaults: a few tenths of a second per configuration, ample for
    # kernels of tens of microseconds and more.
    return float(triton.testing.do_bench(fn, warmup=5, rep=25, return_mode="median"))


def sweep(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kernel: str, causal: bool = True) -> tuple[
    FlashConfig | None, list[dict[str, Any]]
]:  # fmt: skip
    """The fastest right configuration of `kernel` ("auto", "tma", "pointer") on these inputs, and one log row per candidate.

    None when no candidate ran (the launcher then falls back as it would without a configuration).
    """
    out = torch.empty_like(q)
    path = choose_path(kernel, q, k, v, out)
    where = {"path": path, "head_dim": q.shape[-1], "seq_q": q.shape[2], "seq_k": k.shape[2]}
    ref = sdpa_with_kernel_conventions(q, k, v, causal, None).float()
    limit = LIMIT.get(q.dtype, 2e-2)
    configs = candidates(q.shape[2], q.shape[-1], q.dtype)
    if len(configs) == 1:  # the interpreter, fp32: nothing to choose
        return configs[0], []
    best, best_ms, log = None, math.inf, []
    for cfg in configs:
        run = lambda: flash_attention(q, k, v, causal, kernel=path, config=cfg)
        try:
            got = run().float()  # compiles it
            err = ((got - ref).norm() / ref.norm().clamp_min(1e-30)).item()
            if not err <= limit:
                raise ArithmeticError(f"relative error {err:.1e} against PyTorch's SDPA (limit {limit:.0e})")
            ms = _bench_ms(run)
        except Exception as e:  # noqa: BLE001 - one failing candidate must not stop the others
            text = str(e).strip().splitlines()
            log.append(
                {
                    **where,
                    "config": str(cfg),
                    "ms": None,
                    "error": f"{type(e).__name__}: {text[0][:160] if text else ''}",
                }
            )
            continue
        log.append({**where, "config": str(cfg), "ms": ms, "error": None})
        if ms < best_ms:
            best, best_ms = cfg, ms
    return best, log
