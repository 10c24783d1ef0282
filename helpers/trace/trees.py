"""Operators with self and total times, and dispatch chains: linear in the events however deep the nesting
(a hostile trace can nest 100,000 levels), no recursion."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .categories import CPU_GENERATED_KERNEL, device_work_mask, work_kinds

if TYPE_CHECKING:  # the Trace methods call these; model imports this module
    from .model import Trace

# Deepest dispatch tree shown whole: real ones are tens of levels; each row holds its whole path.
MAX_CHAIN_DEPTH = 2_000


def total_device_time(
    self_dev: np.ndarray, parent: np.ndarray, depth: np.ndarray, has_parent: np.ndarray
) -> np.ndarray:
    """Device time of each event and everything under it, one pass per nesting level (linear, not events x levels)."""
    total = self_dev.copy()
    rows = np.flatnonzero(has_parent)
    if not len(rows) or not total.any():
        return total
    rows = rows[np.argsort(-depth[rows], kind="stable")]
    levels = np.split(rows, np.flatnonzero(np.diff(depth[rows])) + 1)
    for level in levels:
        level = level[total[level] != 0]
        if len(level):
            np.add.at(total, parent[level], total[level])
    return total


def op_table(trace: Trace, by_shape: bool = False, include_annotations: bool = False) -> pd.DataFrame:
    """The table of :meth:`Trace.ops` (see there)."""
    ev = trace.events
    host = ~ev["on_device"].to_numpy()
    cats = {"cpu_op", "user_annotation"} if include_annotations else {"cpu_op"}
    is_row = host & ev["cat"].isin(cats).to_numpy()
    if include_annotations:
        is_row &= ~ev["name"].str.startswith("ProfilerStep#").to_numpy()

    dur = ev["dur"].to_numpy()
    parent = ev["parent"].to_numpy()
    child_time = np.zeros(len(ev))
    has_parent = host & (parent >= 0)
    np.add.at(child_time, parent[has_parent], dur[has_parent])
    self_cpu = dur - child_time

    self_dev = np.zeros(len(ev))
    dev_rows = np.flatnonzero(device_work_mask(ev) & (ev["launched_by"].to_numpy() >= 0))
    np.add.at(self_dev, ev["launched_by"].to_numpy()[dev_rows], dur[dev_rows])
    total_dev = total_device_time(self_dev, parent, ev["depth"].to_numpy(), has_parent)

    table = pd.DataFrame(
        {
            "name": ev["name"].to_numpy()[is_row],
            "input_dims": ev["input_dims"].to_numpy()[is_row],
            "self_cpu_us": self_cpu[is_row],
            "cpu_total_us": dur[is_row],
            "self_device_us": self_dev[is_row],
            "device_total_us": total_dev[is_row],
        }
    )
    if table.empty:
        raise ValueError(
            f"{trace.info.describe()} has no operator events (category cpu_op). "
            "Was it recorded with the CPU activity switched off?"
        )
    keys = ["name", "input_dims"] if by_shape else ["name"]
    grouped = table.groupby(keys, sort=False)
    out = grouped.agg(
        calls=("self_cpu_us", "size"),
        self_cpu_us=("self_cpu_us", "sum"),
        cpu_total_us=("cpu_total_us", "sum"),
        self_device_us=("self_device_us", "sum"),
        device_total_us=("device_total_us", "sum"),
    ).reset_index()
    if by_shape:
        out = out.rename(columns={"input_dims": "input_shapes"})
    else:
        shapes = grouped["input_dims"].agg(lambda s: sorted({v for v in s if v}))
        out["input_shapes"] = ["; ".join(v) for v in shapes.to_numpy()]
    out = out.sort_values(["device_total_us", "cpu_total_us"], ascending=False, kind="stable")
    cols = ["name", "calls", "self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us", "input_shapes"]
    return out[cols].reset_index(drop=True)


def chain_table(trace: Trace, op: str, max_depth: int | None = None) -> pd.DataFrame:
    """The table of :meth:`Trace.chain` (see there)."""

    if not isinstance(op, str) or not op:
        raise TypeError(f"op must be an operator name such as 'aten::linear', got {op!r}")
    if max_depth is not None and (isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 0):
        raise ValueError(f"max_depth must be an int >= 0 (levels below the op), got {max_depth!r}")
    ev = trace.events
    host = ~ev["on_device"].to_numpy()
    cat = ev["cat"].to_numpy()
    names = ev["name"].to_numpy()
    roots = np.flatnonzero(host & (names == op) & np.isin(cat, ["cpu_op", "user_annotation"]))
    if len(roots) == 0:
        known = op_table(trace)["name"].head(15).tolist()
        raise ValueError(f"no operator named {op!r} in {trace.info.describe()}. Operators present include: {known}")
    parent = ev["parent"].to_numpy()
    children: dict[int, list[int]] = {}
    for i in np.flatnonzero(host & (parent >= 0) & (cat == "cpu_op")):
        children.setdefault(int(parent[i]), []).append(int(i))
    lb = ev["launched_by"].to_numpy()
    for i in np.flatnonzero(device_work_mask(ev) & (lb >= 0)):
        children.setdefault(int(lb[i]), []).append(int(i))
    cpu_gen = ev["name"].str.contains(CPU_GENERATED_KERNEL).to_numpy() & host
    work = work_kinds(ev)
    for i in np.flatnonzero(cpu_gen & (parent >= 0) & (cat != "cpu_op")):
        children.setdefault(int(parent[i]), []).append(int(i))
    ts = ev["ts"].to_numpy()

    # A path is a node of the merged tree: (its parent node, its name) -> node number, in the order
    # first met (depth first, children by start time), walked with a stack rather than recursion.
    node_of: dict[tuple[int, str], int] = {}
    up: list[int] = []
    name_of: list[str] = []
    depth_of: list[int] = []
    kind_of: list[str] = []
    count: list[int] = []
    limit = MAX_CHAIN_DEPTH if max_depth is None else max_depth
    stack = [(int(r), -1) for r in reversed(roots)]
    while stack:
        i, above = stack.pop()
        key = (above, op if above < 0 else str(names[i]))
        node = node_of.get(key)
        if node is None:
            node = node_of[key] = len(up)
            up.append(above)
            name_of.append(key[1])
            depth_of.append(0 if above < 0 else depth_of[above] + 1)
            kind_of.append("op" if host[i] and not cpu_gen[i] else (work[i] or "cpu-generated"))
            count.append(0)
        count[node] += 1
        kids = children.get(i)
        if not kids:
            continue
        if depth_of[node] >= limit:
            if max_depth is None:
                raise ValueError(
                    f"the dispatch tree under {op!r} in {trace.info.describe()} is more than {MAX_CHAIN_DEPTH:,} "
                    f"levels deep (real ones nest tens): each row of the table holds its whole path, so it is "
                    f"not built whole. Pass max_depth=N (e.g. chain({op!r}, max_depth=50)) to see its top N levels."
                )
            continue
        stack.extend((c, node) for c in reversed(sorted(kids, key=ts.__getitem__)))

    # Emit the merged tree depth first: a path first met in a later call (the down projection's
    # GEMM kernel, say) goes under its own parent, not after whatever sibling was visited last.
    below: dict[int, list[int]] = {}
    for node in range(1, len(up)):
        below.setdefault(up[node], []).append(node)
    order: list[int] = []
    walk = [0]
    while walk:
        node = walk.pop()
        order.append(node)
        walk.extend(reversed(below.get(node, [])))
    path: list[str] = [""] * len(up)
    for node in order:  # a parent comes before its children in this order
        path[node] = name_of[node] if up[node] < 0 else f"{path[up[node]]} -> {name_of[node]}"
    return pd.DataFrame(
        [
            {
                "depth": depth_of[n],
                "name": name_of[n],
                "path": path[n],
                "kind": kind_of[n],
                "count": count[n],
                "calls_of_root": len(roots),
                "tree": "    " * depth_of[n] + name_of[n],
            }
            for n in order
        ]
    )
