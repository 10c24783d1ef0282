"""The critical path of a step: the chain of CPU work, launches, kernels and waits that set its length.

Walk back from what finished last, asking "what was this waiting for?": a kernel waited for the latest of
the previous work on its stream, its launch call, or the stream it waited on (``Stream Wait Event``); a
CPU thread runs one thing at a time (an op's own time, a launch call, or a gap with no event); a
synchronising call that returned after device work finished waited for it. Each piece of time counts
once, so the path is as long as the window: HTA's critical-path questions, answered by a walk.
"""

from __future__ import annotations

import bisect

import numpy as np
import pandas as pd

from helpers.trace.categories import STEP_PREFIX, work_kinds
from helpers.trace.model import Trace, check_trace

from .threads import Window as _Window
from .threads import flatten as _flatten
from .threads import wait_args as _wait_args

# Host categories that occupy a CPU thread.
HOST_CATEGORIES = frozenset(
    {"cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "python_function", "overhead", "xpu_runtime",
     "privateuse1_runtime", "mtia_runtime"}
)  # fmt: skip
# Calls that block the CPU until device work finishes.
SYNC_CALLS = frozenset(
    {"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy", "cudaMemcpy2D",
     "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize", "hipStreamSynchronize",
     "hipDeviceSynchronize", "hipEventSynchronize", "hipMemcpy"}
)  # fmt: skip
COPY_CALLS = ("cudaMemcpy", "hipMemcpy", "cuMemcpy")  # a copy call may wait for the copy it issued
COLUMNS = ["name", "kind", "lane", "start_us", "end_us", "duration_us", "share_pct", "event", "op"]


def _window(
    trace: Trace, step: int | None, rank: int | None, annotation: str | None = None, instance: int = 0
) -> tuple[_Window, np.ndarray]:
    """The time window of `step` or of an annotation's instance (neither: the whole trace) and the
    rows of the events it looks at."""
    ev = trace.events
    rows = np.arange(len(ev))
    if "rank" in ev.columns:
        ranks = sorted(int(r) for r in pd.unique(ev["rank"]) if r >= 0)
        if rank is None and len(ranks) > 1:
            raise ValueError(f"a run of ranks {ranks} has one critical path per rank: pass rank=")
        if rank is not None and rank not in ranks:
            raise ValueError(f"rank {rank!r} is not in this run; it has ranks {ranks}")
        if ranks:
            rows = np.flatnonzero(ev["rank"].to_numpy() == (ranks[0] if rank is None else rank))
    ts, end = ev["ts"].to_numpy(), (ev["ts"] + ev["dur"].clip(lower=0)).to_numpy()
    if step is None and annotation is None:
        return _Window(float(ts[rows].min()), float(end[rows].max()), None), rows
    names = ev["name"].to_numpy(dtype=object)
    host = rows[~ev["on_device"].to_numpy()[rows]]
    if annotation is not None:
        if not isinstance(annotation, str) or not annotation:
            raise TypeError(f"annotation must be the name of a record_function range, got {annotation!r}")
        marks = host[names[host] == annotation]
        if not len(marks):  # 'ProfilerStep' names every ProfilerStep#N
            marks = host[pd.Series(names[host], dtype=object).str.startswith(annotation).to_numpy()]
        marks = marks[np.argsort(ts[marks], kind="stable")]
        if not (0 <= instance < len(marks)):
            raise ValueError(f"annotation {annotation!r} has {len(marks)} instances in {trace.info.describe()}")
        marks = marks[instance : instance + 1]
        label = None
    else:
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)):
            raise TypeError(f"step must be a profiler step number or None, got {step!r}")
        marks = host[names[host] == f"{STEP_PREFIX}{step}"]
        if not len(marks):
            raise ValueError(f"step {step} is not in {trace.info.describe()}; it has steps {trace.steps}")
        label = int(step)
    s0, s1 = float(ts[marks].min()), float(end[marks].max())
    # device work launched during the step belongs to it even when it runs past the step's end
    launch = ev["launch"].to_numpy()[rows]
    has = launch >= 0
    launched = rows[has][(ts[launch[has]] >= s0) & (ts[launch[has]] <= s1)]
    s1 = max(s1, float(end[launched].max()) if len(launched) else s1)
    inside = rows[(end[rows] > s0) & (ts[rows] < s1)]
    return _Window(s0, s1, label), inside


