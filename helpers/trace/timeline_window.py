"""Which events a timeline draws: whole profiler steps from the first up to a cap on bars, a
chosen step list, or a time window; and a note that says what was left out and how to see it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


def as_steps(steps: Any, known: list[int]) -> list[int]:
    if isinstance(steps, bool):
        raise TypeError(f"steps must be a step number or a list of them, got {steps!r}")
    wanted = [steps] if isinstance(steps, (int, np.integer)) else list(steps)
    if not all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in wanted):
        raise TypeError(f"steps must be a step number or a list of them, got {steps!r}")
    unknown = sorted(set(int(s) for s in wanted) - set(known))
    if unknown:
        shown = known if len(known) <= 20 else f"{known[:10]} ... {known[-3:]} ({len(known)} steps)"
        raise ValueError(f"steps {unknown} are not in this trace; it has steps {shown}")
    return sorted(set(int(s) for s in wanted))


def step_span(steps: list[int]) -> str:
    if not steps:
        return "no steps"
    if len(steps) <= 4:
        return ("step " if len(steps) == 1 else "steps ") + ", ".join(map(str, steps))
    return f"{len(steps):,} steps ({steps[0]}-{steps[-1]})"


def steps_drawn(steps: list[int]) -> str:
    """'step 4', 'steps 1, 2', 'steps 1-215' (the count is said next to it)."""
    if len(steps) == 1:
        return f"step {steps[0]}"
    if len(steps) <= 3:
        return "steps " + ", ".join(map(str, steps))
    return f"steps {steps[0]}-{steps[-1]}"


def _loose_within(ev: pd.DataFrame, in_steps: np.ndarray) -> np.ndarray:
    """Events outside every step (a backend's own threads, such as gloo's collectives) that start while one of
    the chosen steps runs on the host: rank by rank when the events hold several ranks."""
    ts = ev["ts"].to_numpy()
    end = ts + ev["dur"].to_numpy()
    host_in = in_steps & ~ev["on_device"].to_numpy()
    loose = ev["step"].to_numpy() < 0
    out = np.zeros(len(ev), dtype=bool)
    groups = ev["rank"].to_numpy() if "rank" in ev.columns else np.zeros(len(ev), dtype=np.int64)
    steps = ev["step"].to_numpy()
    for g in np.unique(groups[host_in]):
        mine = groups == g
        # each chosen step's host window on this rank; a rank's steps follow one another
        h = host_in & mine
        spans = (
            pd.DataFrame({"step": steps[h], "lo": ts[h], "hi": end[h]})
            .groupby("step")
            .agg(lo=("lo", "min"), hi=("hi", "max"))
        )
        spans = spans.sort_values("lo")
        lo, hi = spans["lo"].to_numpy(), spans["hi"].to_numpy()
        cand = np.flatnonzero(mine & loose)
        at = np.searchsorted(lo, ts[cand], side="right") - 1
        ok = at >= 0
        ok[ok] = ts[cand[ok]] < hi[at[ok]]
        out[cand[ok]] = True
    return out


def select_events(
    trace, steps, max_events: int, max_depth: int, time_range_us: tuple[float, float] | None
) -> tuple[pd.DataFrame, list[int], str]:
    """The events to draw, the steps they cover, and a note saying what was left out."""
    ev = trace.events
    t0 = float(ev["ts"].min())
    keep = (
        (ev["cat"] != "python_function")
        & (ev["cat"] != "gpu_user_annotation")
        & (ev["on_device"] | (ev["depth"] <= max_depth))
    )
    ev = ev[keep.to_numpy()]
    all_steps = trace.steps
    notes: list[str] = []
    chosen: list[int] = []
    if time_range_us is not None:
        lo, hi = (float(v) for v in time_range_us)
        if not hi > lo:
            raise ValueError(f"time_range_us must be (start, end) with end > start, got {time_range_us!r}")
        start = ev["ts"].to_numpy() - t0
        ev = ev[(start < hi) & (start + ev["dur"].to_numpy() > lo)]
        notes.append(f"{lo:,.0f}-{hi:,.0f} us")
        chosen = sorted(int(s) for s in ev["step"].unique() if s >= 0)
    elif steps is not None:
        chosen = as_steps(steps, all_steps)
        in_steps = ev["step"].isin(chosen).to_numpy()
        ev = ev[in_steps | _loose_within(ev, in_steps)]
        notes.append(step_span(chosen))
    elif len(ev) > max_events and all_steps:
        # Whole steps from the first, as many as fit (events outside any step count when they fall
        # inside the window): the largest k whose window holds at most max_events bars.
        step_col = ev["step"].to_numpy()
        ts = ev["ts"].to_numpy()
        end = ts + ev["dur"].to_numpy()
        host = ~ev["on_device"].to_numpy()
        known = np.asarray(all_steps, dtype=np.int64)  # sorted
        pos = np.minimum(np.searchsorted(known, step_col), len(known) - 1)
        step_rank = np.where(known[pos] == step_col, pos, -1)
        loose_ts = ts[step_rank < 0]

        def window(k: int) -> tuple[np.ndarray, float, float]:
            in_steps = (step_rank >= 0) & (step_rank < k)
            h = in_steps & host
            return in_steps, float(ts[h].min()) if h.any() else 0.0, float(end[h].max()) if h.any() else 0.0

        def size(k: int) -> int:
            in_steps, lo, hi = window(k)
            return int(in_steps.sum() + ((loose_ts >= lo) & (loose_ts < hi)).sum())

        lo_k, hi_k = 1, len(all_steps)
        while lo_k < hi_k:
            mid = (lo_k + hi_k + 1) // 2
            lo_k, hi_k = (mid, hi_k) if size(mid) <= max_events else (lo_k, mid - 1)
        chosen = all_steps[:lo_k]
        in_steps, lo, hi = window(lo_k)
        ev = ev[in_steps | ((step_rank < 0) & (ts >= lo) & (ts < hi))]
        if len(chosen) < len(all_steps):  # (every step fitting means only the cap below applies)
            notes.append(
                f"{steps_drawn(chosen)} drawn ({len(chosen):,} of {len(all_steps):,} steps); pass steps=[...] or "
                "time_range_us=(start, end) for others"
            )
    else:
        chosen = all_steps
    if len(ev) > max_events:
        # Keep the earliest events: a contiguous window reads better than a random sample.
        dropped = len(ev) - max_events
        ev = ev.iloc[:max_events]
        notes.append(
            f"first {max_events:,} events drawn, {dropped:,} later ones left out (pass steps=, "
            "time_range_us= or max_events=)"
        )
        chosen = [s for s in chosen if (ev["step"] == s).any()]
    return ev, chosen, "; ".join(notes)
