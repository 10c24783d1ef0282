"""Why the course times end to end one way: the same calls timed by every method people use, side by side.

    python -m benchmarks timing-methods --out benchmarks/results/h200_timing_methods.json   # on a GPU (~1 min)
    python -m benchmarks timing-methods --device cpu --quick --out /tmp/timing.json         # the CPU smoke run

For each MLP variant at one shape, in one process, per call:

- ``kernel_us``: the sum of its kernels' device time (profiler): the GPU's work alone;
- ``events_us``: CUDA events recorded just before and after one call, the stream idle before it
  (the start event runs as soon as the host reaches it; kernels the host enqueues late stretch the
  span, but the host's work before its first launch and the synchronise's return are outside it);
- ``sync_us``: wall clock of one call followed by a synchronise (``helpers.measure.timing.time_per_call``):
  what a caller that needs the result waits;
- ``back_to_back_us`` and ``enqueue_us``: calls issued without a synchronise between them, and the
  host's time to issue one (``time_end_to_end``): the throughput of a loop, and the host's own cost;
- the SM clock (MHz) sampled before and after, to see whether the GPU clocked down between calls.

Each is the median of ``--rounds`` rounds, with the range, so a difference can be told from noise.
The tables say which method hides what; the course reports ``sync_us`` as end to end (with
``kernel_us`` and ``enqueue_us`` beside it) and ``back_to_back_us`` as a loop's rate.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from helpers.measure.device import nvidia_smi, provenance, resolve_device
from helpers.measure.profile import profile
from helpers.measure.timing import time_end_to_end, time_per_call
from helpers.mlp.model import MLPShape, SimpleGeGLUMLP
from helpers.mlp.variants import VariantUnavailable, build_variant

from .common import default_out_allowed, log, store_tables, write_json

RESULTS = ("h200_timing_methods",)
GPU_VARIANTS = ("eager", "compile", "course-fused")
CPU_VARIANTS = ("eager",)


def _sm_clock_mhz() -> float | None:
    text = nvidia_smi("clocks.sm")
    try:
        return float(text) if text else None
    except ValueError:
        return None


def _events_us(fn: Any, x: torch.Tensor, calls: int) -> float:
    """Median span between CUDA events recorded around one call, the stream drained before each."""
    spans = []
    for _ in range(calls):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(x)
        end.record()
        torch.cuda.synchronize()
        spans.append(start.elapsed_time(end) * 1e3)
    return statistics.median(spans)


def _kernel_us(fn: Any, x: torch.Tensor) -> float | None:
    if x.device.type != "cuda":
        return None
    trace = profile(fn, x, steps=5, warmup=2, label="timing")
    k = trace.kernels()
    return float(k["duration_us"].sum()) / len(trace.steps)


def measure(device: str | None, shape: MLPShape, dtype: torch.dtype, rounds: int, calls: int) -> dict[str, Any]:
    """Every method on every variant, `rounds` times each; the raw rounds (JSON-ready)."""
    dev = resolve_device(device)
    torch.manual_seed(0)
    mlp = SimpleGeGLUMLP(shape.dim, shape.hidden).to(dev, dtype).eval()
    x = torch.randn(shape.batch, shape.seq, shape.dim, device=dev, dtype=dtype)
    rows: dict[str, Any] = {}
    for name in GPU_VARIANTS if dev.type == "cuda" else CPU_VARIANTS:
        try:
            fn = build_variant(name, mlp).fn
        except VariantUnavailable as err:
            rows[name] = {"status": "unavailable", "reason": str(err)}
            continue
        with torch.no_grad():
            for _ in range(3):
                fn(x)  # compile, tune, allocate
        record: dict[str, Any] = {"status": "ok", "kernel_us": _kernel_us(fn, x), "rounds": []}
        for r in range(rounds):
            clock_before = _sm_clock_mhz() if dev.type == "cuda" else None
            with torch.no_grad():
                e2e = time_end_to_end(fn, x, iters=calls)
                one = {
                    "sync_us": time_per_call(fn, x, repeats=calls, warmup=1) * 1e6,
                    "back_to_back_us": e2e["nosync_us"],
                    "enqueue_us": e2e["enqueue_us"],
                    "events_us": _events_us(fn, x, calls) if dev.type == "cuda" else None,
                }
            one["sm_clock_mhz"] = [clock_before, _sm_clock_mhz() if dev.type == "cuda" else None]
            record["rounds"].append(one)
            log(
                f"{name} round {r + 1}/{rounds}: "
                + ", ".join(f"{k} {v:.1f}" for k, v in one.items() if isinstance(v, float))
            )
        rows[name] = record
    return {
        "benchmark": "timing-methods",
        "provenance": provenance(dev),
        "config": {"shape": shape.__dict__ | {"tokens": shape.tokens}, "dtype": str(dtype).removeprefix("torch."),
                   "rounds": rounds, "calls": calls},
        "variants": rows,
    }  # fmt: skip


def tables(data: dict[str, Any]) -> dict[str, tuple[pd.DataFrame, str]]:
    """Per variant and method: median and range over the rounds, and what each method leaves out."""
    methods = ("sync_us", "events_us", "back_to_back_us", "enqueue_us")
    rows = []
    for name, v in data["variants"].items():
        if v.get("status") != "ok":
            continue
        row: dict[str, Any] = {"variant": name, "kernel_us": v.get("kernel_us")}
        for m in methods:
            values = [r[m] for r in v["rounds"] if r.get(m) is not None]
            row[m] = statistics.median(values) if values else None
            row[f"{m}_min"], row[f"{m}_max"] = (min(values), max(values)) if values else (None, None)
        clocks = [c for r in v["rounds"] for c in r.get("sm_clock_mhz") or [] if c is not None]
        row["sm_clock_min_mhz"], row["sm_clock_max_mhz"] = (min(clocks), max(clocks)) if clocks else (None, None)
        if row["sync_us"] is not None and row["kernel_us"] is not None:
            row["host_and_sync_us"] = row["sync_us"] - row["kernel_us"]
        rows.append(row)
    frame = pd.DataFrame(rows)
    return {
        "methods": (
            frame,
            "per call (us): profiler kernel time, synchronised wall (the course's end to end), CUDA events around "
            "one call, back-to-back wall and host enqueue; median and range over the rounds; SM clock range",
        )
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default=None, help="cuda (default when present) or cpu")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="a tiny shape and 3 rounds (the CPU smoke run)")
    args = parser.parse_args(argv)
    if not 3 <= args.rounds <= 50 or not 1 <= args.calls <= 10_000:
        parser.error("--rounds must be 3-50 and --calls 1-10000")
    shape = MLPShape(batch=1, seq=16, dim=32, hidden=64) if args.quick else MLPShape()
    dev = resolve_device(args.device)
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    started = time.perf_counter()
    data = measure(args.device, shape, dtype, 3 if args.quick else args.rounds, 5 if args.quick else args.calls)
    if not default_out_allowed(data["provenance"]["device"], args.out):
        parser.error(f"{args.out.name} is named for an H200 but this device is {data['provenance']['device']}")
    data["elapsed_s"] = time.perf_counter() - started
    data = store_tables(data, tables(data))
    write_json(args.out, data)
    print(pd.DataFrame(data["tables"]["methods"]["rows"], columns=data["tables"]["methods"]["columns"]).to_string())
    log(f"wrote {args.out}")
    return 0
