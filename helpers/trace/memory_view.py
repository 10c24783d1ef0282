"""Memory from a saved trace's ``[memory]`` events (``profile_memory=True``), no torch: over time per device,
and the peak by operator. Times in ms from the first event, sizes in MB."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .model import Trace, check_trace

MAX_POINTS = 4000  # per device in memory_over_time: plotly stays quick, a peak is never dropped
BEFORE_TRACE = "(allocated before the trace: no event)"
NO_OP = "(no operator running)"


def _memory(trace: Trace) -> pd.DataFrame:
    trace = check_trace(trace)
    memory = trace._tables.memory
    if memory is None or memory.empty:
        raise ValueError(
            f"{trace.info.describe()} holds no '[memory]' events: record it with "
            "torch.profiler.profile(..., profile_memory=True) to see memory over time and by operator"
        )
    return memory


def _origin_us(trace: Trace, memory: pd.DataFrame) -> float:
    ev = trace.events
    return float(min(ev["ts"].min(), memory["ts"].min())) if len(ev) else float(memory["ts"].min())


def _totals(memory: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Allocated and reserved bytes per row: the allocator's totals, else a running sum of Bytes per device."""
    alloc = memory["total_allocated"]
    if alloc.isna().any():
        running = memory["bytes"].astype("int64").groupby(memory["device"].to_numpy()).cumsum()
        allocated = np.where(alloc.isna(), running.to_numpy(), alloc.to_numpy(dtype=np.int64, na_value=0))
    else:
        allocated = alloc.to_numpy(dtype=np.int64)
    reserved = memory["total_reserved"].to_numpy(dtype=np.float64, na_value=np.nan)
    return allocated, reserved


