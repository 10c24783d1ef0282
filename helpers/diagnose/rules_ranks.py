"""Rules about a run of several ranks (or one rank's NCCL work): exposed communication, a straggler rank."""

from __future__ import annotations

import numpy as np

from helpers.trace.overlap import overlap
from helpers.trace.ranks import MultiRankTrace

from .findings import Context


def exposed_communication(ctx: Context) -> list[dict]:
    """Collectives that run with no compute beside them: the step waits for the network."""
    w = ctx.work
    comm = w[w["family"] == "communication"] if len(w) else w
    if not len(comm):
        return []
    o = overlap(ctx.trace)
    exposed = float(o["exposed_communication_us"].sum()) / max(len(o), 1) / ctx.per_step
    if exposed < 0.02 * ctx.step_us:
        return []
    pct = 100.0 * float(o["overlap_us"].sum()) / max(float(o["communication_us"].sum()), 1e-9)
    return [
        ctx.finding(
            "exposed_communication",
            "Communication is exposed: collectives run while no compute overlaps them",
            comm["row"].to_numpy(),
            exposed,
            ctx.path_time(comm["row"], ("kernel",)),
            "high",
            "09",
            "Overlap communication with compute: DDP buckets (bucket_cap_mb), FSDP prefetch, "
            "gradient accumulation with no_sync, fewer and larger collectives",
            f"{pct:.0f} % of communication time hidden behind compute",
        )  # fmt: skip
    ]


def straggler(ctx: Context) -> list[dict]:
    """One rank takes longer per step; the others wait for it in their collectives."""
    trace = ctx.trace
    if not isinstance(trace, MultiRankTrace) or len(trace.ranks) < 2:
        return []
    try:
        steps = trace.step_times()
    except ValueError:
        return []
    spread = float(np.nanmedian(steps["spread_us"]))
    if spread < 0.05 * ctx.step_us:
        return []
    slowest = int(steps["slowest_rank"].mode().iloc[0])
    rows = ctx.host_rows(prefix=("ProfilerStep#",))
    rows = rows[ctx.ev["rank"].to_numpy()[rows] == slowest]
    return [
        ctx.finding(
            "straggler",
            f"Rank {slowest} is a straggler: the other ranks wait for it at every collective",
            rows,
            spread,
            spread,
            "medium",
            "09",
            "Look at that rank's own trace: its data loading, host work or a slower GPU; balance the work",
            f"slowest in {int((steps['slowest_rank'] == slowest).sum())} of {len(steps)} steps; median spread "
            f"{spread:,.0f} us",
        )  # fmt: skip
    ]


RULES = [exposed_communication, straggler]
