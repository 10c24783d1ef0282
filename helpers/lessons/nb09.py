"""Lesson 09, Several GPUs: a data-parallel training step read from per-rank traces: what this notebook alone uses.

Its exercises (explanations and hints), where its runs go, the runs on GPUs it reads (launched here,
or recorded on two H200s) and their tables, the worker script's own code; and the engine and model
functions only this lesson uses.
"""

from __future__ import annotations

import ast
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from ..distributed.launch import SCRIPT, LaunchError, launch_command, launch_run, run_program
from ..distributed.options import RunOptions
from ..distributed.predict import bucket_schedule, predict_bucket_change
from ..distributed.runs import SUMMARY, load_run, rank_files, run_summary, runs_table
from ..distributed.workloads import configurations
from ..paths import LOCAL_TRACES_DIR, TRACES_DIR
from ..trace.collectives import collectives, communication_per_step, rank_table
from ..trace.compare import kernel_breakdown
from ..trace.overlap import overlap
from ..trace.ranks import MultiRankTrace
from .exercises import Exercise, Exercises
from .results import Results, load_results

__all__ = [
    "EXERCISES", "LaunchError", "RunOptions", "bucket_schedule", "collectives", "communication_per_step",
    "configurations", "gpu_results", "gpu_run", "kernel_breakdown", "launch_command", "launch_run", "load_run",
    "overlap", "predict_bucket_change", "prediction_table", "rank_table", "reference_run", "run_summary",
    "runs_folder", "runs_table", "script_source",
]  # fmt: skip

EXERCISES = Exercises(
    "09",
    one_bucket_allreduces=Exercise(
        "all-reduces per step with one big bucket",
        explain="Given a bucket_cap_mb, DDP caps its first bucket at the same size as the others (the 1 MiB first "
        "bucket is only for DDP's default cap), so every gradient fits in the one bucket: one all-reduce per step.",
        hint="bucket_cap_mb is larger than all the gradients: how many buckets of that size do they fill?",
    ),
    more_than_half_hidden=Exercise(
        "more than half of the all-reduce time hidden (25 MB buckets, GPUs)",
        explain="{hidden:.0f}% hidden: the buckets are all-reduced on NCCL's stream while the backward's GEMMs run; "
        "what is left is mostly the last buckets, whose gradients are ready only when the backward ends.",
        hint="an all-reduce on its own stream can run beside the backward's kernels; which buckets cannot?",
    ),
    one_bucket_change_ms=Exercise(
        "step-time change with one bucket (ms), as the trace predicts it",
        explain="One all-reduce of every gradient after the backward: its whole time is added to the step, and the "
        "tail the buckets left is gone (the replay fits a latency and a bandwidth to every bucket).",
        hint="all gradient bytes / the bandwidth of the unhidden all-reduces, minus the tail "
        "(last all-reduce end - backward end), both on the rank that waited for nobody",
        rel_tol=0.25,
    ),
    all_gathers_per_step=Exercise(
        "all-gathers per step (FSDP2)",
        explain="one per block in the forward, one per block again in the backward (each block freed its gathered "
        "weights after its forward), and one for the root, whose weights stay gathered until the backward.",
        hint="forward: the root and every block; backward: which weights were freed after the forward?",
    ),
    fsdp_state_fraction=Exercise(
        "FSDP2's model state per rank, as a fraction of DDP's",
        explain="every weight, gradient and optimizer moment is split in N shards (padded to a multiple of N).",
        hint="DDP keeps a full copy of everything on every rank; FSDP2 shards it across the ranks",
        rel_tol=0.05,
    ),
    straggler_rank=Exercise(
        "the straggler",
        explain="the straggler spends the least time in collectives: when it arrives, the others are already "
        "there, waiting inside theirs.",
        hint="who waits least in its collectives?",
    ),
    straggler_cost_ms=Exercise(
        "what the straggler costs per step (ms)",
        explain="it sleeps {sleep_ms:g} ms per step before its first operator; the other ranks wait that long at "
        "their first collective, so the whole job pays it.",
        hint="the host time before the step's first operator (start_idle_us): how much later does one rank start?",
        rel_tol=0.25,
    ),
)
check, hint, summary = EXERCISES.check, EXERCISES.hint, EXERCISES.summary
assert_all_correct, reset = EXERCISES.assert_all_correct, EXERCISES.reset

