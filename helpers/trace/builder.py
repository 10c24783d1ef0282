"""Columns from slices of trace events: no object is kept per event (strings are shared through lookup
tables, numbers go into numpy arrays); what it leaves out or changes it counts for the notes."""

from __future__ import annotations

from operator import attrgetter
from typing import Any

import numpy as np
import pandas as pd

from . import files as tracefile
from . import json_text
from .categories import IGNORED_CATEGORIES
from .columns import (
    NO_NAME,
    Codes,
    LeftOut,
    check_count,
    example,
    float_array,
    int_array,
    name_text,
    text_keys,
    text_of_key,
)
from .links import MISSING_ID as _MISSING
from .memory_events import MEMORY_KEY, MemoryEvents, memory_decoder

try:  # msgspec decodes straight into small typed records, skipping the fields not used here
    import msgspec
except ImportError:  # pragma: no cover - depends on the environment; orjson dicts are the fallback
    msgspec = None

# The columns read from each event, in table order (the derived ones follow).
EVENT_COLUMNS = (
    "name cat ts dur pid tid external_id correlation input_dims input_types stream device grid block"
).split()
DERIVED_COLUMNS = ["on_device", "lane", "parent", "depth", "launch", "launched_by", "annotation", "step"]
# Integer args read from each event, with their column names.
_INT_ARGS = {"external_id": "External id", "correlation": "correlation", "stream": "stream", "device": "device"}
# Args shown as text (shapes, launch configuration).
_TEXT_ARGS = {"input_dims": "Input Dims", "input_types": "Input type", "grid": "grid", "block": "block"}
_FLOW_PHASES = ("s", "f", "t")
_BEGIN_END = "begin/end ('B'/'E') events (torch writes complete 'X' events; pair them first)"
_NO_PHASE = "events without a 'ph' (phase) field, so of no known kind,"
_NEGATIVE = "complete events with a negative 'dur'"
_UNNAMED = f"events had an empty name; they are listed as {NO_NAME!r}"
_EMPTY: dict = {}
_BAD_TIME = "complete events with a missing, non-numeric or non-finite 'ts' or 'dur'"
# Past 2**53 us (285 years) a float64 no longer holds every microsecond: no clock writes such times.
MAX_TIME_US = float(2**53)
_ABSURD_TIME = f"complete events with a 'ts' or 'dur' beyond {MAX_TIME_US:.3g} us (285 years: no clock writes that)"
# Default limits on what one trace may hold (the options of load_trace that raise them).
MAX_EVENTS = 5_000_000
# One event's shapes or launch configuration past this many bytes of JSON is left out (a note says
# so): the longest real ones (a cat of thousands of tensors) are tens of kilobytes.
MAX_ARG_BYTES = 1 << 20


# --------------------------------------------------------------------------- typed decoding
if msgspec is not None:

    class _Args(msgspec.Struct, gc=False):
        """The args this module reads; every other key of an event's args is skipped unparsed."""

        external_id: int = msgspec.field(default=_MISSING, name="External id")
        correlation: int = _MISSING
        stream: int = _MISSING
        device: int = _MISSING
        # shapes and launch configurations stay raw JSON text: a hashable key, parsed once per distinct value
        # (msgspec.Raw cannot sit in a union with None: an empty Raw means "absent")
        input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Dims")
        input_types: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input type")
        grid: msgspec.Raw = msgspec.Raw()
        block: msgspec.Raw = msgspec.Raw()
        name: Any = None  # process/thread names of metadata events

    class _Event(msgspec.Struct, gc=False):
        ph: str = ""
        cat: str = ""
        name: str = ""
        ts: float = float("nan")  # missing: counted and left out, never placed at 0
        dur: float | None = None
        pid: int | str = ""
        tid: int | str = ""
        id: int | str | None = None
        args: _Args | None = None

    _EMPTY_ARGS = _Args()
    _typed_decoder = msgspec.json.Decoder(list[_Event])
    _memory_decoder = memory_decoder(_Event, _Args)  # slices holding [memory] events: their args too

    def decode_slice(data: bytes) -> list:
        """Parse one slice: typed records when the fields have the usual types, else dicts; ValueError on
        invalid JSON (the stream then knows a cut was not an event boundary)."""
        try:
            return (_memory_decoder if MEMORY_KEY in data else _typed_decoder).decode(data)
        except msgspec.ValidationError:
            # valid JSON with unusual types somewhere (a string pid, a null id ...): the dict path
            # reads those defensively
            return json_text.loads(data)
else:  # pragma: no cover - depends on the environment
    _Event = None
    decode_slice = None


