"""Where a GPU's time goes (computing, communicating, both, idle) as unions of intervals, never sampled. An idle
gap is ``cpu-bound`` when the next kernel's launch call ended after the GPU went idle, else ``waiting``."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .categories import work_kinds
from .kernel_names import decode_kernels
from .model import Trace, check_trace
from .ranks import event_ranks

CAUSES = ("cpu-bound", "waiting", "unknown")
_LANE = re.compile(r"^(.*?) stream \S+(?: \(pid (\S+)\))?$")


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint sorted intervals covering exactly the union of [starts, ends)."""
    if len(starts) == 0:
        return np.zeros(0), np.zeros(0)
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]  # starts after everything before it has ended: a new interval
    return s[new], np.maximum.reduceat(e, np.flatnonzero(new))


def length(starts: np.ndarray, ends: np.ndarray) -> float:
    """Total length of disjoint intervals."""
    return float(np.sum(ends - starts)) if len(starts) else 0.0


def intersection_length(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    """Length of the intersection of two unions of disjoint intervals (a sweep over their ends)."""
    (a_s, a_e), (b_s, b_e) = a, b
    if not len(a_s) or not len(b_s):
        return 0.0
    points = np.concatenate([a_s, a_e, b_s, b_e])
    in_a = np.concatenate([np.ones(len(a_s)), -np.ones(len(a_e)), np.zeros(len(b_s) + len(b_e))])
    in_b = np.concatenate([np.zeros(len(a_s) + len(a_e)), np.ones(len(b_s)), -np.ones(len(b_e))])
    order = np.argsort(points, kind="stable")
    p, ca, cb = points[order], np.cumsum(in_a[order]), np.cumsum(in_b[order])
    both = (ca[:-1] > 0) & (cb[:-1] > 0)
    return float(np.sum(np.diff(p)[both]))


def _gpu_of(lanes: np.ndarray) -> np.ndarray:
    """'rank 0 · GPU 3 stream 7' -> 'rank 0 · GPU 3' (one GPU, all its streams)."""
    codes, uniques = pd.factorize(lanes)
    gpus = []
    for lane in uniques:
        m = _LANE.match(lane)
        gpus.append((m.group(1) + (f" (pid {m.group(2)})" if m.group(2) else "")) if m else lane)
    return np.asarray(gpus, dtype=object)[codes] if len(lanes) else np.zeros(0, dtype=object)


def device_work(trace: Trace) -> pd.DataFrame:
    """Device work, one row each: rank, gpu, step, start/end (us), class (compute, communication or memory),
    and the launch call's times and row in the events table (-1 when unknown)."""
    check_trace(trace)
    ev = trace.events
    kinds = work_kinds(ev)
    rows = np.flatnonzero(kinds != "")
    ranks, _ = event_ranks(trace)
    names = ev["name"].to_numpy(dtype=object)[rows]
    unique = pd.unique(names)
    family = dict(zip(unique, decode_kernels(list(unique))["family"])) if len(unique) else {}
    fam = np.array([family.get(n, "unknown") for n in names], dtype=object)
    klass = np.where(fam == "communication", "communication", "compute").astype(object)
    klass[np.isin(kinds[rows], ["memcpy", "memset"])] = "memory"
    ts, dur = ev["ts"].to_numpy(), ev["dur"].to_numpy()
    launch = ev["launch"].to_numpy()[rows]
    has = launch >= 0
    t0 = float(ev["ts"].min())
    table = pd.DataFrame(
        {
            "rank": ranks[rows],
            "gpu": _gpu_of(ev["lane"].to_numpy(dtype=object)[rows]),
            "step": ev["step"].to_numpy()[rows],
            "name": names,
            "family": fam,
            "work": klass,
            "start_us": ts[rows] - t0,
            "end_us": ts[rows] + np.maximum(dur[rows], 0.0) - t0,
            "launch_start": np.where(has, ts[np.maximum(launch, 0)] - t0, np.nan),
            "launch_end": np.where(has, ts[np.maximum(launch, 0)] + dur[np.maximum(launch, 0)] - t0, np.nan),
            "launch_row": np.where(has, launch, -1),
        }
    )
    return table.sort_values(["rank", "gpu", "start_us"], kind="stable").reset_index(drop=True)


def idle_gaps(trace: Trace, min_us: float = 0.0) -> pd.DataFrame:
    """Every stretch a GPU had nothing running between its first and last work of at least `min_us`, with its
    cause, ``launch_lead_us`` (how long before the gap the next work's launch call had ended) and ``launch_row``
    (that call's row in the events table, -1 when unknown)."""
    work = device_work(trace)
    out = []
    for (rank, gpu), g in work.groupby(["rank", "gpu"], sort=True):
        s, e = g["start_us"].to_numpy(), g["end_us"].to_numpy()
        reach = np.maximum.accumulate(e)
        starts_group = np.flatnonzero(s[1:] > reach[:-1]) + 1  # first work after each gap
        if not len(starts_group):
            continue
        gap_start = reach[starts_group - 1]
        gap_end = s[starts_group]
        launch_end = g["launch_end"].to_numpy()[starts_group]
        cause = np.where(np.isnan(launch_end), "unknown", np.where(launch_end > gap_start, "cpu-bound", "waiting"))
        out.append(
            pd.DataFrame(
                {
                    "rank": rank,
                    "gpu": gpu,
                    "step": g["step"].to_numpy()[starts_group],
                    "start_us": gap_start,
                    "end_us": gap_end,
                    "idle_us": gap_end - gap_start,
                    "cause": cause,
                    "next_kernel": g["name"].to_numpy()[starts_group],
                    "launch_lead_us": gap_start - launch_end,
                    "launch_row": g["launch_row"].to_numpy()[starts_group],
                }
            )
        )
    cols = [
        "rank",
        "gpu",
        "step",
        "start_us",
        "end_us",
        "idle_us",
        "cause",
        "next_kernel",
        "launch_lead_us",
        "launch_row",
    ]
    if not out:
        return pd.DataFrame(columns=cols)
    gaps = pd.concat(out, ignore_index=True)
    return gaps[gaps["idle_us"] >= min_us][cols].reset_index(drop=True)


def overlap(trace: Trace, per_step: bool = False) -> pd.DataFrame:
    """Compute, communication, their overlap and idle time per GPU of each rank (and step with `per_step`);
    NoKernelsError without device work."""
    work = device_work(trace)
    if work.empty:
        trace.kernels()  # raises NoKernelsError with the reason
    keys = ["rank", "gpu", "step"] if per_step else ["rank", "gpu"]
    gaps = idle_gaps(trace)
    rows = []
    for key, g in work.groupby(keys, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        spans = {k: union(*_se(g[g["work"] == k])) for k in ("compute", "communication", "memory")}
        busy = union(*_se(g))
        window = float(g["end_us"].max() - g["start_us"].min())
        comm = length(*spans["communication"])
        both = intersection_length(spans["compute"], spans["communication"])
        row = dict(zip(keys, key))
        row.update(
            window_us=window,
            busy_us=length(*busy),
            compute_us=length(*spans["compute"]),
            communication_us=comm,
            memory_us=length(*spans["memory"]),
            overlap_us=both,
            exposed_communication_us=comm - both,
            overlap_pct=100.0 * both / comm if comm > 0 else np.nan,
        )
        mine = gaps[(gaps["rank"] == row["rank"]) & (gaps["gpu"] == row["gpu"])]
        # the GPU's gaps inside this window (with per_step, other steps' work may run in it too)
        mine = mine[(mine["start_us"] >= g["start_us"].min()) & (mine["end_us"] <= g["end_us"].max())]
        row["idle_us"] = float(mine["idle_us"].sum()) if per_step else window - row["busy_us"]
        for cause in CAUSES:
            row[f"idle_{cause.replace('-', '_')}_us"] = float(mine.loc[mine["cause"] == cause, "idle_us"].sum())
        rows.append(row)
    return pd.DataFrame(rows)


def _se(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    return frame["start_us"].to_numpy(), frame["end_us"].to_numpy()
