"""Where a model's step goes by part, from its trace: a kernel belongs to the ``record_function`` scope open
when the CPU launched it (autograd work is ``backward``, ``Optimizer.step``'s ``optimizer``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..trace.categories import STEP_PREFIX, device_work_mask
from ..trace.model import Trace, check_trace
from .model import PARTS

AUTOGRAD_PREFIX = "autograd::engine::evaluate_function"
OPTIMIZER_PREFIX = "Optimizer."
IDLE_ROWS = {"cpu-bound": "idle: CPU-bound", "waiting": "idle: waiting", "unknown": "idle: unknown"}
OUTSIDE_OPS = "outside ATen ops (Python, dispatch)"


def _under_autograd(ev: pd.DataFrame) -> np.ndarray:
    """True for host events at or below an ``autograd::engine::evaluate_function`` event (the backward)."""
    flag = ev["name"].str.startswith(AUTOGRAD_PREFIX).to_numpy() & ~ev["on_device"].to_numpy()
    parent, depth = ev["parent"].to_numpy(), ev["depth"].to_numpy()
    has_parent = (parent >= 0) & ~ev["on_device"].to_numpy()
    if has_parent.any():
        for d in range(1, int(depth[has_parent].max()) + 1):  # parents first: one pass per nesting level
            rows = np.flatnonzero(has_parent & (depth == d))
            flag[rows] |= flag[parent[rows]]
    return flag


def _step_windows(ev: pd.DataFrame) -> pd.DataFrame:
    """``step``, ``start``, ``end`` (trace time, us) of each ``ProfilerStep#N``; one window over everything if none."""
    names = ev["name"].to_numpy(dtype=object)
    is_step = ~ev["on_device"].to_numpy() & np.array([str(n).startswith(STEP_PREFIX) for n in names], dtype=bool)
    if not is_step.any():
        return pd.DataFrame(
            {"step": [-1], "start": [ev["ts"].min()], "end": [(ev["ts"] + ev["dur"].clip(lower=0)).max()]}
        )
    rows = np.flatnonzero(is_step)
    steps = [int(str(names[i])[len(STEP_PREFIX) :]) for i in rows]
    out = pd.DataFrame(
        {"step": steps, "start": ev["ts"].to_numpy()[rows], "end": (ev["ts"] + ev["dur"]).to_numpy()[rows]}
    )
    return out.sort_values("start").drop_duplicates("step").reset_index(drop=True)


def _in_window(times: np.ndarray, windows: pd.DataFrame) -> np.ndarray:
    """Index of the window holding each time, -1 when none does."""
    starts, ends = windows["start"].to_numpy(), windows["end"].to_numpy()
    j = np.searchsorted(starts, times, side="right") - 1
    ok = (j >= 0) & (times <= ends[np.maximum(j, 0)])
    return np.where(ok, j, -1)


def _label(annotation: np.ndarray, backward: np.ndarray, names: np.ndarray, parts: Sequence[str]) -> np.ndarray:
    """Part of each row from its annotation row index and whether it ran under the autograd engine."""
    ann_name = np.where(annotation >= 0, names[np.maximum(annotation, 0)], "")
    known = set(parts)
    labels = np.array(
        [n if n in known else ("optimizer" if str(n).startswith(OPTIMIZER_PREFIX) else "other") for n in ann_name],
        dtype=object,
    )
    labels[backward] = "backward"
    return labels


def kernel_parts(trace: Trace, parts: Sequence[str] = PARTS) -> pd.DataFrame:
    """Device work of `trace`, one row each, with the model part that launched it."""
    check_trace(trace)
    ev = trace.events
    rows = np.flatnonzero(device_work_mask(ev))
    names = ev["name"].to_numpy(dtype=object)
    cols = ["name", "step", "part", "start_us", "duration_us", "launched_by"]
    if not len(rows):
        return pd.DataFrame(columns=cols)
    launch, launched_by = ev["launch"].to_numpy()[rows], ev["launched_by"].to_numpy()[rows]
    anchor = np.where(launch >= 0, launch, launched_by)  # the host event that issued the work
    ts = ev["ts"].to_numpy()
    backward = _under_autograd(ev)
    windows = _step_windows(ev)
    issued_at = np.where(anchor >= 0, ts[np.maximum(anchor, 0)], ts[rows])
    window = _in_window(issued_at, windows)
    out = pd.DataFrame(
        {
            "name": names[rows],
            "step": np.where(window >= 0, windows["step"].to_numpy()[np.maximum(window, 0)], -1),
            "part": _label(
                ev["annotation"].to_numpy()[rows], (anchor >= 0) & backward[np.maximum(anchor, 0)], names, parts
            ),
            "start_us": ts[rows] - ts.min(),
            "duration_us": ev["dur"].to_numpy()[rows],
            "launched_by": [names[j] if j >= 0 else None for j in launched_by],
        }
    )
    return out.sort_values("start_us", kind="stable").reset_index(drop=True)


