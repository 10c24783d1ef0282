"""Predict from one DDP trace on GPUs what a larger gradient bucket does to the step: each all-reduce fitted as
``latency + bytes / bandwidth`` on the rank that arrived last, old buckets merged up to the new cap and both
replayed through the same model, so its errors largely cancel.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace.collectives import collectives, compute_spans
from ..trace.model import Trace, check_trace

FIRST_BUCKET_BYTES = 1024 * 1024  # torch.distributed._DEFAULT_FIRST_BUCKET_BYTES: only with DDP's default cap


def allreduce_model(table: pd.DataFrame) -> tuple[float, float]:
    """``(latency_us, bytes_per_us)`` of ``latency + bytes / bandwidth`` fitted to all-reduce kernels (least squares)."""
    ok = table[(table["bytes"] > 0) & (table["duration_us"] > 0)]
    if ok.empty:
        raise ValueError("no all-reduce with a known message size: the trace's NCCL kernels carry no 'In msg nelems'")
    b, d = ok["bytes"].to_numpy(float), ok["duration_us"].to_numpy(float)
    if len(np.unique(b)) >= 2:
        slope, latency = np.polyfit(b, d, 1)
        if slope > 0 and latency >= 0:
            return float(latency), float(1.0 / slope)
    return 0.0, float(b.sum() / d.sum())  # one size only (or a fit without meaning): bandwidth alone


def bucket_schedule(trace: Trace, bucket_bytes: list[int] | None = None) -> pd.DataFrame:
    """The all-reduces of a DDP trace on GPUs, one row per bucket in order, with when its gradients were ready;
    `bucket_bytes` (DDP's own record) fills in sizes a trace lacks. ValueError without NCCL all-reduces."""
    check_trace(trace)
    coll = collectives(trace)
    ar = coll[(coll["collective"] == "all_reduce") & (coll["where"] == "GPU kernel") & (coll["step"] >= 0)]
    if ar.empty:
        raise ValueError(
            f"{trace.info.describe()} has no NCCL all-reduce kernel in a profiler step: "
            "the prediction needs a DDP trace recorded on GPUs"
        )
    compute, _ = compute_spans(trace)
    rows = []
    for (rank, step), g in ar.groupby(["rank", "step"]):
        k = compute[(compute["rank"] == rank) & compute["launch_start"].notna()].sort_values("launch_start")
        launches, ends = k["launch_start"].to_numpy(), np.maximum.accumulate(k["end_us"].to_numpy())
        for r in g.sort_values("start_us").itertuples():
            j = np.searchsorted(launches, r.launch_us, side="left") - 1 if r.launch_us == r.launch_us else -1
            ready = float(ends[j]) if j >= 0 else r.start_us
            rows.append(
                {
                    "rank": rank,
                    "step": step,
                    "bytes": r.bytes,
                    "ready_us": min(ready, r.start_us),  # a kernel never starts before its inputs are ready
                    "start_us": r.start_us,
                    "end_us": r.start_us + r.duration_us,
                    "duration_us": r.duration_us,
                    "overlapped_us": r.overlapped_us,
                }
            )
    out = pd.DataFrame(rows)
    if bucket_bytes is not None and out["bytes"].isna().any():
        for _, g in out.groupby(["rank", "step"]):
            if len(g) != len(bucket_bytes):
                raise ValueError(
                    f"{len(g)} all-reduces in a step of rank {g['rank'].iloc[0]} but {len(bucket_bytes)} bucket sizes given"
                )
            out.loc[g.index, "bytes"] = np.asarray(bucket_bytes, dtype=float)
    out["ready_us"] = out.groupby(["rank", "step"])["ready_us"].cummax()
    out["backward_end_us"] = out.groupby(["rank", "step"])["ready_us"].transform("max")
    return out


def merge_buckets(
    sizes: np.ndarray, ready: np.ndarray, cap_bytes: float, first_bytes: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Old buckets merged in order into buckets of at least `cap_bytes` (`first_bytes`: DDP's default first bucket)."""
    out_b, out_r, acc = [], [], 0.0
    limit = float(cap_bytes if first_bytes is None else first_bytes)
    for b, r in zip(sizes, ready):
        acc += b
        if acc >= limit:
            out_b.append(acc)
            out_r.append(r)
            acc, limit = 0.0, cap_bytes
    if acc > 0:
        out_b.append(acc)
        out_r.append(ready[-1])
    return np.asarray(out_b), np.asarray(out_r)


def replay(sizes: np.ndarray, ready: np.ndarray, latency_us: float, bytes_per_us: float) -> float:
    """End of the last of these all-reduces, run one after another on one stream as each is ready."""
    end = -np.inf
    for b, r in zip(sizes, ready):
        end = max(end, r) + latency_us + b / bytes_per_us
    return float(end)


def job_schedule(schedule: pd.DataFrame) -> pd.DataFrame:
    """The buckets as the job runs them, one row per step and bucket over all ranks (the last rank's times, the
    shortest kernel's rank); ValueError when ranks ran different numbers of all-reduces."""
    if not isinstance(schedule, pd.DataFrame) or schedule.empty:
        raise ValueError("job_schedule needs the non-empty table of bucket_schedule(trace)")
    s = schedule.sort_values(["rank", "step", "start_us"]).copy()
    s["bucket"] = s.groupby(["rank", "step"]).cumcount()
    counts = s.groupby(["step", "rank"]).size().unstack()
    uneven = counts[counts.nunique(axis=1) > 1]
    if not uneven.empty:
        raise ValueError(
            f"step {uneven.index[0]}: the ranks ran {counts.loc[uneven.index[0]].tolist()} all-reduces; "
            "a collective needs every rank (a trace trimmed on one rank?)"
        )
    shortest = s.loc[s.groupby(["step", "bucket"])["duration_us"].idxmin(), ["step", "bucket", "duration_us", "rank"]]
    g = s.groupby(["step", "bucket"])
    out = pd.DataFrame(
        {
            "bytes": g["bytes"].first(),
            "ready_us": g["ready_us"].max(),
            "end_us": g["end_us"].max(),
            "backward_end_us": g["backward_end_us"].max(),
        }
    ).reset_index()
    out = out.merge(shortest.rename(columns={"rank": "waited_least"}), on=["step", "bucket"])
    return out[["step", "bucket", "bytes", "ready_us", "end_us", "duration_us", "waited_least", "backward_end_us"]]


def predict_bucket_change(
    trace: Trace,
    bucket_cap_mb: float,
    old_cap_mb: float | None = None,
    bucket_bytes: list[int] | None = None,
    default_cap: bool = False,
) -> pd.DataFrame:
    """Per profiled step: the tail (backward end to last all-reduce end) as recorded, replayed through the model
    (how well it fits) and predicted with `bucket_cap_mb` buckets; the fitted model in ``.attrs``."""
    if isinstance(bucket_cap_mb, bool) or not isinstance(bucket_cap_mb, (int, float)) or not bucket_cap_mb > 0:
        raise ValueError(f"bucket_cap_mb must be a number > 0, got {bucket_cap_mb!r}")
    if old_cap_mb is not None and bucket_cap_mb < old_cap_mb:
        raise ValueError(
            f"the trace has {old_cap_mb} MB buckets: a smaller cap ({bucket_cap_mb} MB) cannot be predicted from it "
            "(which gradients sit where inside a bucket is not in the trace); predict from a trace with smaller buckets"
        )
    job = job_schedule(bucket_schedule(trace, bucket_bytes))
    latency, bandwidth = allreduce_model(job)
    cap = bucket_cap_mb * 1024 * 1024  # DDP reads bucket_cap_mb as MiB
    first = FIRST_BUCKET_BYTES if default_cap else None
    rows = []
    for step, g in job.groupby("step"):
        sizes, ready = g["bytes"].fillna(0).to_numpy(float), g["ready_us"].to_numpy(float)
        backward_end = float(g["backward_end_us"].iloc[0])
        new_sizes, new_ready = merge_buckets(sizes, ready, cap, first)
        replayed = max(0.0, replay(sizes, ready, latency, bandwidth) - backward_end)
        predicted = max(0.0, replay(new_sizes, new_ready, latency, bandwidth) - backward_end)
        rows.append(
            {
                "step": step,
                "buckets": len(sizes),
                "new_buckets": len(new_sizes),
                "measured_tail_us": max(0.0, float(g["end_us"].max()) - backward_end),
                "replayed_tail_us": replayed,
                "predicted_tail_us": predicted,
                "predicted_change_us": predicted - replayed,
            }
        )
    out = pd.DataFrame(rows)
    out.attrs.update(latency_us=latency, bandwidth_gb_s=bandwidth * 1e6 / 1e9, bucket_cap_mb=bucket_cap_mb)
    return out
