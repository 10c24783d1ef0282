"""The course's batch-1 GEMV against cuBLAS at the decoder's decode shapes: time and GB/s against the memory roof.

    python -m benchmarks decode-gemv --out benchmarks/results/h200_decode_gemv.json   # on a GPU (~1-2 min)

For each projection of one block of the ``1b`` preset at M = 1 (QKV, O, gate+up, down, and the LM head):

- ``cublas``: ``F.linear(x, W)`` alone;
- ``torch_unfused``: what the fused GEMV replaces, as eager torch ops (RMSNorm, or the GeGLU, then
  ``F.linear``, then the residual add);
- ``gemv``: the course's GEMV alone (autotuned), and ``gemv_fused`` with its prologue and epilogue
  (RMSNorm before QKV and gate+up, GeGLU before down, the residual add after O and down);
- ``sweep``: the plain GEMV at each config of ``TUNING_CONFIGS`` (which one the autotuner should pick).

Each time is a CUDA-graph replay of calls back to back, each call on its own copy of the weight, with enough
copies to overflow L2 (as in a decode step, where every GEMV reads weights no other kernel just read).
GB/s counts the weight and the vectors each call reads and writes; ``pct_of_roof`` divides by the memory roof
(the course's recorded ceilings for this GPU where it has them, else measured here). ``--device cpu --quick``
runs tiny shapes in Triton's interpreter (the CI smoke run; its times mean nothing).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import torch.nn.functional as F

from helpers.decoder.config import get_config
from helpers.measure.device import provenance, resolve_device

from .common import log, store_tables, time_calls_graphed, write_json

L2_OVERFLOW_BYTES = 256 * 2**20  # weight copies per graph: past any Hopper L2 (50-60 MB) several times over
CALLS_MIN, REPLAYS = 4, 20


def shapes(config: str = "1b") -> list[dict[str, Any]]:
    """The decode step's projections of one block (and the LM head) of `config`: name, N, K, fused prologue."""
    cfg = get_config(config)
    h, d = cfg.hidden_size, cfg.dim_per_head
    qkv = (cfg.num_attention_heads + 2 * cfg.kv_heads) * d
    return [
        {"name": "qkv", "N": qkv, "K": h, "prologue": "rmsnorm", "residual": False},
        {"name": "o", "N": h, "K": cfg.num_attention_heads * d, "prologue": "none", "residual": True},
        {"name": "gate_up", "N": 2 * cfg.intermediate_size, "K": h, "prologue": "rmsnorm", "residual": False},
        {"name": "down", "N": h, "K": cfg.intermediate_size, "prologue": "geglu", "residual": True},
        {"name": "lm_head", "N": cfg.vocab_size, "K": h, "prologue": "none", "residual": False},
    ]


QUICK_SHAPES = [
    {"name": "qkv", "N": 48, "K": 64, "prologue": "rmsnorm", "residual": False},
    {"name": "down", "N": 40, "K": 96, "prologue": "geglu", "residual": True},
]


