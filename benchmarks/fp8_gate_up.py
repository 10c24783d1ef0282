"""The FP8 gate+up path against the course's bf16 fused gate+up kernel: rate and error, side by side.

    python -m benchmarks fp8-gate-up --out benchmarks/results/h200_fp8_gate_up.json   # on a GPU (~1 min)

For each shape (M tokens, dim -> hidden), the GeGLU of the gate+up product computed five ways:

- ``bf16_fused``: the course's fused gate+up GEMM with the GeGLU in its epilogue (one Triton kernel);
- ``fp8_fused``: the same kernel on e4m3 inputs (``helpers.kernels.fp8_gate_up_fused``: quantize x
  per row in one Triton pass, then the gate+up GEMM with the row scales and the GeGLU in its
  epilogue); its default tile and each tile of ``FP8_SWEEP`` are timed, the fastest is the row's
  ``fp8_fused`` (all in ``fp8_fused_sweep``; ``fp8_quantize_us`` is the quantize pass alone);
- ``fp8``: the unfused FP8 path of ``helpers.kernels.fp8_gate_up`` (quantize x per row in torch, e4m3
  ``torch._scaled_mm`` with row scales, bf16 out, the course's GeGLU kernel);
- ``fp8_gemm``: its e4m3 GEMM alone, inputs already quantized (what the tensor cores do);
- ``bf16_gemm``: cuBLAS's bf16 GEMM of the same product (no GeGLU), the reference rate.

Times are GPU times from ``triton.testing.do_bench`` (median, the L2 flushed between calls);
rates count the gate+up product's 2*M*dim*2*hidden FLOPs. Errors are relative (Frobenius) against
float32 arithmetic on the same bf16 inputs. ``meets_target``: ``fp8_fused`` at least
:data:`TARGET` times the ``bf16_fused`` rate.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from helpers.measure.device import provenance

from .common import log, store_tables, write_json

SHAPES = ((8192, 768, 3072), (4096, 4096, 14336), (16384, 2048, 8192))
TARGET = 1.4  # the FP8 fused kernel's rate over the bf16 fused kernel's that would justify it


def _rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.float() - ref).norm() / ref.norm())


def _default_fp8_label(m: int, n2: int) -> str:
    """The tile the fused FP8 launcher chose by itself for this shape (from its launch plan)."""
    from helpers.kernels.launch_plans import config_label, plan_cache

    for key, plan in plan_cache().items():
        if key[0] == "forward_fp8" and key[1][0] == m and key[3][0] == n2 and key[-1] is None:
            return f"default {config_label(plan.config)}"
    return "default"


def measure_shape(m: int, dim: int, hidden: int, device: str = "cuda") -> dict[str, Any]:
    """Times (us), rates (TFLOP/s) and errors of the five ways at one shape, and the FP8 tile sweep.

    ``device="cpu"`` runs the same code in Triton's interpreter (a smoke test: tiny shapes only)."""
    from triton.testing import do_bench

    from helpers.kernels.fp8_gate_up import fp8_gate_up_geglu, quantize_rows
    from helpers.kernels.fp8_gate_up_fused import FP8_SWEEP, fp8_gate_up_geglu_fused, quantize_rows_fp8
    from helpers.kernels.gate_up import gate_up_geglu, pack_gate_up
    from helpers.kernels.launch_plans import config_label

    gen = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(m, dim, device=device, generator=gen).to(torch.bfloat16)
    wg = (torch.randn(hidden, dim, device=device, generator=gen) * dim**-0.5).to(torch.bfloat16)
    wu = (torch.randn(hidden, dim, device=device, generator=gen) * dim**-0.5).to(torch.bfloat16)
    packed = pack_gate_up(wg, wu)
    both = torch.cat([wg, wu])
    w_values, w_scales = quantize_rows(both)
    x_values, x_scales = quantize_rows(x)
    packed_values, packed_scales = quantize_rows(packed)
    ref = torch.nn.functional.gelu(x.float() @ wg.float().t(), approximate="tanh") * (x.float() @ wu.float().t())

    ways = {
        "bf16_fused": lambda: gate_up_geglu(x, packed),
        "fp8_fused": lambda: fp8_gate_up_geglu_fused(x, packed_values, packed_scales),
        "fp8_quantize": lambda: quantize_rows_fp8(x),
        "fp8": lambda: fp8_gate_up_geglu(x, w_values, w_scales),
        "fp8_gemm": lambda: torch._scaled_mm(
            x_values, w_values.t(), scale_a=x_scales, scale_b=w_scales.reshape(1, -1), out_dtype=torch.bfloat16
        ),
        "bf16_gemm": lambda: x @ both.t(),
    }
    flops = 2 * m * dim * 2 * hidden
    row: dict[str, Any] = {"m": m, "dim": dim, "hidden": hidden, "gflop": flops / 1e9}
    for name, fn in ways.items():
        fn()  # compile / pick the algorithm outside the timing
        us = do_bench(fn, warmup=25, rep=200, return_mode="median") * 1e3
        row[f"{name}_us"] = round(us, 2)
        row[f"{name}_tflops"] = round(flops / (us * 1e6), 1)
    sweep = [{"config": _default_fp8_label(m, 2 * hidden), "us": row["fp8_fused_us"]}]
    for cfg in FP8_SWEEP:
        entry: dict[str, Any] = {"config": config_label(cfg)}
        try:
            out = fp8_gate_up_geglu_fused(x, packed_values, packed_scales, config=cfg)
            entry["error"] = _rel_error(out, ref)
            entry["us"] = round(
                do_bench(
                    lambda cfg=cfg: fp8_gate_up_geglu_fused(x, packed_values, packed_scales, config=cfg),
                    warmup=25,
                    rep=200,
                    return_mode="median",
                )
                * 1e3,
                2,
            )
            entry["tflops"] = round(flops / (entry["us"] * 1e6), 1)
        except Exception as err:  # noqa: BLE001 - a tile that cannot run here is reported, not fatal
            entry["failed"] = f"{type(err).__name__}: {str(err)[:200]}"
        sweep.append(entry)
    row["fp8_fused_sweep"] = sweep
    best = min((e for e in sweep if "us" in e), key=lambda e: e["us"])
    row["fp8_fused_default_us"] = row["fp8_fused_us"]
    row["fp8_fused_config"] = best["config"]
    row["fp8_fused_us"] = best["us"]
    row["fp8_fused_tflops"] = round(flops / (best["us"] * 1e6), 1)
    del row["fp8_quantize_tflops"]  # not a GEMM: its time is what matters
    row["fp8_error"] = _rel_error(ways["fp8"](), ref)
    row["fp8_fused_error"] = _rel_error(ways["fp8_fused"](), ref)
    row["bf16_fused_error"] = _rel_error(ways["bf16_fused"](), ref)
    row["fp8_fused_over_bf16_fused"] = round(row["bf16_fused_us"] / row["fp8_fused_us"], 3)
    row["meets_target"] = row["fp8_fused_over_bf16_fused"] >= TARGET
    row["fp8_over_bf16_fused"] = round(row["bf16_fused_us"] / row["fp8_us"], 3)
    row["fp8_gemm_over_bf16_fused"] = round(row["bf16_fused_us"] / row["fp8_gemm_us"], 3)
    return row