class _Builder:
    """Accumulates columns from slices of events (typed records or dicts); refuses more than `max_events`."""

    def __init__(
        self, source: str = "the trace", max_events: int | None = None, max_arg_bytes: int | None = None
    ) -> None:
        self.source = source
        self.max_events = check_count(max_events, MAX_EVENTS, "max_events")
        self.max_arg_bytes = check_count(max_arg_bytes, MAX_ARG_BYTES, "max_arg_bytes")
        self.count = 0
        self.names = Codes()
        self.cats = Codes()
        self.pids = Codes()
        self.tids = Codes()
        self.texts = {col: Codes() for col in _TEXT_ARGS}
        self.parts: list[dict[str, np.ndarray]] = []
        self.process_names: dict[str, str] = {}
        self.thread_names: dict[tuple[str, str], str] = {}
        # flow arrows, slice by slice: (is start, category code, id) arrays. Kept as arrays, not as
        # a set of tuples: a few hundred thousand small long-lived objects scattered among the
        # parser's short-lived ones keep its freed memory from returning to the system.
        self.flow_cats = Codes()
        self.flows: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.memory = MemoryEvents()  # the [memory] instant events (profile_memory=True)
        self.dropped_without_dur = 0
        self.skipped: dict[str, int] = {}
        self.fixed: dict[str, int] = {}
        self.examples: dict[str, str] = {}

    def _skip(self, what: str, count: int = 1, example: str | None = None) -> None:
        if count:
            self.skipped[what] = self.skipped.get(what, 0) + count
            if example is not None:
                self.examples.setdefault(what, example)

    def add(self, events: list) -> None:
        """Add a slice of events: typed records (from :func:`decode_slice`) or dicts."""
        self.count += len(events)
        if self.count > self.max_events:
            raise tracefile.TraceTooLargeError(
                f"{self.source} holds more than {self.max_events:,} events", "max_events", 4 * self.max_events
            )
        if _Event is not None and events and isinstance(events[0], _Event):
            self._add_typed(events)
            return
        try:
            complete = [e for e in events if e.get("ph") == "X"]
            rest = [e for e in events if e.get("ph") != "X"]
        except AttributeError:  # something that is not an object in the list
            dicts = [e for e in events if isinstance(e, dict)]
            self._skip("entries of traceEvents that are not JSON objects", len(events) - len(dicts))
            complete = [e for e in dicts if e.get("ph") == "X"]
            rest = [e for e in dicts if e.get("ph") != "X"]
        flows = []
        for e in rest:
            ph = e.get("ph")
            if not ph or not isinstance(ph, str):
                self._skip(_NO_PHASE, 1, example(e.get("name"), e.get("ts")))
            elif ph == "M":
                self._metadata(e)
            elif ph in _FLOW_PHASES:
                flows.append((ph, e.get("cat"), e.get("id", e.get("id2"))))
            elif ph in ("B", "E"):  # legal Chrome trace events, but torch never writes them
                self._skip(_BEGIN_END)
        self.memory.add_dicts(rest)
        self._add_flows(flows)
        if complete:
            self._complete(complete)

    def _add_typed(self, events: list) -> None:
        complete = [e for e in events if e.ph == "X"]
        if len(complete) != len(events):
            rest = [e for e in events if e.ph != "X"]
            self._add_flows([(e.ph, e.cat, e.id) for e in rest if e.ph in _FLOW_PHASES])
            for e in rest:
                if not e.ph:
                    self._skip(_NO_PHASE, 1, example(e.name, e.ts))
                elif e.ph == "M":
                    args = e.args
                    if args is not None and e.name in ("process_name", "thread_name"):
                        self._metadata({"name": e.name, "pid": e.pid, "tid": e.tid, "args": {"name": args.name}})
                elif e.ph in ("B", "E"):
                    self._skip(_BEGIN_END)
            self.memory.add_typed(rest)
        if not complete:
            return
        X, dur_list = self._drop_missing_dur(complete, [e.dur for e in complete])
        if not X:
            return
        part: dict[str, np.ndarray] = {
            "name": self.names.encode(map(attrgetter("name"), X)),
            "cat": self.cats.encode(map(attrgetter("cat"), X)),
            # fromiter over the attribute getter: no intermediate list
            "ts": np.fromiter(map(attrgetter("ts"), X), dtype=np.float64, count=len(X)),
            "dur": np.array(dur_list, dtype=np.float64),
            "pid": self.pids.encode(map(attrgetter("pid"), X)),
            "tid": self.tids.encode(map(attrgetter("tid"), X)),
        }
        empty = _EMPTY_ARGS
        args = [e.args or empty for e in X]
        for col in _INT_ARGS:
            try:
                values = np.fromiter(map(attrgetter(col), args), dtype=np.int64, count=len(args))
                part[col], part[col + "_na"] = values, values == _MISSING
            except OverflowError:  # an id beyond 64 bits: such values become missing
                part[col], part[col + "_na"] = int_array(list(map(attrgetter(col), args)))
        for col in _TEXT_ARGS:
            table = self.texts[col].table
            before = len(table)
            setdefault = table.setdefault
            # an empty Raw is an absent value: code -1, which the table turns into ""
            part[col] = np.array(
                [setdefault(bytes(r), len(table)) if r else -1 for r in map(attrgetter(col), args)], dtype=np.int64
            )
            self.texts[col].leave_out_long(before, self.max_arg_bytes)
        self.parts.append(part)

    def _add_flows(self, flows: list[tuple[str, Any, Any]]) -> None:
        if not flows:
            return
        starts = np.array([f[0] == "s" for f in flows], dtype=bool)
        cats = self.flow_cats.encode([f[1] for f in flows])
        ids = [f[2] for f in flows]
        try:
            id_arr = np.array(ids, dtype=np.int64)
        except (TypeError, ValueError, OverflowError):  # string ids ("0x1f"), objects: compare as text
            id_arr = np.array([str(v) for v in ids], dtype=object)
        self.flows.append((starts, cats, id_arr))

    def flow_counts(self) -> tuple[int, int]:
        """(flow arrows, arrows with only one end): an arrow is a (category, id) pair."""
        if not self.flows:
            return 0, 0
        table = pd.DataFrame(
            {
                "start": np.concatenate([f[0] for f in self.flows]),
                "cat": np.concatenate([f[1] for f in self.flows]),
                # one dtype for all slices: text when any slice had non-integer ids
                "id": (
                    np.concatenate([f[2] for f in self.flows])
                    if all(f[2].dtype != object for f in self.flows)
                    else np.concatenate([f[2].astype(str).astype(object) for f in self.flows])
                ),
            }
        )
        ends = table.groupby(["cat", "id"], sort=False)["start"].agg(["min", "max"])
        return len(ends), int((ends["min"] == ends["max"]).sum())

    def _metadata(self, e: dict) -> None:
        args = e.get("args")
        if not isinstance(args, dict):
            return
        if e.get("name") == "process_name":
            self.process_names[str(e.get("pid", ""))] = str(args.get("name", ""))
        elif e.get("name") == "thread_name":
            self.thread_names[(str(e.get("pid", "")), str(e.get("tid", "")))] = str(args.get("name", ""))

    def _drop_missing_dur(self, X: list, dur_list: list) -> tuple[list, list]:
        """Leave out complete events without a duration (they cannot be placed on a timeline) and count them."""
        if None not in dur_list:
            return X, dur_list
        keep = [d is not None for d in dur_list]
        self.dropped_without_dur += len(X) - sum(keep)
        first = X[keep.index(False)]
        eg = example(first.get("name"), first.get("ts")) if isinstance(first, dict) else example(first.name, first.ts)
        self.examples.setdefault("dur", eg)
        return [e for e, k in zip(X, keep) if k], [d for d in dur_list if d is not None]

    def _complete(self, X: list) -> None:
        X, dur_list = self._drop_missing_dur(X, [e.get("dur") for e in X])
        if not X:
            return
        part: dict[str, np.ndarray] = {
            "name": self.names.encode([e.get("name", "") for e in X]),
            "cat": self.cats.encode([e.get("cat") or "" for e in X]),
            "ts": float_array([e.get("ts") for e in X]),  # missing: NaN, counted and left out
            "dur": float_array(dur_list),
            "pid": self.pids.encode([e.get("pid", "") for e in X]),
            "tid": self.tids.encode([e.get("tid", "") for e in X]),
        }
        args = [e.get("args") or _EMPTY for e in X]
        if not all(type(a) is dict for a in args):
            args = [a if isinstance(a, dict) else _EMPTY for a in args]
        for col, key in _INT_ARGS.items():
            part[col], part[col + "_na"] = int_array([a.get(key, _MISSING) for a in args])
        for col, key in _TEXT_ARGS.items():
            values = [a.get(key) for a in args]
            before = len(self.texts[col].table)
            part[col] = self.texts[col].encode_present(text_keys(values))
            self.texts[col].leave_out_long(before, self.max_arg_bytes)
        self.parts.append(part)

    @staticmethod
    def _peek(parts: list[dict[str, np.ndarray]], key: str, i: int) -> Any:
        """Row `i` of column `key` across the unjoined slices."""
        for p in parts:
            if i < len(p[key]):
                return p[key][i]
            i -= len(p[key])
        raise IndexError(i)

    def _count_unnamed(self, ts: np.ndarray, cats: np.ndarray) -> None:
        """Count the events whose empty name became "(no name)" (an empty kernel name breaks tables grouped by name)."""
        codes, table = self.codes["name"]
        unnamed = np.flatnonzero(table == NO_NAME)
        if not len(unnamed):
            return
        rows = np.flatnonzero(np.isin(codes, unnamed))
        if len(rows):
            i = int(rows[0])
            self.fixed[_UNNAMED] = len(rows)
            self.examples.setdefault(_UNNAMED, f"a {cats[i] or 'complete'} event at ts {ts[i]:.0f}")

    def frame(self) -> pd.DataFrame:
        """The events table (unsorted slices joined, filtered and sorted by start time)."""
        parts, self.parts = self.parts, []

        def joined(key: str, dtype=np.int64) -> np.ndarray:
            # pop as we go: each slice's array is freed once its column is joined (caps peak memory)
            arrays = [p.pop(key) for p in parts]
            return np.concatenate(arrays) if arrays else np.zeros(0, dtype=dtype)

        ts, dur, cat = joined("ts", np.float64), joined("dur", np.float64), joined("cat")
        cat_values = np.array([str(v) for v in self.cats.values()] or [""], dtype=object)
        keep = ~np.isin(cat_values[cat], list(IGNORED_CATEGORIES)) if len(cat) else np.zeros(0, dtype=bool)
        for what, bad in (
            (_BAD_TIME, ~(np.isfinite(ts) & np.isfinite(dur))),
            (_ABSURD_TIME, (np.abs(ts) > MAX_TIME_US) | (dur > MAX_TIME_US)),
        ):
            bad &= keep
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                name = self.names.values()[self._peek(parts, "name", i)]
                self._skip(what, int(bad.sum()), example(name, ts[i], f"dur {dur[i]:g}"))
                keep &= ~bad
        negative = keep & (dur < 0)  # an event cannot end before it starts: nothing sensible to show
        if negative.any():
            i = int(np.flatnonzero(negative)[0])
            name = self.names.values()[self._peek(parts, "name", i)]
            self._skip(_NEGATIVE, int(negative.sum()), example(name, ts[i], f"dur {dur[i]:g}"))
            keep &= ~negative
        # Sort by start, longest first: a parent comes before the children it encloses.
        order = np.flatnonzero(keep)
        order = order[np.lexsort((-dur[order], ts[order]))]

        def lookup(codes: Codes, key: str, convert=str) -> np.ndarray:
            table = np.array([convert(v) for v in codes.values()] or [""], dtype=object)
            sorted_codes = joined(key)[order]
            # annotate() reuses the codes: factorizing a million strings again would cost a second
            self.codes[key] = (sorted_codes, table)
            return table[sorted_codes]

        self.codes: dict[str, tuple[np.ndarray, np.ndarray]] = {"cat": (cat[order], cat_values)}
        cols: dict[str, Any] = {
            "name": lookup(self.names, "name", name_text),
            "cat": cat_values[cat[order]],
            "ts": ts[order],
            "dur": dur[order],
        }
        del ts, dur, cat
        self._count_unnamed(cols["ts"], cols["cat"])
        cols["pid"] = lookup(self.pids, "pid")
        cols["tid"] = lookup(self.tids, "tid")
        for col in _INT_ARGS:
            values = joined(col)[order]
            cols[col] = pd.arrays.IntegerArray(values, joined(col + "_na", bool)[order])
        for col, key in _TEXT_ARGS.items():
            # code -1 (absent) picks the "" appended at the end of the table
            values = self.texts[col].values()
            table = np.array([text_of_key(v) for v in values] + [""], dtype=object)
            codes = joined(col)[order]
            cols[col] = table[codes]
            left = [i for i, v in enumerate(values) if isinstance(v, LeftOut)] if self.texts[col].reordered else []
            if left:
                what = (
                    f"events had a '{key}' longer than {self.max_arg_bytes:,} bytes: left out (shown empty); "
                    f"load_trace(path, max_arg_bytes=...) keeps longer ones"
                )
                self.fixed[what] = int(np.isin(codes, left).sum())
                self.examples.setdefault(what, f"one of {max(values[i].size for i in left):,} bytes")
        return pd.DataFrame({c: cols.pop(c) for c in EVENT_COLUMNS}, copy=False)
