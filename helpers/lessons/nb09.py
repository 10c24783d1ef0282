"""Lesson 09, Several GPUs: what this notebook alone uses: its exercises, where its runs go, the runs on
GPUs it reads (launched here or recorded on two H200s) and their tables."""

from __future__ import annotations

import ast
import gzip
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..distributed.launch import SCRIPT, LaunchError, command_text, launch_command, launch_run, run_program, shown_path
from ..distributed.options import RunOptions
from ..distributed.predict import allreduce_model, bucket_schedule, job_schedule, predict_bucket_change
from ..distributed.runs import SUMMARY, load_run, rank_files, run_summary, runs_table
from ..distributed.workloads import configurations
from ..paths import TRACES_DIR
from ..trace.collectives import collectives, communication_per_step, rank_table, step_windows
from ..trace.overlap import overlap
from ..trace.ranks import MultiRankTrace
from ..trace.work import kernel_breakdown
from .exercises import Exercise, Exercises, Feedback, Tie
from .nb09_launches import (
    bucket_prediction_text,
    cores_phrase,
    launches_sentence,
    no_faster_text,
    prefetch_answer,
    rank_changes,
    runs_folder,
)
from .nb09_steps import exposed_per_rank_text, job_step_note, job_steps, profiler_cost_text
from .results import Results, load_results
from .rounds import Spread, spread_of, too_close

__all__ = [
    "EXERCISES", "LaunchError", "RunOptions", "bucket_schedule", "collectives", "communication_per_step",
    "configurations", "gpu_results", "gpu_run", "hta_differences", "job_schedule", "kernel_breakdown",
    "command_text", "launch_command", "launch_run", "load_run", "measured_change", "nccl_log_lines", "overlap",
    "per_rank", "shown_path",
    "predict_bucket_change", "prediction_table", "rank_table", "reference_run", "run_summary", "runs_folder",
    "runs_table", "script_source", "timed_steps", "Tie", "allreduce_model", "one_bucket_terms",
    "check_one_bucket", "check_straggler_cost", "param_comms", "check_hidden", "hidden_by_step",
    "bucket_prediction_text", "cores_phrase", "launches_sentence", "no_faster_text", "rank_changes", "prefetch_answer",
    "job_step_note", "job_steps", "exposed_per_rank_text", "profiler_cost_text",
]  # fmt: skip

