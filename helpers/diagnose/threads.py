"""Pieces the critical path is built from: its time window, a CPU thread's time as consecutive
pieces (innermost event or gap), and the args of cross-stream waits that the events table drops."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from helpers.trace.model import Trace


@dataclass
class Window:
    """The span a critical path covers (trace time, us) and the step it belongs to (None: any)."""

    start: float
    end: float
    step: int | None


def flatten(starts: np.ndarray, ends: np.ndarray, rows: np.ndarray, w: Window) -> list[tuple[float, float, int]]:
    """A thread's time as consecutive pieces (start, end, innermost event row; -1 for a gap), covering the window."""
    out: list[tuple[float, float, int]] = []
    order = np.lexsort((-(ends - starts), starts))
    stack: list[tuple[float, int]] = []
    t = w.start

    def emit(a: float, b: float, row: int) -> None:
        if b > a:
            out.append((a, b, row))

    for i in order:
        s, e, r = max(float(starts[i]), w.start), min(float(ends[i]), w.end), int(rows[i])
        while stack and stack[-1][0] <= s:
            top_end, top = stack.pop()
            emit(t, top_end, top)
            t = max(t, top_end)
        emit(t, s, stack[-1][1] if stack else -1)
        t = max(t, s)
        if stack:
            e = min(e, stack[-1][0])  # an event that outlives its parent is cut to it
        if e > s:
            stack.append((e, r))
    while stack:
        top_end, top = stack.pop()
        emit(t, top_end, top)
        t = max(t, top_end)
    emit(t, w.end, -1)
    return out


def wait_args(trace: Trace) -> dict[int, tuple[int, int]]:
    """correlation of a ``Stream Wait Event`` record -> (stream waited on, correlation of its
    cudaEventRecord), from the document when the trace keeps it (the events table drops these args)."""
    doc = getattr(trace, "_document", None)
    out: dict[int, tuple[int, int]] = {}
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    for e in events if isinstance(events, list) else []:
        if isinstance(e, dict) and e.get("cat") == "cuda_sync" and e.get("name") == "Stream Wait Event":
            a = e.get("args") if isinstance(e.get("args"), dict) else {}
            try:
                out[int(a["correlation"])] = (
                    int(a.get("wait_on_stream", -1)),
                    int(a.get("wait_on_cuda_event_record_corr_id", -1)),
                )
            except (KeyError, TypeError, ValueError):
                continue
    return out
