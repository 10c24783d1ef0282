"""Notebook 09's reference run on two GPUs: DDP buckets, FSDP2 prefetching, a straggler; per-rank traces and results.

    python -m benchmarks ddp --out "$OUT"                         # on 2 H200s (nvidia-h200-x2): about 3 min
    python -m benchmarks ddp --device cpu --quick --out /tmp/ddp  # CI smoke run: gloo, tiny model, < 2 min
    python -m benchmarks ddp --runs traces/local/09_several_gpus/123   # runs launched already (notebook 09 on GPUs)
    python -m benchmarks ddp --repredict benchmarks/results/h200x2_ddp.json --note "what changed"
        # (CPU) the predictions made again from the committed traces, the old ones kept beside them
    python -m benchmarks rejudge ddp                              # the stored tables written again

Each configuration of helpers/distributed/workloads.py is its own torchrun launch of
scripts/ddp_step.py on ``--nproc`` ranks (default 2). Writes, under ``--out``, the layout of the
repository:

    <out>/traces/h200x2_<configuration>/rank<r>.json.gz, summary.json, launch.log   -> copy to traces/
    <out>/benchmarks/results/h200x2_ddp.json (+ .log: this output)                  -> copy to benchmarks/results/

(``cpu2_`` instead of ``h200x2_`` for the CPU smoke run, ``cpu_ddp.json`` for its results). The
JSON is rewritten after every configuration (``"complete": false`` until the end). With ``--runs``,
the results of the folders found there go to ``<folder>/ddp.json`` (or ``--out``). NCCL settings
in the environment (NCCL_NVLS_ENABLE=0 ...) reach every rank unchanged.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import torch

from helpers.distributed.workloads import ORDER

from ..common import ROOT, log, store_tables, subject_parser, write_json
from . import run as runner
from .tables import tables

RESULTS = ("h200x2_ddp",)
__all__ = ["RESULTS", "main", "tables"]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = subject_parser(
        "ddp", __doc__, "default: cuda when there are enough GPUs", "the tiny model, CPU-sized buckets (CI)"
    )
    ap.add_argument("--out", type=Path, help="root folder of the outputs (see above); with --runs, the JSON file")
    ap.add_argument("--runs", type=Path, help="a folder of runs launched already, one per configuration")
    ap.add_argument("--repredict", type=Path, help="a results JSON whose predictions to make again (see above)")
    ap.add_argument("--note", default="", help="with --repredict: what changed in the way of predicting")
    ap.add_argument("--nproc", type=int, default=2, help="ranks (default 2)")
    ap.add_argument("--configurations", default=None, help=f"comma-separated subset of {','.join(ORDER)}")
    ap.add_argument("--budget-s", type=float, default=170.0, help="start no configuration after this (default 170)")
    return ap.parse_args(argv)


def _write(path: Path, data: dict[str, Any]) -> None:
    write_json(path, store_tables(data, tables(data)))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.repredict:
        if not args.note:
            print("error: --repredict needs --note saying what changed", file=sys.stderr)
            return 2
        result = runner.repredict(json.loads(args.repredict.read_text()), ROOT, args.note)
        _write(args.repredict, result)
        print("\n".join(runner.summary_lines(result)))
        return 0
    if args.runs:
        try:
            result = runner.from_runs(args.runs, log=log)
        except ValueError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        out = args.out or args.runs / "ddp.json"
        _write(out, result)
        print("\n".join(runner.summary_lines(result)))
        log(f"wrote {out}")
        return 0
    if args.out is None:
        print("error: --out is required (or --runs, or --repredict)", file=sys.stderr)
        return 2
    device = args.device or ("cuda" if torch.cuda.device_count() >= args.nproc else "cpu")
    on_h200s = device == "cuda" and not args.quick and "H200" in torch.cuda.get_device_name(0)
    prefix = f"h200x{args.nproc}_" if on_h200s else f"{device}{args.nproc}_"
    name = f"{prefix}ddp.json" if on_h200s else f"{device}_ddp.json"
    out = args.out / "benchmarks" / "results" / name
    names = [n.strip() for n in args.configurations.split(",") if n.strip()] if args.configurations else None
    command = " ".join(
        shlex.quote(a) for a in ["python", "-m", "benchmarks", "ddp", *(sys.argv[2:] if argv is None else argv)]
    )
    try:
        result = runner.run(
            device,
            args.out,
            quick=args.quick,
            nproc=args.nproc,
            budget_s=args.budget_s,
            names=names,
            log=log,
            on_stage=lambda partial: _write(out, partial),
            command=command,
            prefix=prefix,
        )
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    _write(out, result)
    print("\n" + "\n".join(runner.summary_lines(result)))
    log(f"wrote {out}")
    return 0
