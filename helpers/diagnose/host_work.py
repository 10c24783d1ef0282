"""What the host was doing while the GPU waited for it: many short waits between launches (launch-bound), or
long waits filled by one host operator (preparing data on the CPU, say) or by no operator at all (Python code, or
work outside the profiler). The fixes differ: graphs and compile remove launches, not host work."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from helpers.trace.categories import LAUNCH_CATEGORIES, STEP_PREFIX
from helpers.trace.links import marked_ancestor

# a wait this long is no launch overhead: the host was busy with something else
LONG_WAIT_US = 100.0
# one host operator (or none) filling at least this share of the long waits is named as their cause
DOMINANT_SHARE = 0.5
# the longest waits read: each is one pass over the host's ranges, so this bounds the cost on a huge trace
MAX_WAITS = 256
NO_OPERATOR = "no profiled operator"
GRAPH_LAUNCHES = "CUDA graph launches (cudaGraphLaunch)"
# the allocator's driver calls, counted as one activity: they sit inside operators or in none (empty_cache)
ALLOCATOR = "the CUDA allocator (cudaMalloc, cudaFree)"


@dataclass(frozen=True)
class HostWork:
    """The long waits' share of the GPU's idle time and what filled most of the ones read."""

    long_share: float  # of the idle time, in waits of at least LONG_WAIT_US
    name: str | None  # what filled most of the long waits read, if one thing did
    share: float  # of the long waits read, held by `name`
    rows: np.ndarray  # the instances of `name` that overlap the long waits
    fillers: tuple[str, ...] = ()  # the two largest fillers, when none holds DOMINANT_SHARE


def outermost_host_ops(ev: pd.DataFrame) -> np.ndarray:
    """Rows of host operators with no operator among their ancestors. Annotations (a user's range around a whole
    phase) and profiler steps (``cpu_op`` in older traces) are not operators: they would name the phase, not the
    work."""
    names = pd.Series(ev["name"].to_numpy(dtype=object), dtype=object)
    is_op = (~ev["on_device"].to_numpy()) & (ev["cat"].to_numpy(dtype=object) == "cpu_op")
    is_op &= ~names.str.startswith(STEP_PREFIX).to_numpy()
    outer = marked_ancestor(ev["parent"].to_numpy(), is_op, outermost=True)
    return np.flatnonzero(is_op & (outer == np.arange(len(ev))))


def host_work_in_waits(
    ev: pd.DataFrame,
    t0: float,
    starts: np.ndarray,
    ends: np.ndarray,
    launch_rows: np.ndarray,
    allocator_calls: frozenset[str] = frozenset(),
) -> HostWork:
    """Which host range fills the GPU's waits [starts, ends) (trace-relative us), each ended by the work its launch
    call (`launch_rows`, -1 when unknown) issued: the long waits' share of the idle time and, when one operator,
    the allocator (runtime calls named in `allocator_calls`), graph launches or no operator fills at least
    DOMINANT_SHARE of the long waits read, its name and instances.

    A wait is read on the thread of its launch call only (another thread's work did not delay that launch). The
    operator around that call is its own dispatch: it counts as covered time but is never named (launch-bound)."""
    starts, ends = np.asarray(starts, dtype=float), np.asarray(ends, dtype=float)
    launch_rows = np.asarray(launch_rows, dtype=np.int64)
    idle = np.where(np.isfinite(starts) & np.isfinite(ends), np.maximum(ends - starts, 0.0), 0.0)
    total = float(idle.sum())
    long = np.flatnonzero(idle >= LONG_WAIT_US)
    none = np.empty(0, dtype=np.int64)
    if total <= 0 or not len(long):
        return HostWork(0.0, None, 0.0, none)
    long_share = float(idle[long].sum()) / total
    long = long[launch_rows[long] >= 0]  # a wait whose launch is unknown cannot say what delayed it
    long = long[np.argsort(-idle[long], kind="stable")[:MAX_WAITS]]
    if not len(long):
        return HostWork(long_share, None, 0.0, none)
    host = ~ev["on_device"].to_numpy()
    names_all = ev["name"].to_numpy(dtype=object)
    ops = outermost_host_ops(ev)
    calls = np.flatnonzero(host & ev["name"].isin(allocator_calls).to_numpy())
    is_graph = host & pd.Series(names_all, dtype=object).str.contains("GraphLaunch", regex=False).to_numpy()
    graphs = np.flatnonzero(is_graph)
    # other runtime calls (a synchronize, a launch) cover host time but are other rules' findings, never named here
    runtime = host & ev["cat"].isin(LAUNCH_CATEGORIES).to_numpy() & ~ev["name"].isin(allocator_calls).to_numpy()
    other = np.flatnonzero(runtime & ~is_graph)
    ranges = np.concatenate([ops, calls, graphs, other])
    ts = ev["ts"].to_numpy(dtype=float) - t0
    a = ts[ranges]
    b = a + np.maximum(np.nan_to_num(ev["dur"].to_numpy(dtype=float)[ranges]), 0.0)
    codes, uniques = pd.factorize(pd.Series(names_all[ops], dtype=object))
    names = [*map(str, uniques), ALLOCATOR, GRAPH_LAUNCHES, NO_OPERATOR]
    k = len(uniques)
    # the slot past the names: the runtime calls' covered time
    codes = np.concatenate([codes, np.full(len(calls), k), np.full(len(graphs), k + 1), np.full(len(other), k + 3)])
    lanes = ev["lane"].to_numpy(dtype=object)
    range_lanes = lanes[ranges]
    held = np.zeros(len(names))
    hit = np.zeros(len(ranges), dtype=bool)
    for g in long:
        s, e = float(starts[g]), float(ends[g])
        call = int(launch_rows[g])
        over = np.clip(np.minimum(b, e) - np.maximum(a, s), 0.0, None) * (range_lanes == lanes[call])
        inside = np.flatnonzero(over > 0)
        first, last = np.maximum(a[inside], s), np.minimum(b[inside], e)
        # the operator around the wait's own launch call is that launch's dispatch, not work beside it
        launching = (a[inside] <= ts[call]) & (b[inside] >= ts[call]) & (codes[inside] < k)
        named = inside[~launching]
        hit[named] = True
        held += np.bincount(codes[named], weights=over[named], minlength=len(names) + 1)[: len(names)]
        # what no range covers is host time outside any operator (ranges nest: their union)
        held[-1] += (e - s) - _union(first, last)
    read = float(idle[long].sum())
    order = np.argsort(-held, kind="stable")
    best = int(order[0])
    if held[best] < DOMINANT_SHARE * read:
        top = tuple(names[i] for i in order[:2] if held[i] > 0.1 * read)
        return HostWork(long_share, None, 0.0, none, top)
    rows = ranges[hit & (codes == best)] if best != len(names) - 1 else none
    return HostWork(long_share, names[best], min(held[best] / read, 1.0), rows)


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
    if work.long_share < DOMINANT_SHARE or (work.name is None and not work.fillers):
        return (
            "The GPU waits for the CPU: kernels are launched too slowly to keep it busy (launch-bound)",
            "Capture the step in a CUDA graph (torch.compile(mode='reduce-overhead') or torch.cuda.graphs), fuse "
            "small kernels with torch.compile, or give each kernel more work (a bigger batch)",
        )
    if work.name is None:
        return (
            f"The GPU waits for the CPU in long gaps that no single host activity fills (mostly "
            f"{' and '.join(work.fillers)})",
            "Read the host's side of the longest gaps in the timeline and move that work out of the step (inputs "
            "prepared ahead by a DataLoader with num_workers > 0, logging less often); CUDA graphs and compile "
            "remove launches, not this work",
        )
    if work.name == GRAPH_LAUNCHES:
        return (
            "The GPU waits for the CPU between CUDA graph replays: the graph launches themselves fill the waits",
            "The step already runs as a CUDA graph: keep the queue full across replays (launch the next replay "
            "before reading a result: no synchronize or .item() between them), capture more of the step in fewer "
            "graphs, and upload a graph once before timing (graph.upload(), or a warm-up replay)",
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