EXERCISES = Exercises(
    "09",
    one_bucket_allreduces=Exercise(
        "all-reduces per step with one big bucket",
        explain="Given a bucket_cap_mb, DDP caps its first bucket at the same size as the others (the 1 MiB first "
        "bucket is only for DDP's default cap), so every gradient fits in the one bucket: one all-reduce per step.",
        hint="bucket_cap_mb is larger than all the gradients: how many buckets of that size do they fill?",
    ),
    more_than_a_third_hidden=Exercise(
        "more than a third of the all-reduce time hidden (25 MB buckets, GPUs)",
        explain="{hidden:.0f}% hidden on rank {rank}, the rank that waited least ({low:.0f}% to {high:.0f}% over its "
        "{steps} profiled steps): its buckets are all-reduced on NCCL's stream while the backward's kernels run. Of the "
        "{exposed_ms:.1f} ms per step left exposed, {tail_ms:.1f} ms is in the last buckets, those that started after "
        "the backward's end; the rest is in buckets that started during it, in gaps between the backward's kernels "
        "(this GPU waited {cpu_wait_ms:.0f} ms per profiled step for its CPU).",
        hint="an all-reduce on its own stream can run beside the backward's kernels; which buckets cannot?",
    ),
    one_bucket_change_ms=Exercise(
        "step-time change with one bucket (ms), accounted for from the two traces",
        # the figure before this text is the measured change: the traces' account is named apart from it
        explain="The traces account for {total:+.1f} ms: the one all-reduce after the backward "
        "({allreduce_ms:.1f} ms), minus the tail the 25 MB buckets left ({tail_ms:.2f} ms), minus the compute the "
        "backward gets back when no all-reduce runs beside it ({compute_ms:.1f} ms), each read on the rank that "
        "waited least in its run.",
        hint="three effects, each on the rank that waited least: the new all-reduce's time, the tail that goes away "
        "(last all-reduce end - backward end), and how much faster the compute runs with no NCCL kernel beside it",
        rel_tol=0.25,
        show=lambda ms: f"{ms:+.1f} ms",
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
    prefetch_faster=Exercise(
        "prefetching makes the FSDP2 step faster (GPUs)",
        explain="{measured}. Prefetching issues each block's all-gather one block early: it hides only all-gather "
        "time that was exposed without it, and an early all-gather shares the GPU with the compute beside it.",
        hint="how much all-gather time is exposed without prefetching, and what else runs while an early one waits?",
        guess=True,  # two launches on a shared machine can flip the order of two close step times
    ),
    straggler_rank=Exercise(
        "the straggler",
        explain="the straggler spends the least time in collectives: when it arrives, the others are already "
        "there, waiting inside theirs.",
        hint="who waits least in its collectives?",
    ),
    straggler_cost_ms=Exercise(
        "what the straggler costs per step on the two GPUs (ms)",
        explain="it sleeps {sleep_ms:g} ms per step before its first operator; the other ranks wait for it at their "
        "first collective, so the whole job pays about that ({measured_ms:.1f} ms, timed without the profiler).",
        hint="the host time before the step's first operator (start_idle_us): how much later does one rank start?",
        rel_tol=0.20,
        show=lambda ms: f"{ms:.1f} ms",
    ),
)
check, hint, summary = EXERCISES.check, EXERCISES.hint, EXERCISES.summary
reveal, answered, evidence = EXERCISES.reveal, EXERCISES.answered, EXERCISES.evidence  # answers once right or asked for
assert_all_correct, reset = EXERCISES.assert_all_correct, EXERCISES.reset

REFERENCE_PREFIX = "h200x2_"  # traces/h200x2_<configuration>/: the runs recorded on two H200s
REFERENCE_RESULTS = "h200x2_ddp"  # their results (benchmarks/results/h200x2_ddp.json)


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
    """``(run, summary)`` of a run on GPUs: `live` when it ran on GPUs, else the H200 recording; None without either."""
    folder = live if _on_gpus(live) else reference_run(name)
    if folder is None:
        return None
    return load_run(folder), run_summary(folder)


def gpu_results(runs: str | os.PathLike | None = None, timeout_s: float = 300.0) -> Results:
    """The tables of the runs on GPUs under `runs` (read by ``python -m benchmarks ddp --runs``, a program), else
    of the H200 recording."""
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


def timed_steps(summary: dict[str, Any]) -> list[float]:
    """The step times (ms) a run measured without the profiler, on its slowest rank (the one the job waits for)."""
    if not isinstance(summary, dict) or not summary.get("ranks"):
        raise ValueError("expected a run's summary (run_summary(folder)), with its ranks' step times")
    slowest = max(summary["ranks"], key=lambda r: r["median_step_ms"])
    return [float(x) for x in slowest["step_ms"]]


def measured_change(base: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """How much the step time changed from run `base` to `new`, and whether that is within the noise by the
    course's one rule (:func:`.rounds.too_close` on their timed steps: ``noise_ms`` is the larger interquartile
    range): then a prediction cannot be judged on them."""
    a, b = timed_steps(base), timed_steps(new)
    if len(a) < 3 or len(b) < 3:
        raise ValueError(f"need at least 3 timed steps per run to know the spread, got {len(a)} and {len(b)}")
    change = float(new["step_ms"] - base["step_ms"])
    sa, sb = spread_of(a), spread_of(b)
    noise = max(sa.iqr, sb.iqr)
    within = too_close(Spread(float(base["step_ms"]), sa.q1, sa.q3, sa.rounds), Spread(float(new["step_ms"]), sb.q1, sb.q3, sb.rounds))  # fmt: skip
    return {"change_ms": change, "noise_ms": noise, "within_noise": within}


def per_rank(run: MultiRankTrace, summary: dict[str, Any]) -> pd.DataFrame:
    """Each rank of a profiled run beside the same run unprofiled (medians per step, ms): compute, communication,
    what was hidden; ``waited_least`` marks the rank that arrived last at every collective (it waited least)."""
    steps = communication_per_step(run)
    if steps.empty:
        raise ValueError(f"{run.info.describe()} has no profiled step with a collective")
    g = steps.groupby("rank")
    out = pd.DataFrame(
        {
            "profiled_step_ms": g["step_us"].median() / 1e3,
            "compute_ms": g["compute_us"].median() / 1e3,
            "communication_ms": g["communication_us"].median() / 1e3,
            "hidden_ms": g["overlap_us"].median() / 1e3,
        }
    )
    out["hidden_pct"] = 100.0 * out["hidden_ms"] / out["communication_ms"]
    unprofiled = {r["rank"]: r["median_step_ms"] for r in summary["ranks"]}
    out.insert(1, "unprofiled_step_ms", [unprofiled.get(r) for r in out.index])
    if (steps["on"] == "GPU").all():
        idle = overlap(run).set_index("rank")["idle_cpu_bound_us"]
        out["gpu_waits_for_cpu_ms"] = idle.reindex(out.index) / len(run.steps) / 1e3
    out["waited_least"] = out.index == out["communication_ms"].idxmin()
    return out.reset_index()


def hta_differences(run: MultiRankTrace) -> pd.DataFrame:
    """Per rank, the kernel time `helpers` counts and what HolisticTraceAnalysis's defaults leave of it (it drops
    the last step and cuts times to whole microseconds): an emulation, not HTA itself."""
    kernels = run.kernels()
    if kernels.empty:
        raise ValueError(f"{run.info.describe()} has no device kernel: HTA's kernel breakdown needs a GPU trace")
    windows = step_windows(run)
    last_start = windows.groupby("rank")["start_us"].max()
    rows = []
    for rank, k in kernels.groupby("rank"):
        keep = k["start_us"] < last_start.get(rank, np.inf)
        rows.append(
            {
                "rank": rank,
                "kernel_us": k["duration_us"].sum(),
                "without_last_step_us": k.loc[keep, "duration_us"].sum(),
                "as_hta_us": k.loc[keep, "duration_us"].floordiv(1).sum(),
            }
        )
    out = pd.DataFrame(rows)
    out["hta_minus_helpers_pct"] = 100.0 * (out["as_hta_us"] - out["kernel_us"]) / out["kernel_us"]
    return out


def nccl_log_lines(folder: str | os.PathLike, limit: int = 12) -> list[str]:
    """The ``NCCL INFO`` lines of a run's ``launch.log`` (a run launched with ``NCCL_DEBUG=INFO``), first `limit`."""
    log = Path(folder) / "launch.log"
    if not log.is_file():
        raise FileNotFoundError(f"{log} is missing: launch_run writes it beside the traces")
    lines = [ln.rstrip() for ln in log.read_text(encoding="utf-8", errors="replace").splitlines() if "NCCL INFO" in ln]
    return lines[:limit]


def one_bucket_terms(
    run25: MultiRankTrace, summary25: dict[str, Any], run_one: MultiRankTrace, summary_one: dict[str, Any]
) -> dict[str, float]:
    """The one-bucket change accounted for from the traces (ms), each term on the rank that waited least:
    the one all-reduce, the 25 MB run's tail, the compute difference, and what is left."""
    least25, least_one = (
        r[r["waited_least"]].iloc[0] for r in (per_rank(run25, summary25), per_rank(run_one, summary_one))
    )
    job = job_schedule(bucket_schedule(run25, (summary25.get("ddp") or {}).get("bucket_bytes")))
    steps = job.groupby("step")
    tail = float((steps["end_us"].max() - steps["backward_end_us"].max()).median() / 1e3)
    terms = {
        "allreduce_ms": float(least_one["communication_ms"]),
        "tail_ms": tail,
        "compute_ms": float(least25["compute_ms"] - least_one["compute_ms"]),
    }
    terms["total"] = terms["allreduce_ms"] - terms["tail_ms"] - terms["compute_ms"]
    return terms


def check_one_bucket(
    answer: Any, run25: MultiRankTrace, summary25: dict[str, Any], run_one: MultiRankTrace, summary_one: dict[str, Any]
) -> Feedback:
    """Check the one-bucket change against the step times measured without the profiler (within 25%, or a tie in noise)."""
    change = measured_change(summary25, summary_one)
    expected: Any = change["change_ms"]
    if change["within_noise"]:
        expected = Tie(
            f"measured {change['change_ms']:+.2f} ms, inside the larger middle-half spread of the runs' steps "
            f"({change['noise_ms']:.2f} ms)",
            float,
        )
    return check(
        "one_bucket_change_ms", answer, expected, details=one_bucket_terms(run25, summary25, run_one, summary_one)
    )


def hidden_by_step(run: MultiRankTrace, summary: dict[str, Any]) -> pd.DataFrame:
    """Per profiled step of the rank that waited least: the share of its communication hidden behind compute, its
    exposed communication, and the exposed part of the buckets that started after the backward's end (the tail)."""
    ranks = per_rank(run, summary)
    least = ranks[ranks["waited_least"]].iloc[0]
    if "gpu_waits_for_cpu_ms" not in least.index:
        raise ValueError("this check reads a GPU run (the GPU's wait for its CPU): pass one of the two-GPU runs")
    steps = communication_per_step(run)
    steps = steps[(steps["rank"] == least["rank"]) & (steps["communication_us"] > 0)].set_index("step")
    if steps.empty:
        raise ValueError(f"rank {least['rank']} has no communication in its profiled steps: nothing to hide")
    buckets = bucket_schedule(run, (summary.get("ddp") or {}).get("bucket_bytes"))
    mine = buckets[buckets["rank"] == least["rank"]]
    after = mine[mine["start_us"] >= mine["backward_end_us"]]
    tail = (after["duration_us"] - after["overlapped_us"]).groupby(after["step"]).sum()
    out = pd.DataFrame(
        {
            "hidden_pct": 100.0 * steps["overlap_us"] / steps["communication_us"],
            "exposed_ms": steps["exposed_communication_us"] / 1e3,
            "tail_exposed_ms": tail.reindex(steps.index, fill_value=0.0) / 1e3,
        }
    ).reset_index()
    out.insert(0, "rank", int(least["rank"]))
    out.attrs.update(hidden_pct=float(least["hidden_pct"]), cpu_wait_ms=float(least["gpu_waits_for_cpu_ms"]))
    return out


def check_hidden(answer: Any, run: MultiRankTrace, summary: dict[str, Any]) -> Feedback:
    """Check whether more than a third of the communication is hidden on the rank that waited least, in every
    profiled step: True or False when its steps agree, a tie when they fall on both sides of a third."""
    steps = hidden_by_step(run, summary)
    above = steps["hidden_pct"] > 100 / 3
    expected: Any = bool(above.all())
    if above.any() and not above.all():
        pct = steps["hidden_pct"]
        expected = Tie(f"its profiled steps hid {pct.min():.0f}% to {pct.max():.0f}%, on both sides of a third")
    details = {
        "hidden": steps.attrs["hidden_pct"],
        "rank": int(steps["rank"].iloc[0]),
        "low": float(steps["hidden_pct"].min()),
        "high": float(steps["hidden_pct"].max()),
        "steps": len(steps),
        "exposed_ms": float(steps["exposed_ms"].median()),
        "tail_ms": float(steps["tail_exposed_ms"].median()),
        "cpu_wait_ms": steps.attrs["cpu_wait_ms"],
    }
    return check("more_than_a_third_hidden", answer, expected, details=details)


def check_straggler_cost(answer: Any, slow_summary: dict[str, Any], base_summary: dict[str, Any]) -> Feedback:
    """Check the straggler's cost against the step times measured without the profiler (within 20%)."""
    change = measured_change(base_summary, slow_summary)
    return check(
        "straggler_cost_ms",
        answer,
        change["change_ms"],
        details={"sleep_ms": slow_summary["straggler"]["ms"], "measured_ms": change["change_ms"]},
    )


def param_comms(folder: str | os.PathLike, rank: int = 0, limit: int = 6) -> pd.DataFrame:
    """What the profiler recorded of each collective call on one rank (NCCL's algorithm and protocol are only in
    its own log, ``NCCL_DEBUG=INFO``)."""
    path = next((p for p in rank_files(folder) if p.name.startswith(f"rank{rank}.")), None)
    if path is None:
        raise FileNotFoundError(f"{folder} has no trace of rank {rank}")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        events = json.load(f).get("traceEvents", [])
    rows = [
        {
            "collective": a.get("Collective name"),
            "in_elements": a.get("In msg nelems"),
            "out_elements": a.get("Out msg nelems"),
            "dtype": a.get("dtype"),
            "group_size": a.get("Group size"),
            "ranks": a.get("Process Group Ranks"),
        }
        for e in events
        if isinstance(e, dict) and e.get("name") == "record_param_comms" and isinstance(a := e.get("args"), dict)
    ]
    return pd.DataFrame(
        rows[:limit], columns=["collective", "in_elements", "out_elements", "dtype", "group_size", "ranks"]
    )
