"""Measure the ceilings every "% of floor" of the course divides by, and record them with provenance.

    python -m benchmarks ceilings --out benchmarks/results/h200_ceilings.json      # on the H200 (~15 s)
    python -m benchmarks ceilings --device cpu --quick --out /tmp/cpu_ceilings.json  # the CPU path (CI)

The ceilings are what :func:`helpers.measure_ceilings` measures, the one way the course measures
them: large device-to-device copies, sums and fills (bytes read + written, read, written: the
memory roof is the fastest) and the best of a few large bf16 matmuls, each the median of 10 runs
timed with CUDA events after 3 warm-ups. ``helpers.reference_ceilings()`` reads the table this
program stores, so the notebooks, tests and benchmarks all use these numbers.

The measurement is repeated `--repeats` times (each a fresh median of 10): each ceiling is the best
of the repeats, and the spread of all of them is recorded next to it. A ceiling is the fastest the
GPU was seen to go, so a repeat that ran slower (the matmul rate of an H200 moves by several percent
with its power and clocks) lowers no "% of floor";
tests/measure/test_ceilings.py allows no shipped percentage above 100 + its tolerance.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.measure.ceilings import measure_ceilings
from helpers.measure.device import provenance, resolve_device

from .common import default_out_allowed, log, store_tables, write_json

CEILINGS_SCHEMA = "course-ceilings/1"
RESULTS = ("h200_ceilings",)


def tables(data: dict[str, Any]) -> dict[str, tuple[pd.DataFrame, str]]:
    """The stored tables of a ceilings result: the ceilings themselves (one row) and every repeat."""
    c = dict(data["ceilings"])
    c["matmul_shape"] = "x".join(str(v) for v in c["matmul_shape"])
    c["bandwidth_bytes_per_s"] = max(
        c["copy_bytes_per_s"], c.get("read_bytes_per_s") or 0, c.get("write_bytes_per_s") or 0
    )
    spread = pd.DataFrame([{"quantity": k, "spread_pct": v} for k, v in data.get("spread_pct", {}).items()])
    return {
        "ceilings": (
            pd.DataFrame([c]),
            "the ceilings (bytes/s, FLOP/s): each the best of the repeats; the memory roof is bandwidth_bytes_per_s",
        ),
        "repeats": (
            pd.DataFrame(data.get("repeats", [])),
            "every repeat's copy, read, write bandwidth (TB/s) and matmul rate (TFLOP/s)",
        ),
        "spread": (spread, "spread of the repeats, % of the best"),
    }


def measure(device: str | None, repeats: int) -> dict:
    """Ceilings of `device` (each the best of `repeats` independent measurements) and the spread of all."""
    dev = resolve_device(device)
    runs = []
    measured = []
    for i in range(repeats):
        c = measure_ceilings(dev, refresh=True)
        measured.append(c)
        read_tbps = (c.read_bytes_per_s or 0.0) / 1e12
        write_tbps = (c.write_bytes_per_s or 0.0) / 1e12
        runs.append(
            {
                "copy_tbps": c.copy_tbps,
                "read_tbps": read_tbps,
                "write_tbps": write_tbps,
                "matmul_tflops": c.matmul_tflops,
                "recorded": c.recorded,
            }
        )
        log(
            f"run {i + 1}/{repeats}: copy {c.copy_tbps:.4g} TB/s, read {read_tbps:.4g} TB/s, write {write_tbps:.4g} TB/s, "
            f"{c.matmul_dtype} matmul {c.matmul_tflops:.4g} TFLOP/s"
        )
    spread_pct = {
        key: 100 * (max(r[key] for r in runs) - min(r[key] for r in runs)) / max(r[key] for r in runs)
        for key in ("copy_tbps", "read_tbps", "write_tbps", "matmul_tflops")
    }
    fastest_matmul = max(measured, key=lambda c: c.matmul_flop_per_s)  # its shape is the one that won
    best = replace(
        fastest_matmul,
        method=f"{fastest_matmul.method}; best of {len(measured)} repeats",
        copy_bytes_per_s=max(c.copy_bytes_per_s for c in measured),
        read_bytes_per_s=max((c.read_bytes_per_s for c in measured if c.read_bytes_per_s), default=None),
        write_bytes_per_s=max((c.write_bytes_per_s for c in measured if c.write_bytes_per_s), default=None),
        fp8_matmul_flop_per_s=max((c.fp8_matmul_flop_per_s for c in measured if c.fp8_matmul_flop_per_s), default=None),
    )
    data = {
        "schema": CEILINGS_SCHEMA,
        "complete": True,
        "provenance": provenance(dev),
        "ceilings": best.as_dict(),
        "repeats": runs,
        "spread_pct": spread_pct,
    }
    return store_tables(data, tables(data))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--device", default=None, help="cuda (default when present) or cpu")
    parser.add_argument("--repeats", type=int, default=3, help="independent measurements (the best of each is kept)")
    parser.add_argument("--quick", action="store_true", help="one measurement (the CPU check in CI)")
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    if not 1 <= repeats <= 20:
        parser.error(f"--repeats must be between 1 and 20, got {repeats}")
    result = measure(args.device, repeats)
    if not default_out_allowed(result["provenance"]["device"], args.out):
        parser.error(f"{args.out.name} is named for an H200 but this device is {result['provenance']['device']}")
    write_json(args.out, result)
    c = result["ceilings"]
    print(f"\n{c['device']} (torch {c['torch_version']}): {c['method']}")
    print(f"{'ceiling':16s} {'value':>10s} {'spread over runs':>18s}")
    print(f"{'copy TB/s':16s} {c['copy_bytes_per_s'] / 1e12:10.4g} {result['spread_pct']['copy_tbps']:17.2f}%")
    print(f"{'read TB/s':16s} {c['read_bytes_per_s'] / 1e12:10.4g} {result['spread_pct']['read_tbps']:17.2f}%")
    print(f"{'write TB/s':16s} {c['write_bytes_per_s'] / 1e12:10.4g} {result['spread_pct']['write_tbps']:17.2f}%")
    print(
        f"{'matmul TFLOP/s':16s} {c['matmul_flop_per_s'] / 1e12:10.4g} {result['spread_pct']['matmul_tflops']:17.2f}%"
    )
    if c.get("fp8_matmul_flop_per_s"):
        print(f"{'FP8 matmul TFLOP/s':16s} {c['fp8_matmul_flop_per_s'] / 1e12:10.4g}")
    print(f"wrote {args.out}")
    return 0
