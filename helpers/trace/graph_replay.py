"""Kernels replayed from a CUDA/HIP graph, tied to the operators that captured them: the k-th kernel of a
replay is the k-th launch of the latest capture that ended before it with as many launches."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .categories import GRAPH_LAUNCH_PATTERN

_BEGIN = re.compile(r"StreamBeginCapture")
_END = re.compile(r"StreamEndCapture")
# calls made during capture that become graph nodes: kernel launches, copies, memsets
_NODE_CALL = re.compile(r"Launch|Memcpy|Memset")
_GRAPH_LAUNCH = re.compile(GRAPH_LAUNCH_PATTERN)


def _by_name(codes: tuple[np.ndarray, np.ndarray], pattern: re.Pattern) -> np.ndarray:
    """Rows whose name matches `pattern`, tested once per distinct name."""
    name_codes, uniques = codes
    hit = np.array([bool(pattern.search(str(u))) for u in uniques], dtype=bool)
    return hit[name_codes] if len(name_codes) else np.zeros(0, dtype=bool)


def tie_graph_replays(
    events: pd.DataFrame,
    name_codes: tuple[np.ndarray, np.ndarray],
    is_call: np.ndarray,
    lane_codes: np.ndarray,
    launch: np.ndarray,
    launched_by: np.ndarray,
    enclosing_op: np.ndarray,
) -> None:
    """Set `launched_by` of replayed device rows to the op around their captured launch, in place."""
    graph_calls = np.flatnonzero(is_call & _by_name(name_codes, _GRAPH_LAUNCH))
    if not len(graph_calls):
        return
    dev = np.flatnonzero(launch >= 0)
    replayed = dev[np.isin(launch[dev], graph_calls)]
    if not len(replayed):
        return
    ts = events["ts"].to_numpy()
    captures = _captures(name_codes, is_call, lane_codes, ts, launch, graph_calls)
    # a replay's kernels in start order (rows are already sorted by start time)
    replay_rows = pd.Series(replayed).groupby(launch[replayed], sort=True).agg(list)
    tied = 0
    for call, rows in replay_rows.items():
        fits = [c for end, c in captures if end <= ts[call] and len(c) == len(rows)]
        if fits:
            ops = enclosing_op[fits[-1]]
            rows = np.asarray(rows)
            launched_by[rows] = np.where(ops >= 0, ops, launched_by[rows])
            tied += int((ops >= 0).sum())
    events.attrs["graph_replays"] = (len(replayed), tied, len(captures), len(replay_rows))


def _captures(
    name_codes: tuple[np.ndarray, np.ndarray],
    is_call: np.ndarray,
    lane_codes: np.ndarray,
    ts: np.ndarray,
    launch: np.ndarray,
    graph_calls: np.ndarray,
) -> list[tuple[float, np.ndarray]]:
    """(end time, captured call rows in order) of each profiled capture, by end time."""
    begins = np.flatnonzero(is_call & _by_name(name_codes, _BEGIN))
    ends = np.flatnonzero(is_call & _by_name(name_codes, _END))
    if not len(begins) or not len(ends):
        return []
    ran = np.zeros(len(ts), dtype=bool)
    ran[launch[launch >= 0]] = True  # calls whose own work ran: not captured
    node_calls = np.flatnonzero(is_call & _by_name(name_codes, _NODE_CALL) & ~ran)
    node_calls = node_calls[~np.isin(node_calls, graph_calls)]
    out = []
    for b in begins:
        same = ends[(lane_codes[ends] == lane_codes[b]) & (ts[ends] >= ts[b])]
        if not len(same):
            continue
        e = same[0]
        inside = node_calls[
            (lane_codes[node_calls] == lane_codes[b]) & (ts[node_calls] >= ts[b]) & (ts[node_calls] <= ts[e])
        ]
        out.append((float(ts[e]), inside))
    return sorted(out, key=lambda c: c[0])


def replay_notes(events: pd.DataFrame) -> list[str]:
    """What :func:`tie_graph_replays` did, in words (nothing when the trace replays no graph)."""
    replayed, tied, captures, launches = events.attrs.get("graph_replays", (0, 0, 0, 0))
    if not replayed:
        return []
    if not captures:
        return [
            f"{replayed:,} device events were replayed from CUDA/HIP graphs ({launches:,} graph launches) and the "
            "capture was not profiled: they are tied to the graph launch (launch_call) only, not to the operators "
            "that captured them. Profile the capture too (torch.cuda.graph, or the first calls of a model compiled "
            "with mode='reduce-overhead') in the same run to tie each replayed kernel to its operator"
        ]
    note = (
        f"{tied:,} of {replayed:,} device events replayed from CUDA/HIP graphs are tied to the operator that "
        f"captured them (the k-th kernel of a replay to the k-th launch of a profiled capture; {captures:,} "
        "captures in the trace)"
    )
    if tied < replayed:
        note += (
            "; the others keep only their graph launch (no profiled capture before it made as many launches as "
            "it ran kernels, or the launch had no operator around it)"
        )
    return [note]
