"""The derived columns of an events table, computed with numpy over whole columns once per trace:
``on_device``/``lane`` (host thread or device stream), ``parent``/``depth`` (nesting on a thread),
``launch``/``launched_by`` (a device event's launch call and the ``cpu_op`` around it), ``annotation``
(innermost ``record_function``) and ``step``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .categories import (
    DEVICE_CATEGORIES,
    HOST_TREE_CATEGORIES,
    LAUNCH_CATEGORIES,
    MTIA_CATEGORY,
    STEP_PREFIX,
    canonical_category,
    device_work_mask,
)
from .correlation import match_launches, owner_of
from .graph_replay import replay_notes, tie_graph_replays

# A child may overhang its parent by a fraction of a microsecond (clock rounding in the profiler).
NESTING_TOLERANCE_US = 0.5
# Marks a missing integer in the id columns while they are built (Kineto ids are never this negative).
MISSING_ID = -(1 << 62)


def _factorize_strings(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    codes, uniques = pd.factorize(values)
    return codes.astype(np.int64), np.asarray(uniques, dtype=object)


def _lanes(events: pd.DataFrame, on_device: np.ndarray, codes: dict) -> tuple[np.ndarray, np.ndarray]:
    """Lane names and lane codes, made once per distinct (pid, tid, device, stream), not per event."""
    n = len(events)
    if n == 0:
        return np.zeros(0, dtype=object), np.zeros(0, dtype=np.int64)
    pid_c, pid_u = codes["pid"]
    tid_c, tid_u = codes["tid"]
    cat_c, cat_u = codes["cat"]
    parts = [on_device.astype(np.int64), pid_c, tid_c]
    for col in ("device", "stream"):
        arr = events[col].array
        codes, _ = pd.factorize(arr.to_numpy(dtype=np.int64, na_value=MISSING_ID))
        parts.append(codes.astype(np.int64))
    # one integer per row from the five small codes (mixed radix), then the distinct combinations
    key = np.zeros(n, dtype=np.int64)
    for part in parts:
        key = key * (int(part.max()) + 1) + part
    _, first, codes = np.unique(key, return_index=True, return_inverse=True)
    dev_val = events["device"].array
    str_val = events["stream"].array
    names = []
    for i in first:
        if on_device[i]:
            pid = pid_u[pid_c[i]]
            d = pid if dev_val.isna()[i] else dev_val[i]
            s = tid_u[tid_c[i]] if str_val.isna()[i] else str_val[i]
            kind = "MTIA" if cat_u[cat_c[i]] == MTIA_CATEGORY else "GPU"
            # Kineto gives a device's events the device number as pid; another pid (ranks merged
            # into one file by renumbering) keeps its lanes apart from a same-numbered device
            same = str(pid) == str(d)
            names.append(f"{kind} {d} stream {s}" + ("" if same else f" (pid {pid})"))
        else:
            names.append(f"CPU {pid_u[pid_c[i]]}/{tid_u[tid_c[i]]}")
    # Rows of one thread can differ in args (a launch call may carry a stream): code by lane name.
    name_codes, lane_names = pd.factorize(np.array(names, dtype=object))
    codes = name_codes[codes.reshape(-1)].astype(np.int64)
    return np.asarray(lane_names, dtype=object)[codes], codes


def _nest_lane_stack(ts: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Parents and depths of one thread's events by a stack walk: the reference, for events that do not nest cleanly."""
    n = len(ts)
    parent = [-1] * n
    depth = [0] * n
    stack: list[int] = []
    ts_l, end_l = ts.tolist(), end.tolist()
    tol = NESTING_TOLERANCE_US
    for i in range(n):
        start, stop = ts_l[i], end_l[i]
        while stack and end_l[stack[-1]] <= start:
            stack.pop()
        while stack and stop > end_l[stack[-1]] + tol:
            stack.pop()
        if stack:
            top = stack[-1]
            parent[i] = top
            depth[i] = depth[top] + 1
        stack.append(i)
    return np.array(parent, dtype=np.int64), np.array(depth, dtype=np.int64)