RUNS_PARENT = LOCAL_TRACES_DIR / "09_several_gpus"
REFERENCE_PREFIX = "h200x2_"  # traces/h200x2_<configuration>/: the runs recorded on two H200s
REFERENCE_RESULTS = "h200x2_ddp"  # their results (benchmarks/results/h200x2_ddp.json)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def runs_folder() -> Path:
    """``traces/local/09_several_gpus/<pid>/`` for this kernel's runs (a lesson and its learner copy never share one).

    Folders left by kernels that have ended are removed (only those named by a process id).
    """
    RUNS_PARENT.mkdir(parents=True, exist_ok=True)
    for old in RUNS_PARENT.iterdir():
        if old.is_dir() and old.name.isdigit() and int(old.name) != os.getpid() and not _alive(int(old.name)):
            shutil.rmtree(old, ignore_errors=True)
    mine = RUNS_PARENT / str(os.getpid())
    mine.mkdir(exist_ok=True)
    return mine


def reference_run(name: str) -> Path | None:
    """The folder of run `name` recorded on two H200s (``traces/h200x2_<name>/``), or None when not recorded."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a run name such as 'ddp_bucket25', got {name!r}")
    folder = TRACES_DIR / f"{REFERENCE_PREFIX}{name}"
    try:
        rank_files(folder)
    except FileNotFoundError:
        return None
    return folder


def _on_gpus(folder: str | os.PathLike | None) -> bool:
    return folder is not None and (Path(folder) / SUMMARY).is_file() and run_summary(folder).get("backend") == "nccl"


def gpu_run(name: str, live: str | os.PathLike | None = None) -> tuple[MultiRankTrace, dict[str, Any]] | None:
    """``(run, summary)`` of a run on GPUs: `live` (a run launched here) when it ran on GPUs, else the H200 recording.

    None when neither exists.
    """
    folder = live if _on_gpus(live) else reference_run(name)
    if folder is None:
        return None
    return load_run(folder), run_summary(folder)


def gpu_results(runs: str | os.PathLike | None = None, timeout_s: float = 300.0) -> Results:
    """The tables of the runs on GPUs: of the runs under `runs` when they ran on GPUs, else of the H200 recording.

    The runs launched here are read by ``python -m benchmarks ddp --runs`` (a program, with a
    timeout and progress), into ``<runs>/ddp.json``.
    """
    folders = [p for p in Path(runs).iterdir() if (p / SUMMARY).is_file()] if runs is not None else []
    if not folders or not all(_on_gpus(p) for p in folders):
        return load_results(REFERENCE_RESULTS)
    out = Path(runs) / "ddp.json"
    cmd = [sys.executable, "-m", "benchmarks", "ddp", "--runs", str(runs), "--out", str(out)]
    code, tail, errors = run_program(cmd, Path(runs) / "ddp.log", timeout_s, "reading the runs", r"\[\s*\d+\.\ds\]")
    if code != 0:
        raise LaunchError(f"reading the runs failed: {'; '.join(errors) or tail[-1:]}; see {Path(runs) / 'ddp.log'}")
    return load_results(out)


def prediction_table(rows: list[tuple[str, float | None, float]]) -> pd.DataFrame:
    """``(prediction, predicted_change_ms, measured_change_ms)`` rows, with the error relative to the measured change."""
    if not rows:
        raise ValueError("prediction_table needs at least one (what, predicted, measured) row")
    out = pd.DataFrame(rows, columns=["prediction", "predicted_change_ms", "measured_change_ms"])
    change = out["measured_change_ms"].abs()
    out["error_pct"] = 100.0 * (out["predicted_change_ms"] - out["measured_change_ms"]).abs() / change
    return out


def script_source(function: str) -> str:
    """The source of one function of ``scripts/ddp_step.py``, the program every rank runs."""
    text = SCRIPT.read_text(encoding="utf-8")
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name == function:
            return ast.get_source_segment(text, node) or ""
    names = [n.name for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)]
    raise KeyError(f"{SCRIPT.name} has no function {function!r}; its functions: {', '.join(names)}")
