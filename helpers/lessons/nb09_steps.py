"""Lesson 09: what a run's step time is. The job's step (``summary["step_ms"]``, as ``scripts/ddp_step.py`` writes
it) is, at each timed step, the slowest rank's time, then the median over the steps; each rank's own median is a
different number, and a lesson that shows both says which is which."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

import pandas as pd


def job_steps(summary: Mapping[str, Any]) -> list[float]:
    """The job's time (ms) at each timed step without the profiler: the slowest rank's time at that step, since every
    rank waits for it at the step's collectives. Their median is the run's ``step_ms``."""
    ranks = summary.get("ranks") if isinstance(summary, Mapping) else None
    if not ranks:
        raise ValueError("expected a run's summary (run_summary(folder)), with its ranks' step times")
    steps = [[float(x) for x in r["step_ms"]] for r in ranks]
    if len({len(s) for s in steps}) != 1 or not steps[0]:
        raise ValueError(f"every rank needs the same number of timed steps, got {[len(s) for s in steps]}")
    return [max(s[i] for s in steps) for i in range(len(steps[0]))]


def job_step_note(name: str, summary: Mapping[str, Any], rank_column: str = "step_ms_per_rank") -> str:
    """One sentence on run `name`'s two step times without the profiler: ``step_ms``, the job's (median over the
    timed steps of the slowest rank's time), and `rank_column`, each rank's own median; the first is never below the
    second, and is above it when the ranks were slow at different steps."""
    if not isinstance(name, str) or not name or not isinstance(rank_column, str) or not rank_column:
        raise TypeError(f"name and rank_column must be non-empty strings, got {name!r} and {rank_column!r}")
    per_step = job_steps(summary)
    job = statistics.median(per_step)
    own = {int(r["rank"]): statistics.median(float(x) for x in r["step_ms"]) for r in summary["ranks"]}
    mine = ", ".join(f"{v:.1f} ms on rank {r}" for r, v in sorted(own.items()))
    text = (
        f"`step_ms` is the job's step: at each of the {len(per_step)} timed steps the slowest rank's time (every rank "
        f"waits for it at the step's collectives), then the median over the steps ({job:.1f} ms for {name}). "
        f"`{rank_column}` is each rank's own median ({mine}), which can never exceed the job's step"
    )
    # compared at the precision shown: 0.05 ms apart reads as the same number
    if round(job, 1) > round(max(own.values()), 1):
        return text + ": here the job's step is longer than every rank's median, because the ranks were slow at " \
            "different steps."  # fmt: skip
    slowest = max(own, key=own.get)
    return (
        text + f": here the job's step is the slowest rank's own median (rank {slowest}). In another run the job's "
        "step can sit above every rank's median, when the ranks were slow at different steps."
    )


def exposed_per_rank_text(per_step: pd.DataFrame) -> str:
    """Each rank's median exposed communication against its median step (rows of ``communication_per_step``),
    rank by rank: a rank that reaches a collective early waits inside it, so one number over the ranks would
    describe none of them."""
    missing = [c for c in ("rank", "step_us", "exposed_communication_us") if c not in getattr(per_step, "columns", ())]
    if missing or per_step.empty:
        raise ValueError(f"expected communication_per_step's rows; missing or empty: {missing or 'no rows'}")
    med = per_step.groupby("rank")[["exposed_communication_us", "step_us"]].median() / 1e3
    each = [f"{e:.1f} ms out of {s:.1f} ms on rank {r}" for r, e, s in med.itertuples()]
    each[0] = each[0].replace(" out of", " per step is exposed, out of", 1)
    return ", ".join(each) + (" (each rank's median step)" if len(each) > 1 else " (the median step)")


def profiler_cost_text(ranks: pd.DataFrame) -> str:
    """The profiler's cost read on the rank that waited least (rows of ``per_rank``, a GPU run): its profiled step
    against the same step without the profiler, and its GPU's wait for its CPU, all that one rank's numbers."""
    least = ranks[ranks["waited_least"].astype(bool)]
    if least.empty:
        raise ValueError("expected per_rank's rows of a GPU run, one of them marked waited_least")
    row = least.iloc[0]
    prof, plain, rank = float(row["profiled_step_ms"]), float(row["unprofiled_step_ms"]), int(row["rank"])
    return (
        f"On rank {rank}, the rank that waited least, a profiled step took **{prof:.0f} ms**, the same step without "
        f"the profiler **{plain:.0f} ms** ({prof / plain:.2f}x). The profiler records every operator (with its shapes) "
        f"on the CPU, so the host falls behind the GPU: on that rank the GPU sat idle waiting for its CPU "
        f"{float(row['gpu_waits_for_cpu_ms']):.0f} ms per profiled step. The GPU kernels themselves are timed by the "
        "GPU and barely change; the step times, the waits and everything that depends on which rank is late do. Read "
        "kernel times from the trace, and step times from the run without the profiler."
        + _other_ranks_wait(ranks, rank)
    )


def _other_ranks_wait(ranks: pd.DataFrame, rank: int) -> str:
    """The other ranks' GPU waits beside that rank's: the profiler runs on every rank, so it alone does not say why
    one host fell further behind, and the traces name no other cause."""
    others = ranks[ranks["rank"].astype(int) != rank]
    if others.empty:
        return ""
    waits = ", ".join(
        f"{float(w):.0f} ms on rank {int(r)}" for r, w in zip(others["rank"], others["gpu_waits_for_cpu_ms"])
    )
    return (
        f" Beside it, the GPU waited for its CPU {waits}: every rank runs the same code under the same profiler, so "
        f"why rank {rank}'s host fell further behind is not in these traces (where its process ran, or what else ran "
        "on its cores, are causes this lesson does not test)."
    )
