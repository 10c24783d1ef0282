"""Several ranks in one :class:`MultiRankTrace` (a Trace with a ``rank`` column) from a file per rank, a folder
or one merged file; clocks aligned by ``baseTimeNanoseconds``, two files claiming one rank refused."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from .files import MAX_TEXT_BYTES, TraceText, TraceTooLargeError, check_limit, text_size
from .model import Trace, TraceInfo, check_trace, load_trace
from .tables import TraceTables
from .timeline import RANK_SEPARATOR

INDEX_COLUMNS = ("parent", "launch", "launched_by", "annotation")
# Default limit on the JSON text of a run's files together: past it, loading takes over a gigabyte.
MAX_RUN_BYTES = MAX_TEXT_BYTES // 2
# Under this much text in all, each rank keeps its parsed JSON (as load_trace does for small files).
_KEEP_DOCUMENTS_BELOW = 50_000_000


def _stem(path: Path) -> str:
    return path.name.removesuffix(".gz").removesuffix(".json")


def check_one_file_per_name(files: Sequence[Path]) -> None:
    """ValueError naming both when two files are one trace twice (``rank1.json`` beside ``rank1.json.gz``)."""
    seen: dict[tuple[Path, str], Path] = {}
    for f in files:
        key = (f.parent, _stem(f))
        if key in seen and seen[key] != f:
            raise ValueError(
                f"{str(seen[key])!r} and {str(f)!r} are two files for one trace: which one holds the rank's events "
                "is unknown (reading both would count its work twice). Move or delete one of them."
            )
        seen[key] = f


def _looks_like_a_trace(path: Path, head: int = 1 << 20) -> bool:
    """Whether a file of a folder is a trace: a ``traceEvents`` key in its first MB of text (a run folder also
    holds a summary.json and the like, which are not ranks). Unreadable files count as traces, so loading them
    says what is wrong with them."""
    try:
        with TraceText(path, None) as text:
            return b'"traceEvents"' in text.read(head)
    except (OSError, ValueError):
        return True


def _files(paths: str | os.PathLike | Sequence[str | os.PathLike]) -> list[Path]:
    if isinstance(paths, (str, os.PathLike)):
        p = Path(paths)
        if p.is_dir():
            found = sorted(
                q
                for q in p.iterdir()
                if q.is_file() and not q.name.startswith(".") and q.name.endswith((".json", ".json.gz"))
            )
            traces = [q for q in found if _looks_like_a_trace(q)]
            if not traces:
                raise ValueError(f"{str(p)!r} holds no .json or .json.gz trace files (with a 'traceEvents' key)")
            return traces
        return [p]
    if isinstance(paths, Sequence) and not isinstance(paths, (bytes, str)):
        if not paths:
            raise ValueError("load_traces needs at least one trace file or a folder of them")
        bad = [x for x in paths if not isinstance(x, (str, os.PathLike))]
        if bad:
            raise TypeError(f"load_traces expects file paths (str or pathlib.Path), got {type(bad[0]).__name__}")
        return [Path(x) for x in paths]
    raise TypeError(f"load_traces expects a folder, a file path or a list of file paths, got {type(paths).__name__}")


def _driving_process(events: pd.DataFrame) -> np.ndarray:
    """For each event: the host pid (as text) of the process it belongs to, or that launched it."""
    pid = events["pid"].to_numpy(dtype=object).astype(str)
    on_device = events["on_device"].to_numpy()
    launch = events["launch"].to_numpy()
    out = pid.copy()
    dev = np.flatnonzero(on_device)
    if len(dev):
        linked = launch[dev] >= 0
        out[dev[linked]] = pid[launch[dev[linked]]]
        # device events without a launch call: the process that launched most of that device's work
        lane_pid = pid[dev]
        owners = pd.DataFrame({"dev": lane_pid[linked], "host": out[dev[linked]]})
        owner = owners.groupby("dev")["host"].agg(lambda s: s.value_counts().index[0]) if len(owners) else {}
        unlinked = dev[~linked]
        out[unlinked] = [owner.get(p, "") if len(owners) else "" for p in pid[unlinked]]
    return out


def event_ranks(trace: Trace, default: int = 0) -> tuple[np.ndarray, list[str]]:
    """The rank of every event of `trace` (-1 when unknown), and notes on how ranks were read."""
    check_trace(trace)
    ev = trace.events
    if "rank" in ev.columns:
        return ev["rank"].to_numpy(), []
    process = _driving_process(ev)
    on_device = ev["on_device"].to_numpy()
    launchers = sorted(set(process[on_device]) - {""})
    info_rank = trace.distributed_info.get("rank") if isinstance(trace.distributed_info, dict) else None
    if len(launchers) <= 1:
        rank = int(info_rank) if isinstance(info_rank, int) and not isinstance(info_rank, bool) else default
        return np.full(len(ev), rank, dtype=np.int64), []
    # ranks merged into one file: number the launching processes by the lowest device they drive
    dev_rows = np.flatnonzero(on_device & (process != ""))
    devices = pd.to_numeric(ev["device"].to_numpy(dtype=object)[dev_rows], errors="coerce")
    fallback = pd.to_numeric(ev["pid"].to_numpy(dtype=object)[dev_rows].astype(str), errors="coerce")
    lowest = (
        pd.DataFrame({"process": process[dev_rows], "device": np.where(np.isnan(devices), fallback, devices)})
        .groupby("process")["device"]
        .min()
    )
    order = sorted(launchers, key=lambda p: (lowest.get(p, np.inf), p))
    rank_of = {p: r for r, p in enumerate(order)}
    ranks = np.array([rank_of.get(p, -1) for p in process], dtype=np.int64)
    described = ", ".join(f"process {p} -> rank {r}" for p, r in rank_of.items())
    notes = [
        f"{len(order)} processes launch device work in this one file: read as ranks merged into one trace, "
        f"numbered by the lowest device each drives ({described})"
    ]
    others = int((ranks < 0).sum())
    if others:
        notes.append(f"{others:,} events of processes that launch no device work have no rank (rank -1)")
    return ranks, notes


def _rank_lanes(ranks: np.ndarray, lanes: np.ndarray) -> np.ndarray:
    """'rank <r> · <lane>' for every event, built once per distinct (rank, lane)."""
    lane_codes, lane_names = pd.factorize(lanes)
    pair_codes, pairs = pd.factorize(ranks.astype(np.int64) * (len(lane_names) + 1) + lane_codes)
    names = [f"rank {p // (len(lane_names) + 1)}{RANK_SEPARATOR}{lane_names[p % (len(lane_names) + 1)]}" for p in pairs]
    return np.asarray(names, dtype=object)[pair_codes] if len(lanes) else lanes


def _base_us(trace: Trace) -> float | None:
    """The file's clock origin in us, None when it has none (or a value no clock writes)."""
    base = trace.base_time_ns
    if isinstance(base, bool) or not isinstance(base, (int, float)) or not np.isfinite(base) or base <= 0:
        return None
    return float(base) / 1000.0