def _nest_lane_vectorised(ts: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """Parents and depths without a Python loop, for cleanly nested events in (start, longest first) order: the
    open events at i's start are its ancestors. Checked afterwards; the bool says whether the check held."""
    n = len(ts)
    idx = np.arange(n)
    positive = end > ts
    P = np.flatnonzero(positive)
    p_end_sorted = np.sort(end[P])
    opened = np.empty(n, dtype=np.int64)
    # earlier positive events: for a positive event its rank among them, for an instant the number
    # of positive events started at or before it (they all come before it in this order)
    opened[P] = np.arange(len(P))
    Z = np.flatnonzero(~positive)
    opened[Z] = np.searchsorted(ts[P], ts[Z], side="right")
    closed = np.searchsorted(p_end_sorted, ts, side="right")
    depth = opened - closed
    if (depth < 0).any():
        return np.full(n, -1, np.int64), np.zeros(n, np.int64), False
    parent = np.full(n, -1, dtype=np.int64)
    child = np.flatnonzero(depth > 0)
    if len(child):
        # latest positive event at depth d-1 before i: search the (depth, position) keys of positive events
        m = n + 1
        keys = depth[P] * m + P
        korder = np.argsort(keys, kind="stable")
        keys_sorted = keys[korder]
        q = (depth[child] - 1) * m + idx[child]
        j = np.searchsorted(keys_sorted, q, side="left") - 1
        ok = j >= 0
        cand = np.where(ok, P[korder[np.maximum(j, 0)]], -1)
        ok &= (cand >= 0) & (depth[np.maximum(cand, 0)] == depth[child] - 1)
        parent[child] = np.where(ok, cand, -1)
        p = parent[child]
        good = (
            ok
            & (p < child)
            & (end[np.maximum(p, 0)] > ts[child])
            & (end[child] <= end[np.maximum(p, 0)] + NESTING_TOLERANCE_US)
        )
        if not good.all():
            return parent, depth, False
    return parent, depth, True


def _nest(
    lane_codes: np.ndarray, ts: np.ndarray, end: np.ndarray, rows: np.ndarray, n: int, use_stack: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Parent and depth columns for the host-tree events `rows` (in global order), thread by thread."""
    parent = np.full(n, -1, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int64)
    if len(rows) == 0:
        return parent, depth
    codes = lane_codes[rows]
    order = np.argsort(codes, kind="stable")  # rows grouped by lane, still in time order inside each
    bounds = np.flatnonzero(np.diff(codes[order])) + 1
    for group in np.split(rows[order], bounds):
        g_ts, g_end = ts[group], end[group]
        if use_stack:
            p, d = _nest_lane_stack(g_ts, g_end)
        else:
            p, d, ok = _nest_lane_vectorised(g_ts, g_end)
            if not ok:
                p, d = _nest_lane_stack(g_ts, g_end)
        parent[group] = np.where(p >= 0, group[np.maximum(p, 0)], -1)
        depth[group] = d
    return parent, depth


def _inherit(parent: np.ndarray, depth: np.ndarray, rows: np.ndarray, is_self: np.ndarray) -> np.ndarray:
    """For each of `rows`: itself if `is_self`, else the nearest ancestor that is (or -1); level by level."""
    n = len(parent)
    out = np.full(n, -1, dtype=np.int64)
    if len(rows) == 0:
        return out
    d = depth[rows]
    order = np.argsort(d, kind="stable")
    bounds = np.flatnonzero(np.diff(d[order])) + 1
    for level in np.split(rows[order], bounds):  # parents sit one level up, so they are done first
        p = parent[level]
        inherited = np.where(p >= 0, out[np.maximum(p, 0)], -1)
        out[level] = np.where(is_self[level], level, inherited)
    return out


def marked_ancestor(parent: np.ndarray, mark: np.ndarray, outermost: bool = False) -> np.ndarray:
    """For each row: itself when marked, else its nearest marked ancestor (``parent`` chain), or -1 when none.
    With ``outermost``: the outermost marked row among itself and its ancestors instead."""
    parent = np.asarray(parent, dtype=np.int64)
    mark = np.asarray(mark, dtype=bool)
    if parent.shape != mark.shape:
        raise ValueError(f"parent and mark must have one entry per event: got {parent.shape} and {mark.shape}")
    out = np.where(mark, np.arange(len(parent)), -1)
    cur = parent.copy() if outermost else np.where(mark, -1, parent)
    while (cur >= 0).any():  # climb one level at a time, all rows together
        live = cur >= 0
        safe = np.maximum(cur, 0)
        hit = live & mark[safe]
        out[hit] = cur[hit]
        cur = np.where(live & (outermost | ~hit), parent[safe], -1)
    return out


def _step_numbers(codes: np.ndarray, uniques: np.ndarray) -> np.ndarray:
    """'ProfilerStep#12' -> 12 for each name (-1 for other names), computed once per distinct name."""
    nums = np.full(len(uniques), -1, dtype=np.int64)
    for k, u in enumerate(uniques):
        if isinstance(u, str) and u.startswith(STEP_PREFIX):
            try:
                nums[k] = int(u[len(STEP_PREFIX) :])
            except ValueError:
                pass
    return nums[codes] if len(codes) else np.zeros(0, dtype=np.int64)


def annotate(events: pd.DataFrame, use_stack: bool = False, codes: dict | None = None) -> None:
    """Add the derived columns; `codes` reuses the builder's (codes, values) per column; `use_stack` forces the
    reference nesting walk."""
    n = len(events)
    codes = dict(codes or {})
    for col in ("name", "cat", "pid", "tid"):
        if col not in codes:
            codes[col] = _factorize_strings(events[col].to_numpy(dtype=object))
    codes["cat"] = _canonical_categories(events, *codes["cat"])
    cat_codes, cat_uniques = codes["cat"]

    def cat_in(group: frozenset) -> np.ndarray:
        hit = np.array([c in group for c in cat_uniques], dtype=bool)
        return hit[cat_codes] if n else np.zeros(0, dtype=bool)

    on_device = cat_in(DEVICE_CATEGORIES)
    events["on_device"] = on_device
    lane, lane_codes = _lanes(events, on_device, codes)
    events["lane"] = lane

    ts = events["ts"].to_numpy()
    end = ts + np.maximum(events["dur"].to_numpy(), 0.0)
    in_tree = (~on_device) & cat_in(HOST_TREE_CATEGORIES)
    parent, depth = _nest(lane_codes, ts, end, np.flatnonzero(in_tree), n, use_stack=use_stack)
    events["parent"] = parent
    events["depth"] = depth

    is_op = cat_in(frozenset({"cpu_op"}))
    step_no = _step_numbers(*codes["name"])
    is_step = (~on_device) & (step_no >= 0)
    is_ann = cat_in(frozenset({"user_annotation"})) & ~is_step
    tree_rows = np.flatnonzero(in_tree)
    # The innermost cpu_op / user annotation at or above each host event (itself if it is one).
    enclosing_op = _inherit(parent, depth, tree_rows, is_op)
    enclosing_ann = _inherit(parent, depth, tree_rows, is_ann)

    launch = np.full(n, -1, dtype=np.int64)
    launched_by = np.full(n, -1, dtype=np.int64)
    annotation = enclosing_ann.copy()
    dev_rows = np.flatnonzero(on_device)
    if len(dev_rows):
        corr = events["correlation"].array
        corr_ok = ~np.asarray(corr.isna())
        corr_val = corr.to_numpy(dtype=np.int64, na_value=-1)
        launch_rows = np.flatnonzero(cat_in(LAUNCH_CATEGORIES) & corr_ok & ~on_device)
        pid_c = codes["pid"][0]
        name_c, name_u = codes["name"]
        # by correlation id, process by process (see helpers.trace.correlation)
        match = match_launches(corr_val, corr_ok, pid_c, ts, _Names(name_c, name_u), launch_rows, dev_rows)
        launch[dev_rows] = match.launch
        if match.ambiguous:  # (attrs travel with every copy of the frame: set only when there is news)
            events.attrs["duplicate_correlation"] = (match.ambiguous, match.example)

        # launched_by: the cpu_op around the launch call (correlation is exact and never reused in
        # a trace). Without a launch call, fall back on the External id, used only when it names
        # exactly one cpu_op: ids repeat across profiling cycles and would link to the wrong one.
        lr = launch[dev_rows]
        via_launch = np.where(lr >= 0, enclosing_op[np.maximum(lr, 0)], -1)
        ext = events["external_id"].array
        ext_val = ext.to_numpy(dtype=np.int64, na_value=-1)
        ext_ok = ~np.asarray(ext.isna())
        op_rows = np.flatnonzero(is_op & ext_ok)
        op_ids = pd.Index(ext_val[op_rows])
        unique_ids = ~op_ids.duplicated(keep=False)
        op_ids, op_rows = op_ids[unique_ids], op_rows[unique_ids]
        pos = op_ids.get_indexer(ext_val[dev_rows])
        via_ext = np.full(len(dev_rows), -1, dtype=np.int64)
        hit = (pos >= 0) & ext_ok[dev_rows]
        if match.owner and len(op_rows):  # an External id links only within the process that drives the device
            owner = owner_of(match.owner, pid_c[dev_rows])
            op_pid = pid_c[op_rows[np.maximum(pos, 0)]]
            hit &= (owner < 0) | (op_pid == owner)
        via_ext[hit] = op_rows[pos[hit]]
        launched_by[dev_rows] = np.where(via_launch >= 0, via_launch, via_ext)
        # kernels a graph launch replayed: the op around their launch in a profiled capture
        calls = cat_in(LAUNCH_CATEGORIES) & ~on_device
        tie_graph_replays(events, codes["name"], calls, lane_codes, launch, launched_by, enclosing_op)
        anchor = np.where(lr >= 0, lr, launched_by[dev_rows])
        annotation[dev_rows] = np.where(anchor >= 0, enclosing_ann[np.maximum(anchor, 0)], -1)
    events["launch"] = launch
    events["launched_by"] = launched_by
    events["annotation"] = annotation

    # Profiler steps: host events take the "ProfilerStep#N" that encloses their start on the same
    # thread, device events the step of the call that launched them.
    step = np.full(n, -1, dtype=np.int64)
    step_rows = np.flatnonzero(is_step)
    host_rows = np.flatnonzero(~on_device)
    for code in np.unique(lane_codes[step_rows]):
        srows = step_rows[lane_codes[step_rows] == code]
        srows = srows[np.argsort(ts[srows], kind="stable")]
        members = host_rows[lane_codes[host_rows] == code]
        j = np.searchsorted(ts[srows], ts[members], side="right") - 1
        inside = (j >= 0) & (ts[members] < end[srows[np.maximum(j, 0)]])
        step[members[inside]] = step_no[srows[j[inside]]]
    if len(dev_rows):
        anchor = np.where(launch[dev_rows] >= 0, launch[dev_rows], launched_by[dev_rows])
        step[dev_rows] = np.where(anchor >= 0, step[np.maximum(anchor, 0)], -1)
    events["step"] = step


class _Names:
    """Event names looked up by row from the shared codes, without building the whole column."""

    def __init__(self, codes: np.ndarray, uniques: np.ndarray) -> None:
        self.codes, self.uniques = codes, uniques

    def __getitem__(self, rows: np.ndarray) -> np.ndarray:
        return np.asarray(self.uniques, dtype=object)[self.codes[rows]]


def _canonical_categories(events: pd.DataFrame, cat_codes: np.ndarray, cat_uniques: np.ndarray) -> tuple:
    """Rename torch 1.8-1.9 categories (``Kernel`` ...) to today's in place; the renaming goes to
    ``events.attrs["category_aliases"]`` for the trace's notes. Returns the (codes, uniques) to use."""
    canon = np.array([canonical_category(str(c)) for c in cat_uniques], dtype=object)
    renamed = {str(a): str(b) for a, b in zip(cat_uniques, canon) if str(a) != str(b)}
    if not renamed or len(events) == 0:
        return cat_codes, cat_uniques
    uniques, remap = np.unique(canon.astype(str), return_inverse=True)
    new_codes = remap.reshape(-1)[cat_codes]
    used = np.bincount(cat_codes, minlength=len(cat_uniques))
    events["cat"] = np.asarray(uniques, dtype=object)[new_codes]
    events.attrs["category_aliases"] = {
        str(a): (str(b), int(used[k]))
        for k, (a, b) in enumerate(zip(cat_uniques, canon))
        if str(a) != str(b) and used[k]
    }
    return new_codes, np.asarray(uniques, dtype=object)


def link_notes(events: pd.DataFrame) -> list[str]:
    """What :func:`annotate` could not link, or linked by a rule worth knowing, in words."""
    out: list[str] = []
    aliases = events.attrs.get("category_aliases") or {}
    if aliases:
        listed = ", ".join(f"{old} -> {new} ({n:,})" for old, (new, n) in sorted(aliases.items()))
        out.append(f"categories of the torch 1.8-1.9 trace format read under today's names: {listed}")
    if not len(events) or "launched_by" not in events:
        return out
    kernels = device_work_mask(events)
    total = int(kernels.sum())
    launched_by = events["launched_by"].to_numpy()
    launch = events["launch"].to_numpy()
    with_call = np.flatnonzero(kernels & (launched_by < 0) & (launch >= 0))
    if len(with_call):
        calls = pd.Series(events["name"].to_numpy(dtype=object)[launch[with_call]]).value_counts()
        listed = ", ".join(f"{name} x{n:,}" for name, n in calls.head(4).items())
        out.append(
            f"{len(with_call):,} of {total:,} device events have a launch call ({listed}) but no cpu_op around "
            "it (a CUDA/HIP graph replay, a launch from an extension, or a thread without a recorded op): their "
            "launched_by is empty and launch_call names the call"
        )
    without = int((kernels & (launched_by < 0) & (launch < 0)).sum())
    if without:
        out.append(
            f"{without:,} of {total:,} device events have no launch call with their 'correlation' id (launched "
            "before the profiling window opened, or the runtime activity was not recorded) and no unique "
            "'External id': their launched_by and launch_call are empty"
        )
    out.extend(replay_notes(events))
    ambiguous, example = events.attrs.get("duplicate_correlation", (0, ""))
    if ambiguous:
        out.append(
            f"{ambiguous:,} device events carry a correlation id that several launch calls of one process share "
            f"(e.g. {example}): each was matched to the latest of those calls that started before it"
        )
    return out
