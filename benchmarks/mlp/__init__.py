"""Benchmark every GeGLU MLP variant of notebook 06 in one process: several shapes, training, a sweep over M.

    python -m benchmarks mlp                        # on an H200 (about 6 minutes): writes benchmarks/results/h200_mlp_variants.json
    python -m benchmarks mlp --shapes blog --sweep-m '' --out /tmp/blog.json        # the blog shape only
    python -m benchmarks mlp --device cpu --quick --out /tmp/mlp_variants_cpu.json   # CI smoke run, < 1 min

Variants (helpers/mlp/variants.py): eager, torch.compile (default), torch.compile
max-autotune-no-cudagraphs, Liger's LigerGEGLUMLP (if liger-kernel imports), the course's GeGLU
kernel in the MLP (two ways), the course's fused gate+up GEMM with a GeGLU epilogue. For each, at
each shape (benchmarks/mlp/shapes.py; --shapes picks them): kernels per forward and kernel time
(torch.profiler), wall time per call with and without a synchronise after each call, host
overhead (synchronised wall time minus kernel time), host time per call, time per call replayed
from a CUDA graph, achieved TFLOP/s and % of the floor against ceilings measured in the same run,
relative error against a float32 reference. Training at the main shape: step time (forward +
backward), peak memory and bytes saved for the backward, for eager, compile, Liger and the
course's fused MLP in its save and recompute modes. Then kernel, wall and graphed times for M =
batch x seq from 128 to 32768 (seq 128) at the main shape's dims. The JSON holds the raw
measurements and the tables the lessons read (``tables.py``); the end of the output checks the
course kernel's targets on this run.

Progress is printed as it goes; the JSON is rewritten after every stage, so an interrupted run
still leaves what it measured (``"complete": false``). ``--budget-s`` (default 330) skips stages
that would end later, and says so in the JSON ("skipped", "sweep.truncated").
``COURSE_PORTABLE_KERNELS=1`` measures the course's kernels on their portable (non-TMA) path.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import torch

from helpers.mlp.model import MLPShape
from helpers.mlp.variants import VARIANT_NAMES

from ..common import (
    ROOT,
    default_out_allowed,
    iter_sizes,
    log,
    store_tables,
    subject_parser,
    variants_table,
    write_json,
)
from . import run as mlp_run
from .shapes import GPU_SHAPES, SHAPES
from .tables import RESULTS, tables

__all__ = ["RESULTS", "main", "tables"]
QUICK_SHAPE = MLPShape(batch=1, seq=16, dim=32, hidden=64)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = subject_parser(
        "mlp",
        __doc__,
        "default: cuda when available, else cpu",
        "tiny shape, few steps, a 2-size sweep of the uncompiled variants (CI smoke run)",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"JSON to write (default on an H200: {mlp_run.RESULTS_PATH.relative_to(ROOT)}; "
        "required elsewhere, so other machines never write an h200_* file)",
    )
    ap.add_argument(
        "--shapes",
        default=None,
        help=f"comma-separated presets, the first is the main one: {','.join(SHAPES)}, or the tags model, decode "
        "(default GPU: all but tiny; CPU: tiny)",
    )
    ap.add_argument(
        "--variants",
        default=None,
        help=f"inference variants at the main shape, comma-separated subset of {','.join(VARIANT_NAMES)}",
    )
    ap.add_argument("--no-training", action="store_true", help="skip the training measurements")
    ap.add_argument("--no-graphs", action="store_true", help="skip the CUDA graph replays")
    ap.add_argument(
        "--sweep-m",
        default=None,
        help="comma-separated M sizes, multiples of the sweep seq (default GPU: 128,...,32768); '' for no sweep",
    )
    ap.add_argument(
        "--budget-s",
        type=float,
        default=330.0,
        help="skip stages that would end after this many seconds (default 330: the run ends within 6 minutes)",
    )
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        print("--device cuda: no CUDA GPU here. Use --device cpu --quick for the smoke run.", file=sys.stderr)
        return 2
    device_name = torch.cuda.get_device_name(0) if device == "cuda" else "CPU"
    out = args.out
    if out is None:
        if "H200" not in device_name:
            print(
                f"this machine ({device_name}) is not an H200: pass --out PATH (the default "
                f"{mlp_run.RESULTS_PATH.relative_to(ROOT)} holds H200 results only)",
                file=sys.stderr,
            )
            return 2
        out = mlp_run.RESULTS_PATH
    if not default_out_allowed(device_name, out):
        print(
            f"refusing to write {device_name} results to {out}: files named h200_* hold H200 results only",
            file=sys.stderr,
        )
        return 2

    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()] if args.shapes else None
    if shapes is None:
        shapes = list(GPU_SHAPES) if device == "cuda" and not args.quick else ["tiny"]
    kwargs: dict = {"shapes": shapes, "graphs": not args.no_graphs}
    if args.variants:
        kwargs["variants"] = [v.strip() for v in args.variants.split(",") if v.strip()]
    if args.no_training:
        kwargs["training"] = ()
    if args.sweep_m is not None:
        sweep_m = iter_sizes(args.sweep_m)
    elif args.quick:
        sweep_m = [16, 32]
    else:
        sweep_m = list(mlp_run.GPU_SWEEP_M) if device == "cuda" else [128, 256]
    if args.quick:
        kwargs.update(shape=QUICK_SHAPE, steps=2, warmup=1, e2e_iters=3, train_steps=2, sweep_steps=2, sweep_seq=16)
        # Compiling again at every sweep size costs ~10 s on 2 CPU cores: keep the quick sweep uncompiled.
        kwargs["sweep_variants"] = [v for v in SHAPES["tiny"].variants if v not in ("compile", "liger")]
        kwargs["sweep_note"] = (
            "--quick leaves compiled variants out of the sweep: each new shape recompiles (~10 s on 2 CPU cores)"
        )
    elif device == "cpu":
        kwargs.update(steps=3, warmup=1, e2e_iters=10, train_steps=3, sweep_steps=2)
    command = " ".join(
        shlex.quote(a) for a in ["python", "-m", "benchmarks", "mlp", *(sys.argv[1:] if argv is None else argv)]
    )

    def save(partial: dict) -> None:
        try:
            data = store_tables(partial, tables(partial))
        except (KeyError, ValueError, StopIteration):  # a stage in progress may lack a table's input: keep its raw rows
            data = dict(partial)
        write_json(out, data)

    try:
        result = mlp_run.run(
            device, sweep_m=sweep_m, budget_s=args.budget_s, log=log, on_stage=save, command=command, **kwargs
        )
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    save(result)
    print()
    print(variants_table(result))
    log(f"wrote {out}")
    return 0
