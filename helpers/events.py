"""Turn a Chrome/Kineto trace document into tables: one row per event, plus the links between them.

Everything here reads fields defensively: torch versions differ in which fields they write
(torch 2.11 on the GPU machine, 2.13 here), ``pid``/``tid`` can be strings, ``dur`` can be
missing, and CPU-only traces may still declare ``GPU 0..15`` processes in their metadata.

Vocabulary used in the columns:

* ``lane``: where an event is drawn: ``"CPU <pid>/<tid>"`` for a host thread, ``"GPU <dev> stream <s>"``.
* ``parent``: row index of the innermost host event that encloses this one on the same thread (-1 if none).
* ``launch``: for a device event, the row index of the runtime/driver call that launched it.
* ``launched_by``: for a device event, the row index of the innermost ``cpu_op`` around that launch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

# Categories of events that run on the device (drawn on GPU stream lanes).
DEVICE_CATEGORIES = frozenset({"kernel", "gpu_memset", "gpu_memcpy", "gpu_user_annotation"})
# Host-side categories that take part in the dispatch tree.
HOST_TREE_CATEGORIES = frozenset({"cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "overhead",
                                  "cpu_instant_event", "xpu_runtime", "privateuse1_runtime"})
LAUNCH_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "xpu_runtime", "privateuse1_runtime"})
# Host events that are not part of a program's work (the profiler's own spans).
IGNORED_CATEGORIES = frozenset({"Trace", "trace"})

EVENT_COLUMNS = [
    "name", "cat", "ts", "dur", "pid", "tid", "external_id", "correlation",
    "input_dims", "input_types", "stream", "device", "grid", "block",
]


@dataclass
class TraceTables:
    """The tables of one trace. ``events`` holds complete ("X") events only, sorted by start time."""

    events: pd.DataFrame
    process_names: dict[str, str] = field(default_factory=dict)
    thread_names: dict[tuple[str, str], str] = field(default_factory=dict)
    flow_count: int = 0
    unmatched_flows: int = 0
    device_properties: list[dict[str, Any]] = field(default_factory=list)
    dropped_without_dur: int = 0


def _shape_text(value: Any) -> str:
    if value is None or value == "":
        return ""
    return str(value)


def events_from_document(doc: dict[str, Any]) -> TraceTables:
    """Build :class:`TraceTables` from a parsed trace document (see :mod:`helpers.tracefile`)."""
    raw = doc.get("traceEvents")
    if not isinstance(raw, list):
        raise ValueError("trace document has no 'traceEvents' list")

    cols: dict[str, list] = {c: [] for c in EVENT_COLUMNS}
    process_names: dict[str, str] = {}
    thread_names: dict[tuple[str, str], str] = {}
    flow_starts: dict[Any, int] = {}
    flow_ends: dict[Any, int] = {}
    dropped = 0
    # Local names for speed: this loop runs once per event (a million on big traces).
    append = {c: cols[c].append for c in EVENT_COLUMNS}
    for e in raw:
        if not isinstance(e, dict):
            continue
        ph = e.get("ph")
        if ph == "X":
            dur = e.get("dur")
            if dur is None:
                # A complete event without a duration cannot be placed on a timeline.
                dropped += 1
                continue
            cat = e.get("cat") or ""
            if cat in IGNORED_CATEGORIES:
                continue
            args = e.get("args") or {}
            append["name"](str(e.get("name", "")))
            append["cat"](cat)
            append["ts"](float(e.get("ts", 0.0)))
            append["dur"](float(dur))
            append["pid"](str(e.get("pid", "")))
            append["tid"](str(e.get("tid", "")))
            append["external_id"](args.get("External id"))
            append["correlation"](args.get("correlation"))
            append["input_dims"](_shape_text(args.get("Input Dims")))
            append["input_types"](_shape_text(args.get("Input type")))
            append["stream"](args.get("stream"))
            append["device"](args.get("device"))
            append["grid"](_shape_text(args.get("grid")))
            append["block"](_shape_text(args.get("block")))
        elif ph == "M":
            args = e.get("args") or {}
            if e.get("name") == "process_name":
                process_names[str(e.get("pid", ""))] = str(args.get("name", ""))
            elif e.get("name") == "thread_name":
                thread_names[(str(e.get("pid", "")), str(e.get("tid", "")))] = str(args.get("name", ""))
        elif ph in ("s", "f"):
            key = (e.get("cat"), e.get("id"))
            target = flow_starts if ph == "s" else flow_ends
            target[key] = target.get(key, 0) + 1

    events = pd.DataFrame(cols)
    for col in ("external_id", "correlation", "stream", "device"):
        events[col] = pd.to_numeric(events[col], errors="coerce").astype("Int64")
    events = events.sort_values(["ts", "dur"], ascending=[True, False], kind="stable").reset_index(drop=True)
    flows = set(flow_starts) | set(flow_ends)
    unmatched = sum(1 for k in flows if (k in flow_starts) != (k in flow_ends))
    _annotate(events)
    return TraceTables(
        events=events,
        process_names=process_names,
        thread_names=thread_names,
        flow_count=len(flows),
        unmatched_flows=unmatched,
        device_properties=list(doc.get("deviceProperties") or []),
        dropped_without_dur=dropped,
    )


def _annotate(events: pd.DataFrame) -> None:
    """Add the derived columns: on_device, lane, parent, depth, launch, launched_by, step."""
    n = len(events)
    on_device = events["cat"].isin(DEVICE_CATEGORIES).to_numpy()
    events["on_device"] = on_device
    stream = events["stream"].astype("string").fillna(events["tid"])
    device = events["device"].astype("string").fillna(events["pid"])
    events["lane"] = np.where(on_device, "GPU " + device + " stream " + stream, "CPU " + events["pid"] + "/" + events["tid"])

    parent = np.full(n, -1, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int64)
    in_tree = (~on_device) & events["cat"].isin(HOST_TREE_CATEGORIES).to_numpy()
    ts = events["ts"].to_numpy()
    end = ts + events["dur"].to_numpy()
    # Events are sorted by (start, longest first), so on each thread a stack of open events gives
    # the innermost enclosing event of every event in one pass.
    for _, idx in events.index[in_tree].to_series().groupby(events["lane"][in_tree], sort=False):
        stack: list[int] = []
        for i in idx.to_numpy():
            start = ts[i]
            while stack and end[stack[-1]] <= start:
                stack.pop()
            # Tolerate clock rounding: a child may overhang its parent by a fraction of a microsecond.
            while stack and end[i] > end[stack[-1]] + 0.5:
                stack.pop()
            if stack:
                parent[i] = stack[-1]
                depth[i] = depth[stack[-1]] + 1
            stack.append(i)
    events["parent"] = parent
    events["depth"] = depth

    cat = events["cat"].to_numpy()
    is_op = (cat == "cpu_op")
    # The innermost cpu_op at or above each host event (itself if it is one).
    enclosing_op = np.full(n, -1, dtype=np.int64)
    for i in range(n):  # parents come before children in this order, so one pass suffices
        if not in_tree[i]:
            continue
        if is_op[i]:
            enclosing_op[i] = i
        elif parent[i] >= 0:
            enclosing_op[i] = enclosing_op[parent[i]]

    launch = np.full(n, -1, dtype=np.int64)
    launched_by = np.full(n, -1, dtype=np.int64)
    if on_device.any():
        corr = events["correlation"]
        is_launch = pd.Series(cat).isin(LAUNCH_CATEGORIES).to_numpy() & corr.notna().to_numpy()
        launch_by_corr = pd.Series(np.flatnonzero(is_launch), index=corr[is_launch].astype("int64").to_numpy())
        launch_by_corr = launch_by_corr[~launch_by_corr.index.duplicated(keep="first")]
        dev_rows = np.flatnonzero(on_device & corr.notna().to_numpy())
        found = launch_by_corr.reindex(corr.iloc[dev_rows].astype("int64").to_numpy())
        ok = found.notna().to_numpy()
        launch[dev_rows[ok]] = found.to_numpy()[ok].astype(np.int64)

        # launched_by: prefer the External id (the profiler's own link from kernel to op). Ids can
        # repeat across profiling cycles, so an id is used only when it names exactly one cpu_op,
        # or when the launch call pins down which one; otherwise the correlation/time link decides.
        ext = events["external_id"]
        op_rows = np.flatnonzero(is_op & ext.notna().to_numpy())
        ops_by_ext = pd.Series(op_rows, index=ext.iloc[op_rows].astype("int64").to_numpy())
        counts = ops_by_ext.index.value_counts()
        unique_ext = ops_by_ext[ops_by_ext.index.map(counts) == 1]
        for i in np.flatnonzero(on_device):
            via_launch = enclosing_op[launch[i]] if launch[i] >= 0 else -1
            e_id = ext.iat[i]
            if e_id is not pd.NA and not pd.isna(e_id) and int(e_id) in unique_ext.index:
                launched_by[i] = int(unique_ext.at[int(e_id)])
            elif via_launch >= 0:
                launched_by[i] = via_launch
    events["launch"] = launch
    events["launched_by"] = launched_by

    # Profiler steps: "ProfilerStep#N" annotations; host events take the step that encloses them,
    # device events the step of the call that launched them.
    step = np.full(n, -1, dtype=np.int64)
    names = events["name"].to_numpy()
    step_rows = [i for i in np.flatnonzero(~on_device) if str(names[i]).startswith("ProfilerStep#")]
    for i in step_rows:
        try:
            k = int(str(names[i]).split("#", 1)[1])
        except ValueError:
            continue
        lo, hi = ts[i], end[i]
        same_thread = (events["lane"].to_numpy() == events["lane"].iat[i])
        mask = same_thread & (ts >= lo) & (ts < hi) & (~on_device)
        step[mask] = k
    anchor = np.where(launch >= 0, launch, launched_by)
    dev = np.flatnonzero(on_device & (anchor >= 0))
    step[dev] = step[anchor[dev]]
    events["step"] = step
