"""Where memory goes during a step: by category over time, the CUDA allocator's history, the peak of one call;
private torch APIs are read behind version checks."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from ..checks import bounded_int, check_callable
from .device import synchronize, wait_device

# The profiler's categories, in the order the figure stacks them (the steady ones at the bottom).
CATEGORIES = (
    "parameters", "optimizer state", "gradients", "activations", "inputs", "temporaries", "autograd detail", "unknown"
)  # fmt: skip
_NAMES = {
    "PARAMETER": "parameters",
    "OPTIMIZER_STATE": "optimizer state",
    "GRADIENT": "gradients",
    "ACTIVATION": "activations",
    "INPUT": "inputs",
    "TEMPORARY": "temporaries",
    "AUTOGRAD_DETAIL": "autograd detail",
}
MAX_STEPS = 100  # each profiled step keeps every allocation event in memory


def _profiler_internals() -> tuple[Any, dict]:
    try:
        from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX, MemoryProfileTimeline
    except ImportError as err:  # pragma: no cover - depends on the torch version
        raise RuntimeError(
            f"this torch ({torch.__version__}) has no torch.profiler._memory_profiler.MemoryProfileTimeline: "
            "use prof.export_memory_timeline(path) or helpers.allocator_history on a GPU instead"
        ) from err
    return MemoryProfileTimeline, _CATEGORY_TO_INDEX


def memory_timeline(prof: Any, device: torch.device | str | None = None) -> pd.DataFrame:
    """Memory in use by category over time from a finished profile recorded with ``profile_memory``,
    ``record_shapes`` and ``with_stack``; ``df.attrs`` holds the device and the peak."""
    if not hasattr(prof, "_memory_profile"):
        raise TypeError(f"memory_timeline needs a torch.profiler.profile object, got {type(prof).__name__}")
    timeline_cls, category_index = _profiler_internals()
    try:
        analysis = prof._memory_profile()
    except Exception as err:  # noqa: BLE001 - torch raises assorted errors when options are missing
        raise ValueError(
            f"the profiler's memory analysis failed ({type(err).__name__}: {err}). Record the profile with "
            "profile_memory=True, record_shapes=True and with_stack=True, and read it after the `with` block"
        ) from None
    timeline = timeline_cls(analysis)
    if device is None:
        devices = {key.device for _, _, (key, _), _ in timeline.timeline}
        device = next((d for d in devices if d.type == "cuda"), torch.device("cpu"))
    device = torch.device(device)
    times, sizes = timeline._coalesce_timeline(str(device))
    if not times:
        raise ValueError(f"the profile recorded no allocations on {device}: was profile_memory=True?")
    # sizes[i][0] is unused; column index+1 holds each category (torch's own layout)
    columns = {}
    for category, index in category_index.items():
        name = "unknown" if category is None else _NAMES.get(category.name, category.name.lower())
        columns[name] = np.array([row[index + 1] for row in sizes], dtype=np.int64)
    t = np.array(times, dtype=np.float64)
    out = pd.DataFrame({"time_us": t - t.min(), **{c: columns.get(c, np.zeros(len(t), np.int64)) for c in CATEGORIES}})
    out["total"] = out[list(CATEGORIES)].sum(axis=1)
    out.attrs["device"] = str(device)
    out.attrs["peak_bytes"] = int(out["total"].max())
    return out


def profile_memory(
    fn: Callable, *inputs: Any, steps: int = 1, warmup: int = 1, attempts: int = 3, unknown_limit: float = 0.25
) -> pd.DataFrame:
    """Memory by category over `steps` calls of ``fn(*inputs)`` with gradients; `warmup` calls run first, so
    one-time allocations (optimizer state, workspaces) show as present, not as growth.

    The profiler infers each tensor's category from the operations that made and used it, and some runs lose
    track of live tensors (they show as "unknown"). When "unknown" holds more than `unknown_limit` of the peak,
    the step is profiled again, up to `attempts` profiles; the one with the least "unknown" is returned.
    ``attrs["unknown_share_at_peak"]`` and ``attrs["profiles"]`` say what happened."""
    check_callable(fn)
    steps = bounded_int("steps", steps, 1, MAX_STEPS, "each profiled step keeps every allocation in memory")
    warmup = bounded_int("warmup", warmup, 0, MAX_STEPS)
    attempts = bounded_int("attempts", attempts, 1, 10)
    if not isinstance(unknown_limit, (int, float)) or not 0 <= unknown_limit <= 1:
        raise ValueError(f"unknown_limit must be a fraction of the peak between 0 and 1, got {unknown_limit!r}")
    device = wait_device(fn, inputs)
    for _ in range(warmup):
        fn(*inputs)
    synchronize(device)
    profiles = [_profile_once(fn, inputs, steps, device)]
    while profiles[-1].attrs["unknown_share_at_peak"] > unknown_limit and len(profiles) < attempts:
        profiles.append(_profile_once(fn, inputs, steps, device))
    best = min(profiles, key=lambda t: t.attrs["unknown_share_at_peak"])
    best.attrs["profiles"] = len(profiles)
    return best


def _profile_once(fn: Callable, inputs: tuple, steps: int, device: torch.device) -> pd.DataFrame:
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(
        activities=activities, profile_memory=True, record_shapes=True, with_stack=True
    ) as prof:
        for _ in range(steps):
            fn(*inputs)
        synchronize(device)
    timeline = memory_timeline(prof, device)
    at = timeline["total"].idxmax()
    timeline.attrs["unknown_share_at_peak"] = float(timeline.loc[at, "unknown"] / max(timeline.loc[at, "total"], 1))
    return timeline


def memory_peaks(timeline: pd.DataFrame) -> pd.DataFrame:
    """Per category: bytes in use at the peak total and the category's own maximum; the last row is the total."""
    if not isinstance(timeline, pd.DataFrame):
        raise TypeError(f"timeline must be a DataFrame from helpers.memory_timeline, got {type(timeline).__name__}")
    missing = [c for c in (*CATEGORIES, "total") if c not in timeline.columns]
    if missing:
        raise ValueError(f"timeline lacks columns {missing}: build it with helpers.memory_timeline")
    at = timeline["total"].idxmax()
    peak = float(timeline.loc[at, "total"]) or 1.0
    rows = [
        {
            "category": c,
            "at_peak_mb": timeline.loc[at, c] / 1e6,
            "max_mb": timeline[c].max() / 1e6,
            "share_of_peak": timeline.loc[at, c] / peak,
        }
        for c in CATEGORIES
        if timeline[c].max() > 0
    ]
    rows.append({"category": "total", "at_peak_mb": peak / 1e6, "max_mb": peak / 1e6, "share_of_peak": 1.0})
    return pd.DataFrame(rows)