def _clock_offsets(traces: Sequence[Trace]) -> tuple[list[float], list[str]]:
    """How much to add to each trace's times to put all on one clock, and notes on what could not be."""
    bases = [_base_us(t) for t in traces]
    if all(b is None for b in bases) or all(b is not None for b in bases):
        origin = min((b for b in bases if b is not None), default=0.0)
        return [0.0 if b is None else b - origin for b in bases], []
    origin = min(b for b in bases if b is not None)
    aligned = [float(t.events["ts"].min()) + b - origin for t, b in zip(traces, bases) if b is not None]
    start = min(aligned)
    offsets, notes = [], []
    for t, b in zip(traces, bases):
        if b is None:
            offsets.append(start - float(t.events["ts"].min()))
            notes.append(
                f"{t.info.label}: the file has no valid 'baseTimeNanoseconds' while other ranks' files have one, "
                "so its clock cannot be put on theirs: its first event is placed at the run's first event. "
                "Compare durations and step times across ranks, not instants."
            )
        else:
            offsets.append(b - origin)
    return offsets, notes


def _declared_rank(trace: Trace) -> int | None:
    rank = trace.distributed_info.get("rank") if isinstance(trace.distributed_info, dict) else None
    return rank if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0 else None


def _missing_ranks(ranks: Sequence[int]) -> list[int]:
    return sorted(set(range(max(ranks) + 1)) - set(ranks)) if ranks else []


