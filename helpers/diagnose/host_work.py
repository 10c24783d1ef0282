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
# the allocator's driver calls, counted as one activity: they sit inside operators or in none (empty_cache)
ALLOCATOR = "the CUDA allocator (cudaMalloc, cudaFree)"


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


def host_work_in_waits(
    ev: pd.DataFrame, t0: float, starts: np.ndarray, ends: np.ndarray, allocator_calls: frozenset[str] = frozenset()
) -> HostWork:
    """Which host range fills the GPU's waits [starts, ends) (trace-relative us): the long waits' share of the idle
    time and, when one operator, the allocator (runtime calls named in `allocator_calls`) or no operator fills at
    least DOMINANT_SHARE of it, its name and instances."""
    idle = np.maximum(np.asarray(ends, dtype=float) - np.asarray(starts, dtype=float), 0.0)
    total = float(idle.sum())
    long = np.flatnonzero(idle >= LONG_WAIT_US)
    if total <= 0 or not len(long):
        return HostWork(0.0, None, 0.0, np.empty(0, dtype=np.int64))
    long = long[np.argsort(-idle[long], kind="stable")[:MAX_WAITS]]
    ops = outermost_host_ops(ev)
    calls = np.flatnonzero((~ev["on_device"].to_numpy()) & ev["name"].isin(allocator_calls).to_numpy())
    ranges = np.concatenate([ops, calls])
    a = ev["ts"].to_numpy(dtype=float)[ranges] - t0
    b = a + np.maximum(np.nan_to_num(ev["dur"].to_numpy(dtype=float)[ranges]), 0.0)
    names = np.concatenate([ev["name"].to_numpy(dtype=object)[ops], np.full(len(calls), ALLOCATOR, dtype=object)])
    held: dict[str, float] = {}
    hit = np.zeros(len(ranges), dtype=bool)
    for g in long:
        s, e = float(starts[g]), float(ends[g])
        over = np.clip(np.minimum(b, e) - np.maximum(a, s), 0.0, None)
        inside = np.flatnonzero(over > 0)
        hit[inside] = True
        for name, t in pd.Series(over[inside]).groupby(names[inside]).sum().items():
            held[str(name)] = held.get(str(name), 0.0) + float(t)
        # what no range covers is host time outside any operator (ranges nest and threads overlap: their union)
        held[NO_OPERATOR] = (
            held.get(NO_OPERATOR, 0.0) + (e - s) - _union(np.maximum(a[inside], s), np.minimum(b[inside], e))
        )
    long_share = float(idle[long].sum()) / total
    name, t = max(held.items(), key=lambda kv: kv[1])
    if t < DOMINANT_SHARE * total:
        return HostWork(long_share, None, 0.0, np.empty(0, dtype=np.int64))
    rows = ranges[hit & (names == name)] if name != NO_OPERATOR else np.empty(0, dtype=np.int64)
    return HostWork(long_share, name, min(t / total, 1.0), rows)


def _union(starts: np.ndarray, ends: np.ndarray) -> float:
    """The length of the union of intervals."""
    if not len(starts):
        return 0.0
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    # an interval adds what it reaches past every earlier one, from no earlier than its own start
    before = np.concatenate([[s[0]], reach[:-1]])
    return float(np.clip(e - np.maximum(s, before), 0.0, None).sum())


def host_work_fix(work: HostWork) -> tuple[str, str]:
    """The finding's title and fix for the GPU's waits, by what filled them."""
    if work.name is None:
        return (
            "The GPU waits for the CPU: kernels are launched too slowly to keep it busy (launch-bound)",
            "Capture the step in a CUDA graph (torch.compile(mode='reduce-overhead') or torch.cuda.graphs), fuse "
            "small kernels with torch.compile, or give each kernel more work (a bigger batch)",
        )
    if work.name == ALLOCATOR:
        return (
            "The GPU waits for the CPU, which spends that time in the CUDA allocator (cudaMalloc, cudaFree)",
            "Keep the caching allocator's memory between steps: no torch.cuda.empty_cache() in the loop, the same "
            "shapes every step (pad or bucket them), PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against "
            "fragmentation; see the allocator finding",
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