class _Walk:
    """State of the backward walk over one window."""

    def __init__(self, trace: Trace, w: _Window, rows: np.ndarray) -> None:
        ev = trace.events
        self.ev, self.w = ev, w
        self.ts = ev["ts"].to_numpy(dtype=float)
        self.end = self.ts + np.maximum(ev["dur"].to_numpy(dtype=float), 0.0)
        self.names = ev["name"].to_numpy(dtype=object)
        self.lanes = ev["lane"].to_numpy(dtype=object)
        self.launch = ev["launch"].to_numpy()
        self.kinds = work_kinds(ev)
        cat = ev["cat"].to_numpy(dtype=object)
        on_dev = ev["on_device"].to_numpy()
        host = rows[~on_dev[rows] & np.isin(cat[rows], list(HOST_CATEGORIES))]
        host = host[~pd.Series(self.names[host], dtype=object).str.startswith(STEP_PREFIX).to_numpy()]
        self.work = rows[self.kinds[rows] != ""]
        # threads: pieces and their starts for bisecting
        self.pieces: dict[str, list[tuple[float, float, int]]] = {}
        self.piece_starts: dict[str, list[float]] = {}
        for lane in pd.unique(self.lanes[host]):
            r = host[self.lanes[host] == lane]
            p = _flatten(self.ts[r], self.end[r], r, w)
            self.pieces[lane], self.piece_starts[lane] = p, [a for a, _, _ in p]
        # streams: work in start order, and for each the earlier work that ended last
        self.prev: dict[int, int] = {}
        self.stream_rows: dict[str, np.ndarray] = {}
        for lane in pd.unique(self.lanes[self.work]):
            r = self.work[self.lanes[self.work] == lane]
            r = r[np.argsort(self.ts[r], kind="stable")]
            self.stream_rows[lane] = r
            if len(r) > 1:
                # for each work, the earlier one on its stream that ended last (a running argmax)
                ends = self.end[r]
                pos = np.maximum.accumulate(np.where(ends >= np.maximum.accumulate(ends), np.arange(len(r)), 0))
                self.prev.update(zip(r[1:].tolist(), r[pos[:-1]].tolist()))
        self.corr = ev["correlation"].fillna(-1).to_numpy(dtype=np.int64)
        self.stream = ev["stream"].fillna(-1).to_numpy(dtype=np.int64)
        self.wait_args = _wait_args(trace)
        self.sync_stream = self._sync_streams(rows, cat, on_dev)
        self.cross = self._cross_stream(trace, rows, cat, on_dev)
        self.segments: list[tuple[float, float, str, int, str]] = []

    # ------------------------------------------------------------ dependencies
    def _sync_streams(self, rows: np.ndarray, cat: np.ndarray, on_dev: np.ndarray) -> dict[int, str | None]:
        """Sync call row -> the device lane it waits on (None: every stream), from ``cuda_sync`` records."""
        out: dict[int, str | None] = {}
        for r in rows[(cat[rows] == "cuda_sync") & on_dev[rows]]:
            call = int(self.launch[r])
            if call >= 0:
                kind = self.names[r]
                out[call] = self.lanes[r] if kind == "Stream Sync" else None
        return out

    def _cross_stream(self, trace: Trace, rows: np.ndarray, cat: np.ndarray, on_dev: np.ndarray) -> dict[int, int]:
        """Device work row -> the work on another stream it waited for (``cudaStreamWaitEvent``)."""
        out: dict[int, int] = {}
        waits = rows[(cat[rows] == "cuda_sync") & on_dev[rows] & (self.names[rows] == "Stream Wait Event")]
        for x in waits:
            lane = self.lanes[x]
            mine = self.stream_rows.get(lane)
            if mine is None:
                continue
            call = int(self.launch[x])
            if call < 0:
                continue
            # the wait holds back the work enqueued on this stream after the wait call
            has = self.launch[mine] >= 0
            issued = np.where(has, self.ts[np.where(has, self.launch[mine], 0)], self.ts[mine])
            after = mine[issued > self.ts[call]]
            if not len(after):
                continue
            after = after[np.argsort(issued[issued > self.ts[call]], kind="stable")]
            src = self._recorded_work(call, lane, self.wait_args.get(int(self.corr[x]), (None, None)))
            if src >= 0:
                out[int(after[0])] = src
        return out

    def _recorded_work(self, wait_call: int, lane: str, args: tuple) -> int:
        """The device work a cudaStreamWaitEvent waits for: the last work launched from this thread
        before the cudaEventRecord it names (in its args; else the record just before the wait), on
        the recorded stream (else on any other stream)."""
        host_lane = self.lanes[wait_call]
        stream, record_corr = args
        launched = self.work[(self.launch[self.work] >= 0)]
        launched = launched[(self.lanes[self.launch[launched]] == host_lane) & (self.lanes[launched] != lane)]
        if stream is not None and stream >= 0:
            launched = launched[self.stream[launched] == stream]
        records = np.flatnonzero((self.names == "cudaEventRecord") & (self.lanes == host_lane))
        if record_corr is not None and record_corr >= 0:
            named = records[self.corr[records] == record_corr]
            limit = float(self.ts[named[0]]) if len(named) else float(self.ts[wait_call])
        else:
            before = records[self.ts[records] <= self.ts[wait_call]]
            limit = float(self.ts[before].max()) if len(before) else float(self.ts[wait_call])
        launched = launched[self.ts[self.launch[launched]] < limit]
        if not len(launched):
            return -1
        return int(launched[np.argmax(self.ts[self.launch[launched]])])

    def _sync_target(self, call: int, t: float) -> int:
        """The device work a synchronising call waited for (ended inside the call, before `t`), or -1."""
        work = self.work
        ends = self.end[work]
        ok = (ends > self.ts[call]) & (ends <= t + 1.0)
        name = str(self.names[call])
        if name.startswith(COPY_CALLS) and "Synchronize" not in name:
            ok &= self.launch[work] == call
        else:
            has = self.launch[work] >= 0
            ok &= has & (self.ts[np.where(has, self.launch[work], 0)] < self.ts[call])
            lane = self.sync_stream.get(call)
            if lane is not None:
                ok &= self.lanes[work] == lane
        cand = work[ok]
        return int(cand[np.argmax(self.end[cand])]) if len(cand) else -1

    # ------------------------------------------------------------ the walk
    def _add(self, a: float, b: float, kind: str, row: int, lane: str) -> None:
        a = max(a, self.w.start)
        if b > a:
            self.segments.append((a, b, kind, row, lane))

    def run(self) -> None:
        w = self.w
        last_work = self.work[np.argmax(self.end[self.work])] if len(self.work) else -1
        lanes = list(self.pieces)
        if last_work >= 0 and (not lanes or self.end[last_work] >= w.end - 1e-9):
            state: tuple = ("gpu", int(last_work), min(self.end[last_work], w.end))
        elif lanes:
            # the thread whose last real event ends latest
            def last_end(lane: str) -> float:
                real = [b for _, b, r in self.pieces[lane] if r >= 0]
                return real[-1] if real else w.start

            lane = max(lanes, key=last_end)
            state = ("cpu", lane, w.end)
        else:
            return
        budget = 4 * (sum(len(p) for p in self.pieces.values()) + len(self.work)) + 100
        while budget > 0 and state[2] > w.start:
            budget -= 1
            state = self._cpu_step(*state[1:]) if state[0] == "cpu" else self._gpu_step(*state[1:])
            if state is None:
                break

    def _cpu_step(self, lane: str, t: float) -> tuple | None:
        pieces = self.pieces[lane]
        i = bisect.bisect_left(self.piece_starts[lane], t) - 1
        if i < 0:
            return None
        a, _, row = pieces[i]
        if row >= 0 and self.names[row] in SYNC_CALLS:
            target = self._sync_target(row, t)
            if target >= 0 and self.end[target] > a:
                g_end = min(self.end[target], t)
                self._add(g_end, t, "sync wait", row, lane)
                return ("gpu", target, g_end)
        self._add(a, t, "cpu" if row >= 0 else "cpu gap", row, lane)
        return ("cpu", lane, a)

    def _gpu_step(self, g: int, t: float) -> tuple | None:
        start = self.ts[g]
        lane = self.lanes[g]
        self._add(start, t, self.kinds[g], g, lane)
        cands = []  # (ready time, priority, next state)
        p = self.prev.get(g)
        if p is not None:
            ready = min(self.end[p], start)
            cands.append((ready, 2, ("gpu", p, ready)))
        src = self.cross.get(g)
        if src is not None and src >= 0:
            ready = min(self.end[src], start)
            cands.append((ready, 1, ("gpu", src, ready)))
        call = int(self.launch[g])
        if call >= 0 and self.lanes[call] in self.pieces:
            key = self.end[call] if self.end[call] <= start else self.ts[call]
            cands.append((key, 0, ("cpu", self.lanes[call], min(self.end[call], start))))
        if not cands:
            self._add(self.w.start, start, "gpu wait", -1, lane)
            return None
        ready, _, nxt = max(cands, key=lambda c: (c[0], c[1]))
        if nxt[0] == "cpu":
            self._add(nxt[2], start, "launch delay", call, lane)
        else:
            self._add(nxt[2], start, "gpu wait", g, lane)
        return nxt