def _checked_ranks(traces: Sequence[Trace], expected: Sequence[int] | None) -> list[tuple[np.ndarray, list[str]]]:
    """Each trace's event ranks; ValueError when a file's rank contradicts `expected` or two claim one rank."""
    if expected is not None and len(expected) != len(traces):
        raise ValueError(f"ranks: one rank per trace expected, got {len(expected)} ranks for {len(traces)} traces")
    out, owner = [], {}
    for i, trace in enumerate(traces):
        want = None if expected is None else int(expected[i])
        declared = _declared_rank(trace)
        if want is not None and declared is not None and declared != want:
            raise ValueError(
                f"{trace.info.path or trace.info.label!r} should hold rank {want} (its name says so) but its "
                f"distributedInfo says rank {declared}: a file renamed or copied over another. Reading it as either "
                "would put one rank's work under another (a straggler that never was). Rename the file after the "
                "rank it holds, or load the files with helpers.load_traces([...]) to use distributedInfo alone."
            )
        ranks, notes = event_ranks(trace, default=i if want is None else want)
        single = np.unique(ranks[ranks >= 0])
        if len(single) == 1 and not notes:  # a file of one rank: no other file may claim it
            r = int(single[0])
            if r in owner:
                other = traces[owner[r]]
                raise ValueError(
                    f"{other.info.path or other.info.label!r} and {trace.info.path or trace.info.label!r} both hold "
                    f"rank {r}: two files for one rank (a copy, or a rank recorded twice). Reading both would count "
                    "its work twice. Keep one file per rank."
                )
            owner[r] = i
        out.append((ranks, notes))
    return out


def combine_ranks(
    traces: Sequence[Trace], label: str | None = None, ranks: Sequence[int] | None = None
) -> MultiRankTrace:
    """One :class:`MultiRankTrace` from the ranks' traces; a trace's rank is `ranks[i]`, else its
    ``distributedInfo`` rank, else its position (a contradicting ``distributedInfo`` is refused)."""
    if not traces:
        raise ValueError("combine_ranks needs at least one trace")
    for i, t in enumerate(traces):
        check_trace(t, f"trace {i}")
    per_trace = _checked_ranks(traces, ranks)
    offsets, notes = _clock_offsets(traces)
    frames, offset = [], 0
    for i, trace in enumerate(traces):
        ranks_i, rank_notes = per_trace[i]
        notes += [f"{trace.info.label}: {n}" for n in rank_notes] + [f"{trace.info.label}: {n}" for n in trace.notes]
        ev = trace.events.copy()
        ev["rank"] = ranks_i
        ev["ts"] = ev["ts"] + offsets[i]
        ev["lane"] = _rank_lanes(ranks_i, ev["lane"].to_numpy(dtype=object))
        for col in INDEX_COLUMNS:
            values = ev[col].to_numpy()
            ev[col] = np.where(values >= 0, values + offset, -1)
        offset += len(ev)
        frames.append(ev)
    events = pd.concat(frames, ignore_index=True)
    order = np.lexsort((-events["dur"].to_numpy(), events["ts"].to_numpy()))
    inverse = np.empty(len(order), dtype=np.int64)
    inverse[order] = np.arange(len(order))
    events = events.iloc[order].reset_index(drop=True)
    for col in INDEX_COLUMNS:
        values = events[col].to_numpy()
        events[col] = np.where(values >= 0, inverse[np.maximum(values, 0)], -1)
    first = traces[0].info
    present = sorted(int(r) for r in np.unique(events["rank"].to_numpy()) if r >= 0)
    missing = _missing_ranks(present)
    if missing:
        notes.append(
            f"ranks present: {', '.join(map(str, present))}; no trace for rank {', '.join(map(str, missing))} "
            "(a file missing?): every table of this run covers the ranks present only"
        )
    which = f" {', '.join(map(str, present))}" if missing else ""
    info = replace(
        first,
        label=label or f"{len(present)} ranks{which} ({first.label}{' ...' if len(traces) > 1 else ''})",
        path=None,
        extra={**first.extra, "files": [t.info.path for t in traces]},
    )
    tables = TraceTables(events=events, device_properties=traces[0]._tables.device_properties)
    return MultiRankTrace(traces, info, tables, notes)


