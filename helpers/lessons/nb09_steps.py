"""Lesson 09: what a run's step time is. The job's step (``summary["step_ms"]``, as ``scripts/ddp_step.py`` writes
it) is, at each timed step, the slowest rank's time, then the median over the steps; each rank's own median is a
different number, and a lesson that shows both says which is which."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any


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
    return text + ": here they agree."
