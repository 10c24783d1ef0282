"""Every attention implementation side by side in one process: time, TFLOP/s, memory, error.

For each head dim and sequence length (causal, bf16 on a GPU; batch x seq = 16384 tokens and
heads x head_dim = 2048 at every point) :func:`run` measures every variant of :data:`VARIANTS` on
the same inputs: median time per call, kernel time per call, TFLOP/s, peak memory of one call and
the error against a float32 reference. A variant that is missing or fails is recorded with its
reason. Passes are ordered so that a time budget cuts the least important part: fused kernels,
then score-matrix versions, then the compiled ones (each new shape compiles).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from helpers.attention.backends import sdpa_fn
from helpers.attention.costs import AttentionShape, attention_flops, fused_attention_bytes, score_matrix_bytes
from helpers.attention.flex import flex_fn
from helpers.attention.model import future_mask, manual_attention
from helpers.attention.workloads import attention_inputs
from helpers.kernels.flash_attention import flash_attention, path_failures
from helpers.measure.ceilings import Ceilings, measure_ceilings
from helpers.measure.device import provenance, resolve_device, synchronize
from helpers.measure.memory import peak_memory
from helpers.measure.numerics import relative_error
from helpers.measure.profile import profile
from helpers.measure.roofline import achieved
from helpers.measure.timing import time_device, time_per_call

from . import tuning

SCHEMA = "course-attention-bench/1"
TOKENS, HIDDEN = 16384, 2048
GPU_SEQS: tuple[int, ...] = (1024, 2048, 4096, 8192, 16384)
HEAD_DIMS: tuple[int, ...] = (128, 64)
# name -> (what it is, pass): pass 1 = fused kernels, 2 = score matrix in memory (quick to run, heavy
# on memory), 3 = compiled (each new shape compiles: the slowest part of the run)
VARIANTS: dict[str, tuple[str, int]] = {
    "sdpa-flash": ("F.scaled_dot_product_attention forced to FLASH_ATTENTION", 1),
    "sdpa-cudnn": ("F.scaled_dot_product_attention forced to CUDNN_ATTENTION", 1),
    "sdpa-efficient": ("F.scaled_dot_product_attention forced to EFFICIENT_ATTENTION", 1),
    "course": ("the course's Triton flash-attention kernel (TMA path on Hopper)", 1),
    "sdpa-math": ("F.scaled_dot_product_attention forced to MATH", 2),
    "manual-eager": ("hand-written: q @ k.T * scale, masked_fill, softmax, @ v", 2),
    "flex": ("torch.compile(flex_attention) with a causal BlockMask", 3),
    "manual-compiled": ("torch.compile of the hand-written attention", 3),
    "course-pointer": ("the course's kernel, portable pointer path", 3),
}
# Where each variant's kernels are listed by name (one shape keeps the results file small).
PROBE = (128, 4096)
Log = Callable[[str], None]


def shape_for(seq: int, head_dim: int, tokens: int = TOKENS, hidden: int = HIDDEN) -> AttentionShape:
    """batch x seq = tokens (at least one sequence), heads x head_dim = hidden."""
    return AttentionShape(batch=max(1, tokens // seq), heads=max(1, hidden // head_dim), seq=seq, head_dim=head_dim)


def _course_fn(kernel: str, tuned: list[dict], log: list[dict]) -> Callable:
    """The course's kernel with, per shape, the configuration its tuning sweep found fastest (on the first call)."""
    chosen: dict[tuple, Any] = {}

    def course(q, k, v):
        key = (tuple(q.shape), tuple(k.shape), q.dtype)
        if key not in chosen:
            chosen[key], rows = tuning.sweep(q, k, v, kernel)
            log.extend(rows)
            if chosen[key] is not None and rows:
                tuned.append(
                    {**{x: rows[0][x] for x in ("path", "head_dim", "seq_q", "seq_k")}, "config": str(chosen[key])}
                )
        return flash_attention(q, k, v, causal=True, kernel=kernel, config=chosen[key])

    return course


def _variant_fn(name: str, tuned: list[dict], log: list[dict]) -> Callable:
    if name.startswith("sdpa-"):
        return sdpa_fn(name.removeprefix("sdpa-"))
    if name in ("course", "course-pointer"):
        return _course_fn("auto" if name == "course" else "pointer", tuned, log)
    if name == "flex":
        return flex_fn("causal")

    def core(q, k, v, mask):
        return manual_attention(q, k, v, causal=True, mask=mask)

    if name == "manual-eager":
        return _with_mask(core)
    if name == "manual-compiled":
        # The mask is built outside the compiled function and passed in: built inside, it would be
        # part of the graph (and the cache a side effect that forces a recompile).
        return _with_mask(torch.compile(core, dynamic=False))
    raise ValueError(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}")


