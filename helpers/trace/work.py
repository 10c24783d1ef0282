"""Units of work and the kernel breakdown built on them: device kernels, memsets and memcpys; on a CPU-only trace
generated C++ kernels and the ATen ops that compute, so wrappers count as what they call, as on a GPU."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .aten_ops import aten_family, computes
from .categories import CPU_GENERATED_KERNEL, device_work_mask
from .correlation import graph_launched
from .kernel_names import decode_kernels
from .model import Trace, check_trace


def _families(names: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Family and source of each name: decoded from kernel names, ATen families for host ops."""
    unique = pd.unique(names.to_numpy(dtype=object))
    decoded = decode_kernels(list(unique)).set_index("name") if len(unique) else None
    fam, src = {}, {}
    for n in unique:
        f, s = "unknown", "unknown"
        if decoded is not None and n in decoded.index:
            f, s = decoded.at[n, "family"], decoded.at[n, "source"]
        if f == "unknown" and aten_family(n) != "unknown":
            f, s = aten_family(n), "aten (host op)"
        fam[n], src[n] = f, s
    return names.map(fam), names.map(src)


def _host_work_rows(ev: pd.DataFrame) -> np.ndarray:
    """Rows of the host ops that did the work on a CPU-only trace (see the module docstring)."""
    host = ~ev["on_device"].to_numpy()
    cat = ev["cat"].to_numpy(dtype=object)
    names = ev["name"].to_numpy(dtype=object)
    parent = ev["parent"].to_numpy()
    depth = ev["depth"].to_numpy()
    n = len(ev)
    generated = host & ev["name"].str.contains(CPU_GENERATED_KERNEL).to_numpy()
    is_op = host & (cat == "cpu_op")
    uniq, codes = np.unique(names, return_inverse=True)
    known_u = np.array([aten_family(u) != "unknown" for u in uniq], dtype=bool)
    compute_u = np.array([computes(u) for u in uniq], dtype=bool)
    known = (is_op & known_u[codes]) | generated
    compute = (is_op & compute_u[codes]) | generated
    # walk the tree level by level: does an ancestor already count as work? does a descendant compute?
    order = np.argsort(depth, kind="stable")
    levels = np.split(order, np.flatnonzero(np.diff(depth[order])) + 1) if n else []
    known_above = np.zeros(n, dtype=bool)
    for level in levels:
        p = parent[level]
        has = p >= 0
        known_above[level[has]] = known_above[p[has]] | known[p[has]]
    compute_below = np.zeros(n, dtype=bool)
    for level in reversed(levels):
        p = parent[level]
        has = p >= 0
        np.logical_or.at(compute_below, p[has], compute[level[has]] | compute_below[level[has]])
    unit = (known & ~known_above) | (compute & ~known & ~known_above & ~compute_below)
    return np.flatnonzero(unit)


def work_items(trace: Trace) -> pd.DataFrame:
    """One row per unit of work in start order, with its family, launching op, annotation and launch call
    (a graph launch runs many kernels from one call: count calls by ``launch_row``)."""
    check_trace(trace)
    ev = trace.events
    names = ev["name"].to_numpy(dtype=object)
    device_rows = np.flatnonzero(device_work_mask(ev))
    dur = ev["dur"].to_numpy()
    if len(device_rows):
        rows, unit = device_rows, "device kernel"
        lb = ev["launched_by"].to_numpy()[rows]
        launch = ev["launch"].to_numpy()[rows]
        op = np.where(lb >= 0, names[np.maximum(lb, 0)], "")
        launch_call = np.where(launch >= 0, names[np.maximum(launch, 0)], "")
        launch_us = np.where(launch >= 0, dur[np.maximum(launch, 0)], 0.0)
        graph = graph_launched(ev, rows)
    else:
        rows, unit = _host_work_rows(ev), "host op"
        op = names[rows]
        launch_call = np.full(len(rows), "", dtype=object)
        launch_us = np.zeros(len(rows))
        launch = np.full(len(rows), -1, dtype=np.int64)
        graph = np.zeros(len(rows), dtype=bool)
    ann = ev["annotation"].to_numpy()[rows]
    table = pd.DataFrame(
        {
            "name": names[rows],
            "unit": unit,
            "step": ev["step"].to_numpy()[rows],
            "start_us": ev["ts"].to_numpy()[rows] - float(ev["ts"].min()) if len(ev) else np.zeros(0),
            "duration_us": dur[rows],
            "op": op,
            "annotation": np.where(ann >= 0, names[np.maximum(ann, 0)], ""),
            "launch_call": launch_call,
            "launch_us": launch_us,
            "lane": ev["lane"].to_numpy(dtype=object)[rows],
            "launch_row": launch,
            "graph": graph,
        }
    )
    table["family"], table["source"] = _families(table["name"]) if len(table) else (table["name"], table["name"])
    cols = [
        "name", "family", "source", "unit", "step", "start_us", "duration_us", "op", "annotation", "launch_call",
        "launch_us", "lane", "launch_row", "graph"
    ]  # fmt: skip
    if "rank" in ev.columns:  # a run of several ranks (helpers.load_traces)
        table.insert(0, "rank", ev["rank"].to_numpy()[rows])
        cols = ["rank", *cols]
    return table[cols].sort_values("start_us", kind="stable").reset_index(drop=True)


def kernel_breakdown(trace: Trace) -> pd.DataFrame:
    """Device time by kernel family and library (HTA's kernel breakdown), per rank on a run of several,
    with the name that took most time; all device work, not only inside steps (empty on a CPU-only trace)."""
    check_trace(trace)
    items = work_items(trace)
    items = items[items["unit"] == "device kernel"]  # a CPU-only trace has no device time: an empty table
    keys = ["rank", "family", "source"] if "rank" in items.columns else ["family", "source"]
    if items.empty:
        return pd.DataFrame(columns=[*keys, "kernels", "device_us", "pct", "mean_us", "example"])
    top = items.groupby([*keys, "name"], sort=False)["duration_us"].sum().reset_index()
    example = top.sort_values("duration_us", ascending=False, kind="stable").drop_duplicates(keys)
    out = items.groupby(keys, sort=False).agg(kernels=("name", "size"), device_us=("duration_us", "sum")).reset_index()
    if keys[0] == "rank":
        total = out.groupby("rank")["device_us"].transform("sum")
    else:
        total = out["device_us"].sum()
    out["pct"] = 100.0 * out["device_us"] / total
    out["mean_us"] = out["device_us"] / out["kernels"]
    out = out.merge(example[[*keys, "name"]].rename(columns={"name": "example"}), on=keys, how="left")
    order = ["rank", "device_us"] if keys[0] == "rank" else ["device_us"]
    asc = [True, False] if keys[0] == "rank" else [False]
    return out.sort_values(order, ascending=asc, kind="stable").reset_index(drop=True)
