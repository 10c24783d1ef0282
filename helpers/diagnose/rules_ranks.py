"""Rules about a run of several ranks (or one rank's NCCL work): exposed communication, a straggler rank,
a rank that waits in its collectives for another."""

from __future__ import annotations

import numpy as np
import pandas as pd

from helpers.trace.collectives import collectives, compute_spans, step_windows
from helpers.trace.overlap import overlap, union
from helpers.trace.ranks import MultiRankTrace

from .findings import Context

# The waited-for rank's extra time must explain at least this share of the wait (a normal run's phase
# offsets between ranks explain a fifth or less of theirs; a planted straggler most of it).
EXPLAINED = 0.5


def exposed_communication(ctx: Context) -> list[dict]:
    """Collectives that run with no compute beside them: the step waits for the network."""
    w = ctx.work
    comm = w[w["family"] == "communication"] if len(w) else w
    if not len(comm):
        return []
    o = overlap(ctx.trace)
    exposed = float(o["exposed_communication_us"].sum()) / max(len(o), 1) / ctx.steps_per_rank  # mean of the GPUs
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


def _covered(starts: np.ndarray, ends: np.ndarray, spans: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """For each interval [start, end): how much of it disjoint sorted `spans` cover (prefix sums, no loop)."""
    s, e = spans
    if not len(s):
        return np.zeros(len(starts))
    cum = np.concatenate([[0.0], np.cumsum(e - s)])

    def below(x: np.ndarray) -> np.ndarray:  # length of the spans before x
        i = np.searchsorted(s, x, side="right") - 1
        inside = np.clip(x - s[np.maximum(i, 0)], 0.0, (e - s)[np.maximum(i, 0)])
        return np.where(i >= 0, cum[np.maximum(i, 0)] + inside, 0.0)

    return below(ends) - below(starts)


def collective_waits(trace: MultiRankTrace) -> pd.DataFrame:
    """Each NCCL collective matched across ranks (the n-th of one kind and size in a step), with how long its rank
    waited in it for the last to arrive: its duration minus the shortest rank's (clock-free)."""
    c = collectives(trace)
    c = c[(c["where"] == "GPU kernel") & (c["step"] >= 0)].copy()
    c["size"] = c["bytes"].fillna(-1.0)
    key = ["step", "collective", "size"]
    c["nth"] = c.groupby(["rank", *key]).cumcount()
    group = c.groupby([*key, "nth"])
    c = c[group["rank"].transform("nunique") == len(trace.ranks)].copy()
    group = c.groupby([*key, "nth"])
    c["wait_us"] = c["duration_us"] - group["duration_us"].transform("min")
    c["waited_for"] = c.loc[group["duration_us"].transform("idxmin"), "rank"].to_numpy()
    compute, _ = compute_spans(trace)
    c["exposed_wait_us"] = 0.0
    for rank, rows in c.groupby("rank").groups.items():
        mine = compute[compute["rank"] == rank]
        spans = union(mine["start_us"].to_numpy(dtype=float), mine["end_us"].to_numpy(dtype=float))
        start = c.loc[rows, "start_us"].to_numpy(dtype=float)
        wait = c.loc[rows, "wait_us"].to_numpy(dtype=float)
        c.loc[rows, "exposed_wait_us"] = wait - _covered(start, start + wait, spans)
    return c.drop(columns=["size"]).reset_index(drop=True)


def rank_load(trace: MultiRankTrace) -> pd.DataFrame:
    """Per rank and step: ``host_idle_us`` (the step's time no host operator or runtime call of the rank covers,
    on any thread: a sleep, a wait for data, untraced work) and ``compute_us`` (time its compute runs)."""
    ev = trace.events
    t0 = float(ev["ts"].min())
    windows = step_windows(trace)
    compute, _ = compute_spans(trace)
    host = ~ev["on_device"].to_numpy() & ev["cat"].isin(["cpu_op", "cuda_runtime", "cuda_driver"]).to_numpy()
    rows = []
    for rank, win in windows.groupby("rank"):
        mine = host & (ev["rank"].to_numpy() == rank)
        busy = union((ev["ts"].to_numpy()[mine] - t0).astype(float), (ev["ts"] + ev["dur"]).to_numpy()[mine] - t0)
        c = compute[compute["rank"] == rank]
        work = union(c["start_us"].to_numpy(dtype=float), c["end_us"].to_numpy(dtype=float))
        a, b = win["start_us"].to_numpy(dtype=float), win["end_us"].to_numpy(dtype=float)
        rows.append(pd.DataFrame({"rank": rank, "step": win["step"].to_numpy(), "host_idle_us": (b - a) -
                                  _covered(a, b, busy), "compute_us": _covered(a, b, work)}))  # fmt: skip
    return pd.concat(rows, ignore_index=True)


def nccl_waiting(ctx: Context) -> list[dict]:
    """A rank's collectives start long before its peers': it spins in NCCL, its GPU idle, waiting for another rank."""
    trace = ctx.trace
    if not isinstance(trace, MultiRankTrace) or len(trace.ranks) < 2:
        return []
    try:
        waits = collective_waits(trace)
    except ValueError:  # no collective or no profiler step: nothing to match
        return []
    if waits.empty:
        return []
    per_step = waits.groupby(["rank", "step"])[["wait_us", "exposed_wait_us"]].sum()
    typical = per_step.groupby("rank")["exposed_wait_us"].median()
    waiter = int(typical.idxmax())
    if typical[waiter] < 0.05 * ctx.step_us:
        return []
    mine = waits[(waits["rank"] == waiter) & (waits["wait_us"] > 0)]
    weight = mine.groupby("waited_for")["exposed_wait_us"].sum()
    waited_for = int(weight.idxmax())
    # every rank waits a little for another in a normal run; a wait is a finding only when the rank waited
    # for spends as much of its step on something the waiter does not (host time with nothing running: a
    # sleep, a data wait; or more compute): that extra is what balancing would give back
    load = rank_load(trace).groupby("rank")[["host_idle_us", "compute_us"]].mean()
    extra = max(load.loc[waited_for] - load.loc[waiter])
    if extra < EXPLAINED * float(typical[waiter]):
        return []
    steps = per_step.loc[waiter]
    ev = ctx.ev
    device = np.flatnonzero(ev["on_device"].to_numpy() & (ev["rank"].to_numpy() == waiter))
    at = np.round(ev["ts"].to_numpy()[device] - ctx.t0, 3)
    rows = device[np.isin(at, np.round(mine["start_us"].to_numpy(), 3))]
    exposed = float(steps["exposed_wait_us"].mean())
    what = "host time with no operator running" if load.loc[waited_for, "host_idle_us"] - load.loc[
        waiter, "host_idle_us"] >= extra else "compute"  # fmt: skip
    share = float(weight[waited_for] / max(weight.sum(), 1e-9))
    listed = ", ".join(f"{v:,.0f}" for v in steps["exposed_wait_us"].to_numpy()[:6])
    detail = (
        f"rank {waiter} waited in {len(mine):,} collectives for rank {waited_for} (last to arrive in "
        f"{100 * share:.0f} % of that wait); its GPU idle {exposed:,.0f} us per step while it waited "
        f"(per step: {listed} us); rank {waited_for} spends {extra:,.0f} us more per step than rank {waiter} on {what}"
    )
    return [
        ctx.finding(
            "nccl_waiting",
            f"Rank {waiter} waits in NCCL for rank {waited_for}: its collectives start long before rank {waited_for}'s",
            rows,
            float(steps["wait_us"].mean()),
            min(exposed, extra),
            "high" if share > 0.8 else "medium",
            "09",
            f"Find what delays rank {waited_for} before its collectives (its own trace: data loading, host work, a "
            "sleep or a slower GPU, a larger share of the batch) and balance the work; the waiting rank gains "
            "nothing from being faster",
            detail,
        )
    ]


RULES = [exposed_communication, straggler, nccl_waiting]