def _with_mask(fn: Callable) -> Callable:
    """``fn(q, k, v, mask)`` as ``f(q, k, v)``, the causal mask built once per length and kept."""
    masks: dict[tuple, torch.Tensor] = {}

    def hand_written(q, k, v):
        key = (q.shape[-2], k.shape[-2], q.device)
        if key not in masks:
            masks.clear()  # one length at a time: do not keep [seq, seq] masks of earlier lengths
            masks[key] = future_mask(q.shape[-2], k.shape[-2], q.device)
        return fn(q, k, v, masks[key])

    return hand_written


def _reference_slice(q, k, v) -> torch.Tensor:
    """float32 attention of batch 0, heads 0-1, computed plainly on the inputs' device (no TF32)."""
    qs, ks, vs = (t[:1, :2].float() for t in (q, k, v))
    scores = qs @ ks.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(future_mask(q.shape[-2], k.shape[-2], q.device), float("-inf"))
    return scores.softmax(-1) @ vs


def _fits(name: str, shape: AttentionShape, device: torch.device) -> str | None:
    """Why a score-matrix variant would not fit in memory here (None when it fits)."""
    if VARIANTS[name][1] != 2 or device.type != "cuda":
        return None
    # math upcasts bf16 to float32; both keep about three score-sized tensors alive at once
    need = 3 * score_matrix_bytes(shape, torch.float32 if name == "sdpa-math" else torch.bfloat16)
    free, _ = torch.cuda.mem_get_info(device)
    if need > 0.8 * free:
        return f"skipped: needs about {need / 1e9:.0f} GB for score matrices, {free / 1e9:.0f} GB free"
    return None


def kernel_stats(fn: Callable, q, k, v, label: str) -> dict[str, Any]:
    """Device kernels per call from a profile of two calls: count, summed time, each kernel's name and time (none on a CPU)."""
    if q.device.type != "cuda":
        return {"kernel_us": None, "kernels_per_call": 0, "kernels": []}
    trace = profile(fn, q, k, v, steps=2, warmup=0, label=label)
    kernels = trace.kernels(allow_empty=True)
    steps = trace.steps or [0]
    kernels = kernels[kernels["kind"] == "kernel"] if not kernels.empty else kernels
    if kernels.empty:
        return {"kernel_us": None, "kernels_per_call": 0, "kernels": []}
    per_name = kernels.groupby("name", sort=False)["duration_us"].agg(["count", "sum"])
    return {
        "kernel_us": float(kernels["duration_us"].sum()) / len(steps),
        "kernels_per_call": round(len(kernels) / len(steps)),
        "kernels": [
            {
                "name": str(n),
                "calls_per_call": float(r["count"]) / len(steps),
                "us_per_call": float(r["sum"]) / len(steps),
            }
            for n, r in per_name.iterrows()
        ],
    }


def measure_variant(
    name: str,
    fn: Callable,
    inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    reference: torch.Tensor,
    shape: AttentionShape,
    ceilings: Ceilings,
    repeats: int,
) -> dict[str, Any]:
    """One variant at one shape: first call (compile), error, time per call, kernel time, memory, rates.

    Rates use the kernel time on a GPU, the wall time on a CPU (``rate_basis`` says which).
    """
    q, k, v = inputs
    device = q.device
    t0 = time.perf_counter()
    with torch.no_grad():
        out = fn(q, k, v)
        synchronize(device)
    first_s = time.perf_counter() - t0
    err = relative_error(out[:1, :2].float(), reference)
    del out
    if device.type == "cuda":
        seconds = time_device(lambda: fn(q, k, v), repeats=repeats, warmup=2)
    else:
        seconds = time_per_call(fn, q, k, v, repeats=repeats, warmup=1)
    stats = kernel_stats(fn, q, k, v, label=name)
    basis = stats["kernel_us"] if stats["kernel_us"] else seconds * 1e6
    flops = attention_flops(shape, "causal")
    rates = achieved(basis, fused_attention_bytes(shape, q.dtype), flops, ceilings=ceilings)
    return {
        "status": "ok",
        "first_call_s": first_s,
        "time_us": seconds * 1e6,
        **stats,
        "rate_basis": "kernel_us" if stats["kernel_us"] else "time_us",
        "tflops": rates["achieved_tflops"],
        "pct_of_matmul": rates["pct_of_peak_flops"],
        "peak_mb": peak_memory(fn, q, k, v) / 1e6,
        "rel_err": err,
    }


