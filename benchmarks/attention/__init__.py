"""Every attention implementation side by side on one GPU: time, TFLOP/s, % of the matmul ceiling, memory.

    python -m benchmarks attention                 # on an H200: writes benchmarks/results/h200_attention.json
    python -m benchmarks attention --device cpu --quick --out /tmp/attention_cpu.json   # CI smoke run

Causal attention, bf16, head dim 128 and 64, sequence 1024 to 16384, for every SDPA backend, the
course's Triton kernel (TMA and pointer paths, each tuned by a sweep over its tile configurations),
FlexAttention and the hand-written attention (eager and compiled). The JSON, raw rows plus the
tables lessons read (``tables.py``), is rewritten after each pass, so an interrupted run keeps what
it measured (``"complete": false``); ``--budget-s`` skips what is left once the time is used.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from helpers.measure.ceilings import ceilings_from_dict

from ..common import RESULTS_DIR, device_and_out, iter_sizes, log, store_tables, subject_parser, write_json
from .run import VARIANTS, run
from .tables import RESULTS, summary, tables

__all__ = ["RESULTS", "main", "tables"]
RESULTS_PATH = RESULTS_DIR / "h200_attention.json"
QUICK = {"tokens": 64, "hidden": 32, "head_dims": [16], "seqs": [32, 64], "repeats": 2}
QUICK_VARIANTS = ["sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "course", "sdpa-math", "manual-eager", "course-pointer"]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = subject_parser(
        "attention",
        __doc__,
        "default: cuda when available, else cpu",
        "tiny shapes, no compiled variants (CI smoke run)",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="JSON to write (default on an H200: benchmarks/results/h200_attention.json)",
    )
    ap.add_argument("--variants", default=None, help=f"comma-separated subset of {','.join(VARIANTS)}")
    ap.add_argument("--seqs", default=None, help="comma-separated sequence lengths (default 1024,...,16384)")
    ap.add_argument("--head-dims", default=None, help="comma-separated head dims (default 128,64)")
    ap.add_argument(
        "--budget-s", type=float, default=215.0, help="skip what is left after this many seconds (default 215)"
    )
    ap.add_argument(
        "--ceilings",
        type=Path,
        default=None,
        help="JSON of Ceilings.as_dict() to divide by instead of measuring them (a lesson passes its own set)",
    )
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    chosen = device_and_out(args.device, args.out, RESULTS_PATH)
    if chosen is None:
        return 2
    device, out = chosen
    kwargs: dict = {}
    if args.quick:
        kwargs.update(QUICK, variants=QUICK_VARIANTS)
    if args.variants:
        kwargs["variants"] = [v.strip() for v in args.variants.split(",") if v.strip()]
    if args.seqs:
        kwargs["seqs"] = iter_sizes(args.seqs)
    if args.head_dims:
        kwargs["head_dims"] = iter_sizes(args.head_dims)
    if args.ceilings:
        kwargs["ceilings"] = ceilings_from_dict(json.loads(args.ceilings.read_text()))
    argv = sys.argv[1:] if argv is None else argv
    command = " ".join(shlex.quote(a) for a in ["python", "-m", "benchmarks", "attention", *argv])

    def save(partial: dict) -> None:
        write_json(out, store_tables(partial, tables(partial)))

    try:
        result = run(device, budget_s=args.budget_s, log=log, on_stage=save, command=command, **kwargs)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    save(result)
    print(f"\n{summary(result)}", flush=True)
    log(f"wrote {out}")
    return 0