def memory_figure(timeline: pd.DataFrame, title: str = "Memory in use by category") -> go.Figure:
    """A stacked area chart of :func:`memory_timeline`: MB in use per category over time."""
    if not isinstance(timeline, pd.DataFrame) or "time_us" not in timeline.columns:
        raise ValueError("timeline must be a DataFrame from helpers.memory_timeline (with a time_us column)")
    fig = go.Figure()
    x = timeline["time_us"] / 1e3
    for c in CATEGORIES:
        if c in timeline.columns and timeline[c].max() > 0:
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=timeline[c] / 1e6,
                    name=c,
                    mode="lines",
                    stackgroup="memory",
                    line={"shape": "hv", "width": 0.5},
                    hovertemplate=f"{c}: %{{y:.1f}} MB at %{{x:.2f}} ms<extra></extra>",
                )
            )
    device = timeline.attrs.get("device", "")
    fig.update_layout(
        title=f"{title} ({device})" if device else title,
        template="plotly_white",
        xaxis_title="time (ms)",
        yaxis_title="MB in use",
        legend={"traceorder": "normal"},
    )
    return fig


def allocator_history(fn: Callable, *inputs: Any, max_entries: int = 200_000) -> pd.DataFrame:
    """The CUDA caching allocator's allocs and frees while ``fn(*inputs)`` runs once, with the Python frame that
    asked; ``df.attrs["dropped"]`` says when its ring buffer of `max_entries` overflowed."""
    check_callable(fn)
    max_entries = bounded_int("max_entries", max_entries, 1, 10_000_000)
    if not torch.cuda.is_available():
        raise ValueError(
            "allocator_history reads the CUDA caching allocator: it needs a CUDA GPU. On a CPU use "
            "helpers.profile_memory, which reads the profiler's memory events"
        )
    memory = torch.cuda.memory
    if not (hasattr(memory, "_record_memory_history") and hasattr(memory, "_snapshot")):  # pragma: no cover
        raise RuntimeError(f"this torch ({torch.__version__}) has no torch.cuda.memory._record_memory_history")
    torch.cuda.synchronize()
    memory._record_memory_history(max_entries=max_entries)
    try:
        fn(*inputs)
        torch.cuda.synchronize()
        snapshot = memory._snapshot()
    finally:
        memory._record_memory_history(enabled=None)
    events = [e for trace in snapshot.get("device_traces", []) for e in trace]
    rows, total = [], 0
    for i, e in enumerate(events):
        action, size = str(e.get("action", "")), int(e.get("size", 0))
        if action == "alloc":
            total += size
        elif action in ("free_completed",):
            total -= size
        frames = e.get("frames") or []
        frame = (
            f"{frames[0].get('filename', '?')}:{frames[0].get('line', '?')} {frames[0].get('name', '')}"
            if frames
            else ""
        )
        rows.append(
            {
                "index": i,
                "action": action,
                "bytes": size,
                "allocated_mb": total / 1e6,
                "time_us": e.get("time_us"),
                "frame": frame,
            }
        )
    out = pd.DataFrame(rows, columns=["index", "action", "bytes", "allocated_mb", "time_us", "frame"])
    out.attrs["dropped"] = len(events) >= max_entries
    return out


