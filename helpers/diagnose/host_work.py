"""What the host was doing while the GPU waited for it: many short waits between launches (launch-bound), or
long waits filled by one host operator (preparing data on the CPU, say) or by no operator at all (Python code, or
work outside the profiler). The fixes differ: graphs and compile remove launches, not host work."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

# a wait this long is no launch overhead: the host was busy with something else
LONG_WAIT_US = 100.0
# one host operator (or none) filling at least this share of the long waits is named as their cause
DOMINANT_SHARE = 0.5
# the longest waits looked at, enough to name a cause on any trace without a pass per wait over all of it
MAX_WAITS = 2000
NO_OPERATOR = "no profiled operator"


@dataclass(frozen=True)
class HostWork:
    """The long waits' share of the GPU's idle time and what filled most of them."""

    long_share: float  # of the idle time, in waits of at least LONG_WAIT_US
    name: str | None  # the host operator (or NO_OPERATOR) that filled most of the long waits, if one did
    share: float  # of the idle time, held by `name`
    rows: np.ndarray  # the instances of `name` that overlap the long waits


def outermost_host_ops(ev: pd.DataFrame) -> np.ndarray:
    """Rows of host operators nested in no other operator. Annotations (a profiler step, a user's range around a
    whole phase) are not operators: they would name the phase, not the work."""
    is_range = (~ev["on_device"].to_numpy()) & (ev["cat"].to_numpy(dtype=object) == "cpu_op")
    parent = ev["parent"].to_numpy()
    nested = np.zeros(len(ev), dtype=bool)
    has = parent >= 0
    nested[has] = is_range[parent[has]]
    return np.flatnonzero(is_range & ~nested)


def host_work_in_waits(ev: pd.DataFrame, t0: float, starts: np.ndarray, ends: np.ndarray) -> HostWork:
    """Which host range fills the GPU's waits [starts, ends) (trace-relative us): the long waits' share of the idle
    time and, when one operator (or no operator) fills at least DOMINANT_SHARE of it, its name and instances."""
    idle = np.maximum(np.asarray(ends, dtype=float) - np.asarray(starts, dtype=float), 0.0)
    total = float(idle.sum())
    long = np.flatnonzero(idle >= LONG_WAIT_US)
    if total <= 0 or not len(long):
        return HostWork(0.0, None, 0.0, np.empty(0, dtype=np.int64))
    long = long[np.argsort(-idle[long], kind="stable")[:MAX_WAITS]]
    ranges = outermost_host_ops(ev)
    a = ev["ts"].to_numpy(dtype=float)[ranges] - t0
    b = a + np.maximum(ev["dur"].to_numpy(dtype=float)[ranges], 0.0)
    names = ev["name"].to_numpy(dtype=object)[ranges]
    held: dict[str, float] = {}
    hit = np.zeros(len(ranges), dtype=bool)
    for g in long:
        s, e = float(starts[g]), float(ends[g])
        over = np.clip(np.minimum(b, e) - np.maximum(a, s), 0.0, None)
        inside = np.flatnonzero(over > 0)
        hit[inside] = True
        covered = 0.0
        for name, t in pd.Series(over[inside]).groupby(names[inside]).sum().items():
            held[str(name)] = held.get(str(name), 0.0) + float(t)
            covered += float(t)
        # threads can overlap one wait twice; what no range covers is host time outside any operator
        held[NO_OPERATOR] = held.get(NO_OPERATOR, 0.0) + max(e - s - covered, 0.0)
    long_share = float(idle[long].sum()) / total
    name, t = max(held.items(), key=lambda kv: kv[1])
    if t < DOMINANT_SHARE * total:
        return HostWork(long_share, None, 0.0, np.empty(0, dtype=np.int64))
    rows = ranges[hit & (names == name)] if name != NO_OPERATOR else np.empty(0, dtype=np.int64)
    return HostWork(long_share, name, min(t / total, 1.0), rows)


def host_work_fix(work: HostWork) -> tuple[str, str]:
    """The finding's title and fix for the GPU's waits, by what filled them."""
    if work.name is None:
        return (
            "The GPU waits for the CPU: kernels are launched too slowly to keep it busy (launch-bound)",
            "Capture the step in a CUDA graph (torch.compile(mode='reduce-overhead') or torch.cuda.graphs), fuse "
            "small kernels with torch.compile, or give each kernel more work (a bigger batch)",
        )
    if work.name == NO_OPERATOR:
        return (
            "The GPU waits for the CPU, which runs no profiled operator then (Python code, or work the profiler "
            "does not see)",
            "Find the host code between the operators (profile with with_stack=True, or time the loop's Python) and "
            "move it out of the step: prepare inputs ahead (a DataLoader with num_workers > 0), log less often; "
            "CUDA graphs and compile remove launches, not this work",
        )
    return (
        f"The GPU waits for the CPU, which spends that time in {work.name} (host work, not launching)",
        f"Take {work.name} out of the step's critical path: prepare inputs ahead of the step (a DataLoader with "
        "num_workers > 0 and pin_memory=True), create tensors on the GPU directly, or start that work while the "
        "GPU runs the previous step; CUDA graphs and compile remove launches, not this work",
    )