def _finish(rows: list[dict], n_steps: int, window_us: float, basis: str, trace: Trace) -> pd.DataFrame:
    out = pd.DataFrame(rows, columns=["part", "count", "time_us"])
    out["count"] = out["count"] / n_steps
    out["time_us"] = out["time_us"] / n_steps
    out["share"] = out["time_us"] / window_us if window_us > 0 else np.nan
    out = out[(out["count"] > 0) | (out["time_us"] > 0)].reset_index(drop=True)
    out.attrs.update(basis=basis, steps=n_steps, step_us=window_us, trace=trace.info.describe())
    return out


def part_breakdown(trace: Trace, parts: Sequence[str] = PARTS) -> pd.DataFrame:
    """Time per step by model part, plus GPU idle time by cause (GPU) or time outside ATen ops (CPU), with its
    share of the step; one stream is assumed (parallel kernels would count twice)."""
    check_trace(trace)
    order = [*parts, "backward", "optimizer", "other"]
    k = kernel_parts(trace, parts)
    if not k.empty:
        return _gpu_breakdown(trace, k, order)
    return _cpu_breakdown(trace, parts, order)


def _gpu_breakdown(trace: Trace, k: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    gaps, spans = _gaps_in_steps(trace)
    k = k[k["step"].isin(spans.index)]
    rows = []
    for p in order:
        sel = k[k["part"] == p]
        rows.append({"part": p, "count": len(sel), "time_us": float(sel["duration_us"].sum())})
    for cause, label in IDLE_ROWS.items():
        sel = gaps[gaps["cause"] == cause] if not gaps.empty else gaps
        rows.append({"part": label, "count": len(sel), "time_us": float(sel["idle_us"].sum()) if len(sel) else 0.0})
    window_us = float((spans["last"] - spans["first"]).mean())
    return _finish(rows, len(spans), window_us, "device time", trace)


def _cpu_breakdown(trace: Trace, parts: Sequence[str], order: list[str]) -> pd.DataFrame:
    ev = trace.events
    host = ~ev["on_device"].to_numpy()
    dur, parent = ev["dur"].to_numpy(), ev["parent"].to_numpy()
    child = np.zeros(len(ev))
    nested = host & (parent >= 0)
    np.add.at(child, parent[nested], dur[nested])
    is_op = host & (ev["cat"] == "cpu_op").to_numpy()
    windows = _step_windows(ev)
    if windows["step"].iloc[0] >= 0:
        windows = windows[windows["step"].isin(trace.steps)]
    window = _in_window(ev["ts"].to_numpy(), windows.reset_index(drop=True))
    rows_idx = np.flatnonzero(is_op & (window >= 0))
    # count the operators the model calls (outermost ones), not those an operator calls inside itself
    outermost = ~((parent >= 0) & is_op[np.maximum(parent, 0)])
    if not len(rows_idx):
        raise ValueError(
            f"{trace.info.describe()} has no ATen operators inside its steps: was the CPU activity recorded?"
        )
    names = ev["name"].to_numpy(dtype=object)
    labels = _label(ev["annotation"].to_numpy()[rows_idx], _under_autograd(ev)[rows_idx], names, parts)
    self_us = dur[rows_idx] - child[rows_idx]
    n_steps = len(windows)
    step_us = float((windows["end"] - windows["start"]).mean())
    top = outermost[rows_idx]
    rows = [
        {"part": p, "count": int((top & (labels == p)).sum()), "time_us": float(self_us[labels == p].sum())}
        for p in order
    ]
    rows.append({"part": OUTSIDE_OPS, "count": 0, "time_us": max(step_us * n_steps - float(self_us.sum()), 0.0)})
    return _finish(rows, n_steps, step_us, "CPU time", trace)


def idle_share(breakdown: pd.DataFrame) -> float:
    """The share of the step with nothing running: GPU idle rows (GPU), or time outside ATen ops (CPU)."""
    if not isinstance(breakdown, pd.DataFrame) or "part" not in breakdown.columns:
        raise TypeError("pass the DataFrame of part_breakdown(trace)")
    idle = breakdown["part"].isin([*IDLE_ROWS.values(), OUTSIDE_OPS])
    return float(breakdown.loc[idle, "share"].sum())


def _gaps_in_steps(trace: Trace) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The idle gaps inside each step's kernel window (helpers.idle_gaps), and the per-step kernel spans."""
    k = kernel_parts(trace)
    if k.empty:
        raise ValueError(f"{trace.info.describe()} holds no GPU kernels: a graph's gain is read from a GPU trace")
    from ..trace.overlap import idle_gaps  # the trace layer's idle-time analysis

    k = k[k["step"] >= 0] if (k["step"] >= 0).any() else k
    spans = (
        k.assign(end_us=k["start_us"] + k["duration_us"])
        .groupby("step")
        .agg(first=("start_us", "min"), last=("end_us", "max"), kernels=("name", "size"), busy=("duration_us", "sum"))
    )
    gaps = idle_gaps(trace)
    if gaps.empty:
        return gaps, spans
    starts, ends = spans["first"].to_numpy(), spans["last"].to_numpy()
    j = np.searchsorted(starts, gaps["start_us"].to_numpy(), side="right") - 1
    inside = (j >= 0) & (gaps["end_us"].to_numpy() <= ends[np.maximum(j, 0)] + 1e-6)
    return gaps[inside], spans


LATENCY_QUANTILE = 0.1  # which of the "waiting" gaps stands for the GPU's own latency between kernels


def queue_latency_us(trace: Trace, quantile: float = LATENCY_QUANTILE) -> float:
    """The GPU's own latency from one kernel to the next: a low `quantile` of the "waiting" gaps (kernels already
    queued, as in a CUDA graph's replay); NaN without such gaps."""
    if not 0.0 <= quantile <= 1.0:
        raise ValueError(f"quantile must be between 0 and 1, got {quantile!r}")
    gaps, _ = _gaps_in_steps(check_trace(trace))
    waiting = gaps[gaps["cause"] == "waiting"]["idle_us"] if not gaps.empty else pd.Series(dtype=float)
    return float(waiting.quantile(quantile)) if len(waiting) else float("nan")


def graph_prediction(decode_trace: Trace, latency_trace: Trace | None = None) -> dict[str, float | str]:
    """A decode step replayed from a CUDA graph, predicted from an eager trace of it: kernel time plus one queue
    latency per gap (the latency from `latency_trace`, a GPU-bound trace, else from `decode_trace`)."""
    gaps, spans = _gaps_in_steps(check_trace(decode_trace, "decode_trace"))
    latency, median, source = float("nan"), float("nan"), "none"
    for candidate in (latency_trace, decode_trace):
        if candidate is not None and not np.isfinite(latency):
            latency, source = queue_latency_us(candidate), candidate.info.label
            median = queue_latency_us(candidate, 0.5)
    if not np.isfinite(latency):
        latency, source = 0.0, "no waiting gap found: latency taken as 0"
    n_steps = len(spans)
    window = float((spans["last"] - spans["first"]).mean())
    kernels, busy = float(spans["kernels"].mean()), float(spans["busy"].mean())
    by_cause = gaps.groupby("cause")["idle_us"].sum() / n_steps if not gaps.empty else pd.Series(dtype=float)
    predicted = busy + max(kernels - 1, 0) * latency
    return {
        "eager_window_us": window,
        "kernel_us": busy,
        "kernels": kernels,
        "idle_cpu_bound_us": float(by_cause.get("cpu-bound", 0.0)),
        "idle_waiting_us": float(by_cause.get("waiting", 0.0)),
        "latency_us": latency,
        "median_waiting_us": median,
        "latency_from": source,
        "predicted_us": predicted,
        "predicted_speedup": window / predicted if predicted > 0 else float("nan"),
    }