def _cpu_peak(fn: Callable, inputs: tuple) -> int:
    with tempfile.TemporaryDirectory(prefix="course-memory-") as tmp:
        path = Path(tmp) / "trace.json"
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
            fn(*inputs)
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text()).get("traceEvents", [])
    running, peak = 0, 0
    for event in sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e.get("ts", 0)):
        args = event.get("args", {})
        if args.get("Device Type", 0) != 0:  # CPU allocations only
            continue
        running += int(args.get("Bytes", 0))
        peak = max(peak, running)
    return peak


def peak_memory(fn: Callable, *inputs: Any) -> int:
    """Peak bytes one call of ``fn(*inputs)`` allocates beyond what was held before, its output included
    (CUDA: the allocator's peak; CPU: the profiler's allocation events)."""
    check_callable(fn)
    device = wait_device(fn, inputs)
    with torch.no_grad():
        if device.type == "cuda":
            synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
            before = torch.cuda.memory_allocated(device)
            fn(*inputs)
            synchronize(device)
            return int(torch.cuda.max_memory_allocated(device) - before)
        return _cpu_peak(fn, inputs)


def saved_bytes(fn: Callable[[], Any], exclude: tuple[torch.Tensor, ...] = ()) -> int:
    """Bytes of the distinct tensors autograd saves while ``fn()`` runs, storages shared with `exclude` left out."""
    skip = {t.untyped_storage().data_ptr() for t in exclude}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        try:
            storage = t.untyped_storage()
            ptr = storage.data_ptr()
            if ptr not in skip:
                seen[ptr] = max(seen.get(ptr, 0), storage.nbytes())
        except (RuntimeError, NotImplementedError):  # tensors without a storage (fakes, wrappers)
            pass
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(seen.values())