RESULTS = ("h100_fp8_gate_up", "h200_fp8_gate_up")


def tables(data: dict[str, Any]) -> dict[str, tuple[pd.DataFrame, str]]:
    """The rates lesson 06 shows: per shape, the bf16 and FP8 fused kernels, cuBLAS's e4m3 GEMM alone, the error."""
    rows = [
        {
            "shape": f"M={r['m']} {r['dim']}->{r['hidden']}",
            "bf16_fused_us": r["bf16_fused_us"],
            "fp8_fused_us": r["fp8_fused_us"],
            "bf16_fused_tflops": r["bf16_fused_tflops"],
            "fp8_fused_tflops": r["fp8_fused_tflops"],
            "fp8_over_bf16": r["fp8_fused_over_bf16_fused"],
            "target": TARGET,
            "meets_target": r["fp8_fused_over_bf16_fused"] >= TARGET,
            "cublas_fp8_gemm_us": r["fp8_gemm_us"],
            "cublas_fp8_gemm_tflops": r["fp8_gemm_tflops"],
            "fp8_quantize_us": r["fp8_quantize_us"],
            "bf16_rel_error": r["bf16_fused_error"],
            "fp8_rel_error": r["fp8_fused_error"],
        }
        for r in data["rows"]
    ]
    about = (
        "per shape: time and TFLOP/s of the bf16 and FP8 (e4m3, per-row scales, bf16 out) fused gate+up paths (the "
        "FP8 one's best tile of the sweep; its time includes quantizing x), their ratio, cuBLAS's e4m3 GEMM alone "
        "on quantized inputs (no epilogue), the quantize pass alone, and each path's relative error against float32"
    )
    return {"rates": (pd.DataFrame(rows), about)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the JSON to write")
    parser.add_argument("--shapes", type=int, default=len(SHAPES), help="measure only the first N shapes")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9):
        parser.error("the FP8 path needs an NVIDIA GPU of compute capability 8.9 or newer")
    rows = []
    for m, dim, hidden in SHAPES[: args.shapes]:
        log(f"M={m} {dim}->{hidden} ...")
        rows.append(measure_shape(m, dim, hidden))
        log(str(rows[-1]))
        r = rows[-1]
        log(
            f"  fp8_fused {r['fp8_fused_us']} us ({r['fp8_fused_config']}): {r['fp8_fused_over_bf16_fused']}x "
            f"bf16_fused (target {TARGET}x), error {r['fp8_fused_error']:.3g}; quantize pass {r['fp8_quantize_us']} us"
        )
        # written after every shape: a run cut short keeps what it measured
        data = {"provenance": provenance(torch.device("cuda"), "python -m benchmarks fp8-gate-up"), "rows": rows}
        write_json(args.out, store_tables(data, tables(data)))
    log(f"wrote {args.out}")
    return 0