def run(
    device: str | torch.device | None = None,
    head_dims: Sequence[int] = HEAD_DIMS,
    seqs: Sequence[int] = GPU_SEQS,
    variants: Sequence[str] | None = None,
    tokens: int = TOKENS,
    hidden: int = HIDDEN,
    repeats: int = 10,
    budget_s: float = 220.0,
    log: Log | None = None,
    on_stage: Callable[[dict], None] | None = None,
    command: str | None = None,
    ceilings: Ceilings | None = None,
) -> dict[str, Any]:
    """Measure every variant at every (head dim, seq); returns a JSON-ready dict of raw measurements.

    Past `budget_s` seconds the rest is recorded as ``skipped``; `on_stage(result)` runs after each pass.
    `ceilings` given (a lesson's own set) are divided by instead of measuring this device's.
    """
    log = log or (lambda _: None)
    dev = resolve_device(device)
    variants = list(variants or VARIANTS)
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    start = time.perf_counter()
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    if ceilings is None:
        log(f"measuring the ceilings of {dev} ...")
        ceilings = measure_ceilings(dev)
    elif not isinstance(ceilings, Ceilings):
        raise TypeError(f"ceilings must be a Ceilings, got {type(ceilings).__name__}")
    result: dict[str, Any] = {
        "schema": SCHEMA,
        "provenance": provenance(dev, command),
        "ceilings": ceilings.as_dict(),
        "config": {
            "tokens": tokens,
            "hidden": hidden,
            "head_dims": list(head_dims),
            "seqs": list(seqs),
            "dtype": str(dtype).removeprefix("torch."),
            "causal": True,
            "repeats": repeats,
            "timing": "median of CUDA-event-timed calls" if dev.type == "cuda" else "median wall time, synchronised",
            "reference": "float32 attention of batch 0, heads 0-1, on the same inputs",
        },
        "variants": {n: VARIANTS[n][0] for n in variants},
        "rows": [],
        "complete": False,
    }
    _allow_recompiles()
    inputs_cache: dict[tuple, tuple] = {}
    tuned: list[dict] = []
    sweep_log: list[dict] = []
    fns = {n: _variant_fn(n, tuned, sweep_log) for n in variants}

    def inputs_for(shape: AttentionShape):
        key = (shape.seq, shape.head_dim)
        if key not in inputs_cache:
            inputs_cache.clear()  # keep one shape's inputs alive at a time
            qkv = attention_inputs(dev, dtype, shape)
            inputs_cache[key] = (qkv, _reference_slice(*qkv))
        return inputs_cache[key]

    for stage in (1, 2, 3):
        for d in head_dims:
            # compiled variants (pass 3) compile once per length: lengths 2048 and up first
            order = sorted(seqs, key=lambda s: (s < 2048, s == max(seqs))) if stage == 3 else seqs
            for seq in order:
                shape = shape_for(seq, d, tokens, hidden)
                for name in (n for n in variants if VARIANTS[n][1] == stage):
                    row = {"variant": name, "head_dim": d, "seq": seq, "batch": shape.batch, "heads": shape.heads}
                    row["flops"] = attention_flops(shape, "causal")
                    row["score_mb"] = score_matrix_bytes(shape, dtype) / 1e6
                    elapsed = time.perf_counter() - start
                    reason = _fits(name, shape, dev)
                    if elapsed > budget_s:
                        reason = f"skipped: the time budget ({budget_s:.0f} s) was used up"
                    if reason:
                        result["rows"].append({**row, "status": "skipped", "reason": reason})
                        continue
                    if (d, seq) != PROBE:
                        row["drop_kernels"] = True
                    try:
                        qkv, ref = inputs_for(shape)
                        row.update(measure_variant(name, fns[name], qkv, ref, shape, ceilings, repeats))
                        row["reason"] = None
                        if row.pop("drop_kernels", False):
                            row.pop("kernels", None)
                        log(
                            f"d={d} seq={seq} {name:16s} call {row['time_us']:9.1f} us, {row['rate_basis'][:-3]} "
                            f"{row['kernel_us' if row['rate_basis'] == 'kernel_us' else 'time_us']:9.1f} us: "
                            f"{row['tflops']:6.1f} TFLOP/s {row['pct_of_matmul']:5.1f}% peak {row['peak_mb']:9.1f} MB err {row['rel_err']:.1e}"
                        )
                    except Exception as err:  # noqa: BLE001 - every variant is optional; record why it failed
                        text = str(err).strip().splitlines()
                        row.pop("drop_kernels", None)
                        row.update(status="failed", reason=f"{type(err).__name__}: {text[0][:300] if text else ''}")
                        log(f"d={d} seq={seq} {name:16s} failed: {row['reason']}")
                        if dev.type == "cuda":
                            torch.cuda.empty_cache()
                    result["rows"].append(row)
        result["tuning"] = list(sweep_log)
        result["tuned"] = list(tuned)
        result["course_path_failures"] = {str(k): v for k, v in path_failures.items()}
        result["elapsed_s"] = time.perf_counter() - start
        if on_stage:
            on_stage(result)
    result["complete"] = True
    return result


def _allow_recompiles() -> None:
    """Each (head dim, seq) compiles its own graph; Dynamo's default limit (8 per function) would fall back to eager."""
    import torch._dynamo

    for attr in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, attr):
            setattr(torch._dynamo.config, attr, max(getattr(torch._dynamo.config, attr), 64))
