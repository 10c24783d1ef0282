"""What the host was doing while the GPU waited for it: many short waits between launches (launch-bound), or
long waits filled by one host operator (preparing data on the CPU, say) or by no operator at all (Python code, or
work outside the profiler). The fixes differ: graphs and compile remove launches, not host work."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from helpers.trace.categories import STEP_PREFIX

# a wait this long is no launch overhead: the host was busy with something else
LONG_WAIT_US = 100.0
# one host operator (or none) filling at least this share of the long waits is named as their cause
DOMINANT_SHARE = 0.5
# the longest waits looked at, enough to name a cause on any trace without a pass per wait over all of it
MAX_WAITS = 256
NO_OPERATOR = "no profiled operator"
RUNTIME_CATEGORIES = ("cuda_runtime", "cuda_driver")
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
    """Rows of host operators with no operator among their ancestors. Annotations (a user's range around a whole
    phase) and profiler steps (``cpu_op`` in older traces) are not operators: they would name the phase, not the
    work."""
    names = pd.Series(ev["name"].to_numpy(dtype=object), dtype=object)
    is_op = (~ev["on_device"].to_numpy()) & (ev["cat"].to_numpy(dtype=object) == "cpu_op")
    is_op &= ~names.str.startswith(STEP_PREFIX).to_numpy()
    parent = ev["parent"].to_numpy()
    below_op, cur = np.zeros(len(ev), dtype=bool), parent.copy()
    while (cur >= 0).any():  # climb every row one level at a time
        live = cur >= 0
        below_op |= live & is_op[np.maximum(cur, 0)]
        cur = np.where(live, parent[np.maximum(cur, 0)], -1)
    return np.flatnonzero(is_op & ~below_op)


def host_work_in_waits(
    ev: pd.DataFrame, t0: float, starts: np.ndarray, ends: np.ndarray, allocator_calls: frozenset[str] = frozenset()
) -> HostWork:
    """Which host range fills the GPU's waits [starts, ends) (trace-relative us): the long waits' share of the idle
    time and, when one operator, the allocator (runtime calls named in `allocator_calls`) or no operator fills at
    least DOMINANT_SHARE of it, its name and instances.

    Only the thread that launched the work ending a wait is read (another thread's work did not delay that
    launch), and an operator that launches device work inside the wait is the launching itself, its own dispatch
    cost: it is not named (launch-bound), though it still counts as covered time."""
    starts, ends = np.asarray(starts, dtype=float), np.asarray(ends, dtype=float)
    idle = np.where(np.isfinite(starts) & np.isfinite(ends), np.maximum(ends - starts, 0.0), 0.0)
    total = float(idle.sum())
    long = np.flatnonzero(idle >= LONG_WAIT_US)
    if total <= 0 or not len(long):
        return HostWork(0.0, None, 0.0, np.empty(0, dtype=np.int64))
    long = long[np.argsort(-idle[long], kind="stable")[:MAX_WAITS]]
    ops = outermost_host_ops(ev)
    host = ~ev["on_device"].to_numpy()
    calls = np.flatnonzero(host & ev["name"].isin(allocator_calls).to_numpy())
    # other runtime calls (a synchronize, a launch) cover host time but are other rules' findings, never named here
    runtime = host & ev["cat"].isin(RUNTIME_CATEGORIES).to_numpy() & ~ev["name"].isin(allocator_calls).to_numpy()
    other = np.flatnonzero(runtime)
    ranges = np.concatenate([ops, calls, other])
    ts = ev["ts"].to_numpy(dtype=float) - t0
    a = ts[ranges]
    b = a + np.maximum(np.nan_to_num(ev["dur"].to_numpy(dtype=float)[ranges]), 0.0)
    codes, uniques = pd.factorize(pd.Series(ev["name"].to_numpy(dtype=object)[ops], dtype=object))
    allocator_code = len(uniques)
    names = [*map(str, uniques), ALLOCATOR]
    # slots past the names: no operator, then the runtime calls' covered time
    codes = np.concatenate([codes, np.full(len(calls), allocator_code), np.full(len(other), len(names) + 1)])
    lanes = ev["lane"].to_numpy(dtype=object)
    range_lanes = lanes[ranges]
    # the calls that launched device work, by time: a wait ends at a launch made during it
    launch = ev["launch"].to_numpy()
    calls_made = np.unique(launch[launch >= 0])
    made_ts = ts[calls_made]
    order = np.argsort(made_ts, kind="stable")
    calls_made, made_ts = calls_made[order], made_ts[order]
    made_on = {lane: made_ts[lanes[calls_made] == lane] for lane in pd.unique(lanes[calls_made])}
    held = np.zeros(len(names) + 1)  # the last slot: no operator
    hit = np.zeros(len(ranges), dtype=bool)
    for g in long:
        s, e = float(starts[g]), float(ends[g])
        lo, hi = np.searchsorted(made_ts, [s, e], side="right")
        if hi > lo:  # the thread whose launch ended the wait, and its launches
            lane = lanes[calls_made[hi - 1]]
            near, made = range_lanes == lane, made_on[lane]
        else:
            near, made = np.ones(len(ranges), dtype=bool), made_ts
        over = np.clip(np.minimum(b, e) - np.maximum(a, s), 0.0, None) * near
        inside = np.flatnonzero(over > 0)
        # an operator that launches inside the wait is the launch, not work beside it
        first, last = np.maximum(a[inside], s), np.minimum(b[inside], e)
        launching = np.searchsorted(made, last, side="right") > np.searchsorted(made, first, side="left")
        named = inside[~launching]
        hit[named] = True
        held[: len(names)] += np.bincount(codes[named], weights=over[named], minlength=len(names) + 2)[: len(names)]
        # what no range covers is host time outside any operator (ranges nest: their union)
        held[-1] += (e - s) - _union(first, last)
    long_share = float(idle[long].sum()) / total
    best = int(np.argmax(held))
    if held[best] < DOMINANT_SHARE * total:
        return HostWork(long_share, None, 0.0, np.empty(0, dtype=np.int64))
    if best == len(names):
        return HostWork(long_share, NO_OPERATOR, min(held[best] / total, 1.0), np.empty(0, dtype=np.int64))
    return HostWork(long_share, names[best], min(held[best] / total, 1.0), ranges[hit & (codes == best)])


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