def _bounded(rows: np.ndarray, t: np.ndarray, values: np.ndarray, max_points: int) -> np.ndarray:
    """At most about `max_points` of `rows` (time-ordered): per time bucket the first, lowest and highest row."""
    if len(rows) <= max_points:
        return rows
    buckets = max(max_points // 3, 1)
    edges = np.linspace(t[rows[0]], t[rows[-1]], buckets + 1)
    which = np.clip(np.searchsorted(edges, t[rows], side="right") - 1, 0, buckets - 1)
    frame = pd.DataFrame({"row": rows, "bucket": which, "v": values[rows]})
    group = frame.groupby("bucket", sort=False)
    keep = np.concatenate(
        [group["row"].first().to_numpy(), frame.loc[group["v"].idxmin(), "row"], frame.loc[group["v"].idxmax(), "row"]]
    )
    return np.unique(keep)


def memory_over_time(trace: Trace, max_points: int = MAX_POINTS) -> pd.DataFrame:
    """Memory allocated and reserved over time per device; thinned to about `max_points` per device keeping each
    bucket's extremes, so the peak (``df.attrs["peak_mb"]``) is always kept."""
    memory = _memory(trace)
    if isinstance(max_points, bool) or not isinstance(max_points, int) or max_points < 3:
        raise ValueError(f"max_points must be an int >= 3, got {max_points!r}")
    allocated, reserved = _totals(memory)
    t = (memory["ts"].to_numpy() - _origin_us(trace, memory)) / 1e3
    devices = memory["device"].to_numpy(dtype=object)
    parts = [_bounded(np.flatnonzero(devices == d), t, allocated, max_points) for d in sorted(set(devices))]
    keep = np.concatenate(parts)
    out = pd.DataFrame(
        {
            "device": devices[keep],
            "time_ms": t[keep],
            "allocated_mb": allocated[keep] / 1e6,
            "reserved_mb": reserved[keep] / 1e6,
        }
    )
    out.attrs["peak_mb"] = {str(d): float(allocated[devices == d].max()) / 1e6 for d in sorted(set(devices))}
    out.attrs["events"] = len(memory)
    return out


def memory_over_time_figure(trace: Trace, max_points: int = MAX_POINTS) -> go.Figure:
    """A line per device of :func:`memory_over_time` (allocated, and reserved where recorded), peak marked."""
    table = memory_over_time(trace, max_points)
    fig = go.Figure()
    for device, rows in table.groupby("device", sort=True):
        fig.add_trace(
            go.Scatter(
                x=rows["time_ms"],
                y=rows["allocated_mb"],
                name=f"{device} allocated",
                mode="lines",
                line={"shape": "hv"},
                hovertemplate=f"{device}: %{{y:.2f}} MB allocated at %{{x:.3f}} ms<extra></extra>",
            )
        )
        if rows["reserved_mb"].notna().any() and rows["reserved_mb"].max() > 0:
            fig.add_trace(
                go.Scatter(
                    x=rows["time_ms"],
                    y=rows["reserved_mb"],
                    name=f"{device} reserved",
                    mode="lines",
                    line={"shape": "hv", "dash": "dot"},
                )
            )
        peak = rows.loc[rows["allocated_mb"].idxmax()]
        fig.add_annotation(
            x=peak["time_ms"], y=peak["allocated_mb"], text=f"peak {peak['allocated_mb']:.2f} MB", showarrow=True
        )
    fig.update_layout(
        title=f"Memory over time: {check_trace(trace).info.describe()}",
        template="plotly_white",
        xaxis_title="time (ms)",
        yaxis_title="MB allocated",
    )
    return fig


def _enclosing_ops(trace: Trace, memory: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(innermost, outermost) row of the cpu_op running on the same thread at each memory event; -1 when none."""
    ev = trace.events
    n = len(memory)
    inner = np.full(n, -1, dtype=np.int64)
    outer = np.full(n, -1, dtype=np.int64)
    host = ~ev["on_device"].to_numpy()
    ts, end = ev["ts"].to_numpy(), ev["ts"].to_numpy() + np.maximum(ev["dur"].to_numpy(), 0.0)
    parent = ev["parent"].to_numpy()
    is_op = (ev["cat"].to_numpy(dtype=object) == "cpu_op") & host
    lanes = ev["lane"].to_numpy(dtype=object)
    t = memory["ts"].to_numpy()
    mem_lanes = ("CPU " + memory["pid"].astype(str) + "/" + memory["tid"].astype(str)).to_numpy(dtype=object)
    for lane in set(mem_lanes):
        rows = np.flatnonzero(host & (lanes == lane))  # in start order
        which = np.flatnonzero(mem_lanes == lane)
        if not len(rows):
            continue
        at = np.searchsorted(ts[rows], t[which], side="right") - 1
        cur = np.where(at >= 0, rows[np.maximum(at, 0)], -1)
        # climb from the last event started before each allocation to its ancestors: those that
        # are still open enclose it (nesting depth bounds the loop)
        while (cur >= 0).any():
            live = cur >= 0
            c = np.maximum(cur, 0)
            hit = live & is_op[c] & (end[c] >= t[which])
            inner[which] = np.where(hit & (inner[which] < 0), c, inner[which])
            outer[which] = np.where(hit, c, outer[which])
            cur = np.where(live, parent[c], -1)
    return inner, outer


def memory_by_op(trace: Trace) -> pd.DataFrame:
    """Every allocation and free with the innermost (``op``) and outermost (``top_op``) operator running then."""
    memory = _memory(trace)
    inner, outer = _enclosing_ops(trace, memory)
    names = trace.events["name"].to_numpy(dtype=object)
    allocated, _ = _totals(memory)
    return pd.DataFrame(
        {
            "device": memory["device"].to_numpy(dtype=object),
            "time_ms": (memory["ts"].to_numpy() - _origin_us(trace, memory)) / 1e3,
            "bytes": memory["bytes"].to_numpy(dtype=np.int64),
            "addr": memory["addr"].array,
            "allocated_mb": allocated / 1e6,
            "op": np.where(inner >= 0, names[np.maximum(inner, 0)], NO_OP),
            "top_op": np.where(outer >= 0, names[np.maximum(outer, 0)], NO_OP),
        }
    )


def _pick_device(table: pd.DataFrame, device: str | None) -> str:
    devices = sorted(set(table["device"]))
    if device is None:  # the accelerator when there is one: that is the memory that runs out
        peaks = table.groupby("device")["allocated_mb"].max()
        gpus = [d for d in devices if d != "CPU"]
        return str(peaks[gpus].idxmax()) if gpus else "CPU"
    if device not in devices:
        raise ValueError(f"device {device!r} has no memory events in this trace; it has: {', '.join(devices)}")
    return device


def peak_memory_by_op(trace: Trace, device: str | None = None, by: str = "top_op") -> pd.DataFrame:
    """The allocations live at a device's peak (default: the GPU with the highest), grouped by operator (`by`:
    ``"top_op"`` or ``"op"``), largest first, with a row for memory held before the trace began."""
    if by not in ("top_op", "op"):
        raise ValueError(f"by must be 'top_op' (outermost operator) or 'op' (innermost), got {by!r}")
    table = memory_by_op(trace)
    device = _pick_device(table, device)
    rows = table[table["device"] == device].reset_index(drop=True)
    peak = int(rows["allocated_mb"].to_numpy().argmax())  # first time the peak is reached
    upto = rows.iloc[: peak + 1]
    # an allocation is live at the peak unless the next event at its address (up to the peak) frees it
    addr = upto["addr"].to_numpy(dtype=np.int64, na_value=-1)
    order = np.lexsort((np.arange(len(upto)), addr))
    sizes = upto["bytes"].to_numpy()[order]
    same_next = np.append(addr[order][1:] == addr[order][:-1], False)
    freed_next = np.append(sizes[1:] < 0, False)
    live = (sizes > 0) & ~(same_next & freed_next) & (addr[order] >= 0)
    live_rows = upto.iloc[order[live]]
    grouped = live_rows.groupby(by, sort=False)["bytes"].agg(["sum", "size"])
    out = pd.DataFrame(
        {"op": grouped.index.astype(str), "live_mb": grouped["sum"].to_numpy() / 1e6, "allocations": grouped["size"]}
    )
    peak_mb = float(rows.loc[peak, "allocated_mb"])
    before = peak_mb - float(out["live_mb"].sum())
    if before > 1e-6:
        out.loc[len(out)] = [BEFORE_TRACE, before, 0]
    out = out.sort_values("live_mb", ascending=False, kind="stable").reset_index(drop=True)
    out["allocations"] = out["allocations"].astype(np.int64)
    out["share_of_peak"] = out["live_mb"] / peak_mb if peak_mb > 0 else 0.0
    out.attrs.update(device=device, peak_mb=peak_mb, peak_time_ms=float(rows.loc[peak, "time_ms"]))
    return out
