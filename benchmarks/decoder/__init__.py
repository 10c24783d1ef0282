"""The whole decoder in every configuration of notebook 08's final table, measured in one process.

    python -m benchmarks decoder              # on an H200: writes benchmarks/results/h200_decoder.json (<= 4 min)
    python -m benchmarks decoder --resume     # a second run: measures what the first one skipped
    python -m benchmarks decoder --device cpu --quick --out /tmp/decoder_cpu.json   # CI smoke run, < 1 min

The 1B model (16 layers, hidden 2048, bf16) in each configuration of ``configurations.py``: eager;
decode replayed from a CUDA graph; compiled blocks; the course's layers (one QKV GEMM, the fused
gate+up GeGLU kernel, its flash attention), alone and compiled; MLP recomputation; SDPA backends
forced one at a time. Measured: prefill tokens/s, decode at batch 1 (time per token, % of the
weight-read floor), a training step's time and peak memory; the CUDA-graph decode step predicted
from an eager trace; the transfer exercise's variant and its fix. Everything runs in priority order
inside ``--budget-s``; what does not fit, or fails, is recorded with the reason, and the file is
rewritten after each measurement (``"complete": false`` until the end) with its stored tables
(``tables.py``). The end of the run prints the final table and the benchmark's targets.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from ..common import RESULTS_DIR, device_and_out, log, store_tables, subject_parser, write_json
from .configurations import ORDER
from .tables import RESULTS, summary, tables

__all__ = ["RESULTS", "main", "tables"]
DEFAULT_OUT = RESULTS_DIR / f"{RESULTS[0]}.json"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = subject_parser(
        "decoder",
        __doc__,
        "default: cuda when available, else cpu",
        "tiny model, no compiled or graphed configurations (CI)",
    )
    ap.add_argument("--out", type=Path, default=None, help=f"JSON to write (default on an H200: {DEFAULT_OUT.name})")
    ap.add_argument("--config", default=None, help="decoder preset (default: 1b on a GPU, small on a CPU)")
    ap.add_argument("--configurations", default=None, help=f"comma-separated subset of {','.join(ORDER)}")
    ap.add_argument("--budget-s", type=float, default=225.0, help="stop starting measurements after this (default 225)")
    ap.add_argument(
        "--resume",
        action="store_true",
        help="keep the successful measurements of the existing --out file; measure only what it lacks",
    )
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    chosen = device_and_out(args.device, args.out, DEFAULT_OUT)
    if chosen is None:
        return 2
    device, out = chosen
    import torch

    from .run import run

    threads = torch.get_num_threads()
    if device == "cpu":
        # One thread: on a small shared machine, parallel regions of tiny ops wait for descheduled
        # threads and a smoke run takes minutes instead of seconds.
        torch.set_num_threads(1)
    names = [n.strip() for n in args.configurations.split(",") if n.strip()] if args.configurations else None
    given = sys.argv[2:] if argv is None else argv
    command = " ".join(shlex.quote(a) for a in ["python", "-m", "benchmarks", "decoder", *given])

    def save(partial: dict) -> None:
        write_json(out, store_tables(partial, tables(partial)))

    previous = json.loads(out.read_text()) if args.resume and out.is_file() else None
    try:
        result = run(
            device,
            config=args.config,
            configurations=names,
            quick=args.quick,
            budget_s=args.budget_s,
            log=log,
            on_stage=save,
            command=command,
            previous=previous,
        )
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    finally:
        torch.set_num_threads(threads)
    save(result)
    print(f"\n{summary(result)}")
    log(f"wrote {out}")
    return 0