def measure_shape(shape: dict[str, Any], device: torch.device, roof: float | None, sweep: bool) -> dict[str, Any]:
    """Every way at one shape: microseconds, GB/s, % of the roof, relative error of the GEMVs against float32."""
    from helpers.kernels.decode_gemv import TUNING_CONFIGS, gemv, gemv_reference, launch_gemv

    n, k, prologue, residual = shape["N"], shape["K"], shape["prologue"], shape["residual"]
    dt = torch.bfloat16
    gen = torch.Generator(device=device).manual_seed(0)
    weight_bytes = n * k * 2
    copies = max(CALLS_MIN, -(-L2_OVERFLOW_BYTES // weight_bytes)) if device.type == "cuda" else 2
    ws = [(torch.randn(n, k, device=device, generator=gen) * k**-0.5).to(dt) for _ in range(copies)]
    x_len = 2 * k if prologue == "geglu" else k
    x = torch.randn(1, x_len, device=device, generator=gen).to(dt)
    xk = x[:, :k].contiguous()  # the plain GEMV's input
    norm_w = (1 + 0.1 * torch.randn(k, device=device, generator=gen)).to(dt) if prologue == "rmsnorm" else None
    res = torch.randn(1, n, device=device, generator=gen).to(dt) if residual else None

    def unfused(w: torch.Tensor) -> torch.Tensor:
        h = x
        if prologue == "rmsnorm":
            hf = h.float()
            h = norm_w * (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(dt)
        elif prologue == "geglu":
            h = F.gelu(h[:, :k], approximate="tanh") * h[:, k:]
        y = F.linear(h, w)
        return y if res is None else res + y

    ways: dict[str, Callable[[torch.Tensor], Any]] = {
        "cublas": lambda w: F.linear(xk, w),
        "torch_unfused": unfused,
        "gemv": lambda w: gemv(xk, w),
        "gemv_fused": lambda w: gemv(x, w, prologue, norm_w, 1e-5, res),
    }
    plain = weight_bytes + 2 * (k + n)  # bf16: the weight, x in, y out
    fused = weight_bytes + 2 * (x_len + n * (2 if residual else 1) + (k if prologue == "rmsnorm" else 0))
    moved = {"cublas": plain, "gemv": plain, "torch_unfused": fused, "gemv_fused": fused}
    row: dict[str, Any] = {**shape, "weight_mb": weight_bytes / 1e6, "weight_copies": copies}
    for name, fn in ways.items():
        us = time_calls_graphed([lambda w=w, fn=fn: fn(w) for w in ws], device, REPLAYS)
        row[f"{name}_us"] = round(us, 2)
        row[f"{name}_gbps"] = round(moved[name] / us / 1e3, 1)  # bytes per us / 1e3 = GB/s
        if roof:
            row[f"{name}_pct_of_roof"] = round(100 * moved[name] / (us * 1e-6) / roof, 1)
    ref = gemv_reference(x, ws[0], prologue, norm_w, 1e-5, res)
    row["gemv_fused_rel_error"] = float((ways["gemv_fused"](ws[0]).float() - ref).norm() / ref.norm())
    row["gemv_over_cublas"] = round(row["cublas_us"] / row["gemv_us"], 3)
    row["gemv_fused_over_torch_unfused"] = round(row["torch_unfused_us"] / row["gemv_fused_us"], 3)
    if sweep and device.type == "cuda":
        row["sweep"] = []
        for cfg in TUNING_CONFIGS:
            blocks = (cfg.kwargs["BLOCK_N"], cfg.kwargs["BLOCK_K"], cfg.num_warps)
            out = torch.empty(n, device=device, dtype=dt)

            def call(w: torch.Tensor, blocks=blocks, out=out) -> None:
                launch_gemv(xk.reshape(-1), w, out, blocks=blocks)

            us = time_calls_graphed([lambda w=w: call(w) for w in ws], device, REPLAYS)
            row["sweep"].append(
                {"BLOCK_N": blocks[0], "BLOCK_K": blocks[1], "num_warps": blocks[2], "us": round(us, 2)}
            )
    return row


def tables(data: dict[str, Any]) -> dict[str, tuple[pd.DataFrame, str]]:
    cols = ["name", "N", "K", "prologue", "residual", "cublas_us", "gemv_us", "gemv_over_cublas", "torch_unfused_us",
            "gemv_fused_us", "gemv_fused_over_torch_unfused", "cublas_pct_of_roof", "gemv_pct_of_roof",
            "gemv_fused_pct_of_roof", "gemv_fused_rel_error"]  # fmt: skip
    frame = pd.DataFrame([{c: r.get(c) for c in cols} for r in data["rows"]], columns=cols)
    about = ("per projection of one decode step at M=1: cuBLAS F.linear, the eager ops a fused GEMV replaces, the "
             "course's GEMV alone and fused, in us per call (CUDA-graph replay, weights past L2) and % of the memory roof")  # fmt: skip
    return {"gemv": (frame, about)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks decode-gemv", description=__doc__.split("\n")[0])
    p.add_argument("--device", default=None)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--quick", action="store_true", help="tiny shapes (the CPU smoke run in Triton's interpreter)")
    p.add_argument("--no-sweep", action="store_true", help="skip the sweep over the GEMV's tuning configs")
    args = p.parse_args(argv)
    dev = resolve_device(args.device)
    if dev.type != "cuda" and not args.quick:
        p.error("the decoder's shapes need a CUDA GPU; on a CPU give --quick")
    roof = None
    ceilings_label = None
    if dev.type == "cuda":
        from helpers.measure.ceilings import measure_ceilings, reference_ceilings_for

        ceilings = reference_ceilings_for(torch.cuda.get_device_name(dev)) or measure_ceilings(dev)
        roof, ceilings_label = ceilings.bandwidth_bytes_per_s, ceilings.label
    out: dict[str, Any] = {"benchmark": "decode-gemv", "provenance": provenance(dev), "ceilings": ceilings_label,
                           "roof_bytes_per_s": roof, "rows": []}  # fmt: skip
    for shape in QUICK_SHAPES if args.quick else shapes():
        row = measure_shape(shape, dev, roof, sweep=not args.no_sweep)
        out["rows"].append(row)
        log(f"{row['name']:8s} N={row['N']:6d} K={row['K']:5d}: F.linear {row['cublas_us']:8.2f} us, GEMV "
            f"{row['gemv_us']:8.2f} us ({row.get('gemv_pct_of_roof')} % of roof), fused {row['gemv_fused_us']:8.2f} "
            f"us vs eager ops {row['torch_unfused_us']:8.2f} us")  # fmt: skip
        write_json(args.out, store_tables(out, tables(out)))  # after every shape: a run cut short keeps them
    log(f"wrote {args.out}")
    return 0