def load_traces(
    paths: str | os.PathLike | Sequence[str | os.PathLike],
    label: str | None = None,
    max_bytes: int | None = None,
    max_events: int | None = None,
    max_arg_bytes: int | None = None,
    ranks: Sequence[int] | None = None,
    call: str = "helpers.load_traces(paths",
) -> MultiRankTrace:
    """The traces of one run's ranks as one :class:`MultiRankTrace`: `paths` is a folder, a file per rank or one
    file of several ranks; `max_bytes` counts all files together, the other limits apply per file."""
    files = _files(paths)
    check_one_file_per_name(files)
    limit = MAX_RUN_BYTES if max_bytes is None else check_limit(max_bytes)
    sizes = [text_size(f) if f.is_file() else 0 for f in files]
    if sum(sizes) > limit:
        raise TraceTooLargeError(
            f"the {len(files)} trace files together hold {sum(sizes):,} bytes of JSON text, more than "
            f"{limit:,} ({limit / 2**20:,.0f} MiB; their events would take several times that in memory)",
            "max_bytes",
            max(2 * sum(sizes), 2 * limit),
            call,
        )
    keep = None if sum(sizes) < _KEEP_DOCUMENTS_BELOW else False
    traces = []
    for f in files:
        try:
            traces.append(
                load_trace(
                    f, keep_document=keep, max_bytes=max_bytes, max_events=max_events, max_arg_bytes=max_arg_bytes
                )
            )
        except TraceTooLargeError as err:
            raise err.for_call(call) from err
    return combine_ranks(traces, label=label, ranks=ranks)


class MultiRankTrace(Trace):
    """A run of several ranks: one events table with a ``rank`` column (see the module docstring)."""

    def __init__(self, traces: Sequence[Trace], info: TraceInfo, tables: TraceTables, notes: list[str]) -> None:
        super().__init__({}, info, tables=tables, keep_document=False)
        self.rank_traces = list(traces)
        self._notes = notes

    @property
    def notes(self) -> list[str]:
        """Notes of each file (prefixed with its label) and how ranks were read."""
        return list(self._notes)

    @property
    def ranks(self) -> list[int]:
        """The ranks present (-1, events with no known rank, is left out)."""
        return sorted(int(r) for r in pd.unique(self.events["rank"]) if r >= 0)

    def __repr__(self) -> str:
        return f"<MultiRankTrace of ranks {self.ranks}: {super().__repr__()[1:-1]}>"

    def save(self, *args, **kwargs):
        """Not available on a run: save each rank's own trace (``run.rank_traces[i].save()``)."""
        raise ValueError(
            "a run of several ranks is not one trace file: save each rank's trace with run.rank_traces[i].save(...)"
        )

    def step_times(self) -> pd.DataFrame:
        """Host time of every profiler step per rank, the slowest rank of each, and the spread (what the others
        wait at the next collective)."""
        ev = self.events
        steps = ev[(~ev["on_device"]) & ev["name"].str.startswith("ProfilerStep#") & (ev["step"] >= 0)]
        if steps.empty:
            raise ValueError(f"{self.info.describe()} has no profiler steps: record with a schedule and prof.step()")
        table = steps.pivot_table(index="step", columns="rank", values="dur", aggfunc="sum")
        table.columns = [f"rank {int(r)}" for r in table.columns]
        values = table.to_numpy(dtype=float)
        cols = np.array([int(c.split()[1]) for c in table.columns])
        table["slowest_rank"] = cols[np.nanargmax(values, axis=1)]
        table["slowest_us"] = np.nanmax(values, axis=1)
        table["fastest_us"] = np.nanmin(values, axis=1)
        table["spread_us"] = table["slowest_us"] - table["fastest_us"]
        return table.reset_index()