def _outer_ops(ev: pd.DataFrame, rows: np.ndarray, names: np.ndarray) -> list[str]:
    """For each row: the outermost operator around a host event (profiler steps aside), or the
    operator that launched a device event; "" for -1."""
    parent = ev["parent"].to_numpy()
    is_step = pd.Series(names, dtype=object).str.startswith(STEP_PREFIX).to_numpy()
    cur = np.where(
        ev["on_device"].to_numpy()[np.maximum(rows, 0)], ev["launched_by"].to_numpy()[np.maximum(rows, 0)], rows
    )
    cur = np.where(rows < 0, -1, cur)
    while True:  # climb one level at a time, all rows together
        up = np.where(cur >= 0, parent[np.maximum(cur, 0)], -1)
        move = (up >= 0) & ~is_step[np.maximum(up, 0)]
        if not move.any():
            break
        cur = np.where(move, up, cur)
    return [str(names[c]) if c >= 0 else "" for c in cur]


def critical_path(
    trace: Trace, step: int | None = None, rank: int | None = None, annotation: str | None = None, instance: int = 0
) -> pd.DataFrame:
    """The critical path of one profiler step (None: the whole trace) or of a ``record_function`` window
    (`annotation`, `instance`), one row per piece of time, first first. Columns: ``name``, ``kind`` (cpu, cpu gap,
    launch delay, kernel, memcpy, memset, gpu wait, sync wait), ``lane``, ``start_us``, ``end_us``, ``duration_us``,
    ``share_pct``, ``event`` (row of the events table, -1 for a gap), ``op``; ``attrs["length_us"]`` is its length."""
    check_trace(trace)
    w, rows = _window(trace, step, rank, annotation, instance)
    walk = _Walk(trace, w, rows)
    walk.run()
    segs: list[tuple[float, float, str, int, str]] = []
    for seg in sorted(walk.segments):  # pieces of one event split by its zero-length children: one row
        if segs and segs[-1][2:] == seg[2:] and abs(segs[-1][1] - seg[0]) < 1e-9:
            segs[-1] = (segs[-1][0], seg[1], *seg[2:])
        else:
            segs.append(seg)
    ev = trace.events
    t0 = float(ev["ts"].min())
    table_rows = np.array([r for _, _, _, r, _ in segs], dtype=np.int64)
    names = walk.names
    op_names = _outer_ops(ev, table_rows, names)
    table = pd.DataFrame(
        {
            "name": [str(names[r]) if r >= 0 else "(no event)" for _, _, _, r, _ in segs],
            "kind": [k for _, _, k, _, _ in segs],
            "lane": [lane for _, _, _, _, lane in segs],
            "start_us": [a - t0 for a, _, _, _, _ in segs],
            "end_us": [b - t0 for _, b, _, _, _ in segs],
            "event": table_rows,
        }
    )
    table["duration_us"] = table["end_us"] - table["start_us"]
    length = float(table["duration_us"].sum())
    table["share_pct"] = 100.0 * table["duration_us"] / length if length > 0 else 0.0
    table["op"] = op_names
    table = table[COLUMNS]
    table.attrs.update(length_us=length, step=w.step, window_us=(w.start - t0, w.end - t0))
    return table


def path_summary(path: pd.DataFrame) -> pd.DataFrame:
    """Time on a critical path by kind (cpu, kernel, launch delay ...): ``kind``, ``us``, ``pct``."""
    if not isinstance(path, pd.DataFrame) or "kind" not in path.columns:
        raise TypeError("path_summary needs the table returned by critical_path(trace)")
    out = path.groupby("kind", sort=False)["duration_us"].sum().rename("us").reset_index()
    total = out["us"].sum()
    out["pct"] = 100.0 * out["us"] / total if total > 0 else 0.0
    return out.sort_values("us", ascending=False, kind="stable").reset_index(drop=True)
