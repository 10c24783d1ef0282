"""`Trace`: one object for a profile recorded now or loaded from a file, so a cell works on either;
it says where it came from in its repr and figure titles."""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import files as tracefile
from . import json_text
from .categories import CPU_GENERATED_KERNEL, NOT_WORK, work_kinds
from .correlation import graph_launched
from .events import MAX_EVENTS, check_count, events_from_document, events_from_file
from .saving import PROVENANCE_KEY, SAVING, write_gzip_atomic
from .tables import TraceTables
from .trees import chain_table, op_table


class NoKernelsError(ValueError):
    """The trace holds no device kernels, and kernels were asked for."""


def check_trace(trace: Any, what: str = "trace") -> Trace:
    """`trace` itself when it is a :class:`Trace`; a TypeError saying how to get one otherwise."""
    if not isinstance(trace, Trace):
        raise TypeError(
            f"{what} must be a Trace (from helpers.profile or helpers.load_trace), got {type(trace).__name__}"
        )
    return trace


# What a trace file that carries no provenance of its own (one torch exported itself) is described with.
NO_DEVICE, NO_TORCH, NO_DATE = "device not recorded", "not recorded", "date not recorded"


@dataclass(frozen=True)
class TraceInfo:
    """Where a trace came from. Shown in `Trace.__repr__` and in figure titles."""

    label: str
    source: str  # "live", "reference" (shipped in traces/) or "file"
    device: str = "unknown device"
    torch_version: str = "unknown"
    recorded_on: str = "unknown date"
    path: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        where = {"live": "live profile", "reference": "reference trace", "file": "trace file"}.get(
            self.source, self.source
        )
        if (self.device, self.torch_version, self.recorded_on) == (NO_DEVICE, NO_TORCH, NO_DATE):
            # one clause, not three "not recorded"
            return f"{self.label} ({where}: no device, torch version or date recorded in it)"
        return f"{self.label} ({where}: {self.device}, torch {self.torch_version}, {self.recorded_on})"


class Trace:
    """A profile: events, operators, kernels, dispatch chains and a timeline (from :func:`helpers.profile` or
    :func:`helpers.load_trace`)."""

    def __init__(
        self,
        document: dict[str, Any],
        info: TraceInfo,
        profiler_table: pd.DataFrame | Callable[[], pd.DataFrame] | None = None,
        keep_document: bool = True,
        tables: TraceTables | None = None,
    ) -> None:
        self.info = info
        # `tables` comes from a file read in slices (load_trace on a big file); `document` then holds
        # only the file's other keys.
        self._tables: TraceTables = tables if tables is not None else events_from_document(document)
        if self._tables.events.empty:
            raise ValueError(
                f"{info.describe()} holds no timed events (only metadata or nothing at all). "
                "Profile a function that does some work, or check that the file is the full trace."
            )
        self._document = document if keep_document else None
        self._profiler_table = profiler_table
        head = document if isinstance(document, dict) else {}
        # which rank recorded it (torch.distributed runs), and the clock origin of its times
        dist = head.get("distributedInfo")
        self.distributed_info: dict[str, Any] = dist if isinstance(dist, dict) else {}
        self.base_time_ns = head.get("baseTimeNanoseconds")

    # ----------------------------------------------------------------- basics
    @property
    def events(self) -> pd.DataFrame:
        """Every complete event, one row each (see :mod:`helpers.trace.events` for the columns)."""
        return self._tables.events

    @property
    def notes(self) -> list[str]:
        """What was left out or could not be linked while reading the trace (empty when nothing was)."""
        return self._tables.notes

    @property
    def steps(self) -> list[int]:
        """Profiler step numbers present in the trace (empty if it was recorded without a schedule)."""
        return sorted(int(s) for s in self.events["step"].unique() if s >= 0)

    @property
    def device_lanes(self) -> list[str]:
        """Lanes of device streams that really hold events (metadata alone never makes a lane)."""
        ev = self.events
        return sorted(ev.loc[ev["on_device"], "lane"].unique())

    @property
    def host_lanes(self) -> list[str]:
        """Host thread lanes that hold events."""
        ev = self.events
        return sorted(ev.loc[~ev["on_device"], "lane"].unique())

    def __repr__(self) -> str:
        ev = self.events
        n_kernels = int(ev["on_device"].sum())
        return (
            f"<Trace {self.info.describe()}: {len(ev)} events, {len(self.steps)} steps, "
            f"{n_kernels} device events, lanes: {len(self.host_lanes)} CPU / {len(self.device_lanes)} GPU>"
        )

    # ----------------------------------------------------------------- tables
    def ops(self, by_shape: bool = False, include_annotations: bool = False) -> pd.DataFrame:
        """Operators, one row per name (and input shapes when `by_shape`), like `key_averages()`. Columns:
        ``name``, ``calls``, ``self_cpu_us``, ``cpu_total_us``, ``self_device_us`` (kernels it launched
        directly), ``device_total_us``, ``input_shapes``."""
        return op_table(self, by_shape, include_annotations)

    def kernels(self, allow_empty: bool = False) -> pd.DataFrame:
        """One row per kernel launch in start order (memsets, memcpys and torch.compile's C++ kernels on a
        CPU included). Columns: ``name``, ``kind``, ``lane``, ``stream``, ``step``, ``start_us`` (from the trace's
        start), ``duration_us``, ``launched_by`` (the operator), ``input_shapes`` (its), ``launch_call``,
        ``graph`` (launched by a graph replay), ``grid``, ``block``; ``rank`` first for several ranks.

        Raises :class:`NoKernelsError` when there are none, unless `allow_empty`.
        """
        ev = self.events
        t0 = float(ev["ts"].min())
        kinds = work_kinds(ev)
        on_dev = kinds != ""
        cpu_gen = (~ev["on_device"]) & ev["name"].str.contains(CPU_GENERATED_KERNEL)
        rows = ev[on_dev | cpu_gen]
        if rows.empty and not allow_empty:
            raise NoKernelsError(f"{self.info.describe()} holds no kernels. {self._why_no_kernels()}")
        names = ev["name"].to_numpy()
        dims = ev["input_dims"].to_numpy()
        parent = ev["parent"].to_numpy()
        launched_by = np.where(rows["on_device"], rows["launched_by"], parent[rows.index.to_numpy()])
        kind = np.where(on_dev[rows.index.to_numpy()], kinds[rows.index.to_numpy()], "cpu-generated")
        launch = rows["launch"].to_numpy()
        graph = graph_launched(ev, rows.index.to_numpy())
        out = pd.DataFrame(
            {
                "name": rows["name"].to_numpy(),
                "kind": kind,
                "lane": rows["lane"].to_numpy(),
                "stream": rows["stream"].to_numpy(),
                "step": rows["step"].to_numpy(),
                "start_us": rows["ts"].to_numpy() - t0,
                "duration_us": rows["dur"].to_numpy(),
                "launched_by": [names[j] if j >= 0 else None for j in launched_by],
                "input_shapes": [dims[j] if j >= 0 else "" for j in launched_by],
                "launch_call": [names[j] if j >= 0 else None for j in launch],
                "graph": graph,
                "grid": rows["grid"].to_numpy(),
                "block": rows["block"].to_numpy(),
            }
        )
        if "rank" in rows.columns:  # a run of several ranks (helpers.load_traces)
            out.insert(0, "rank", rows["rank"].to_numpy())
        return out.sort_values("start_us", kind="stable").reset_index(drop=True)

    def _why_no_kernels(self) -> str:
        """Which device events the trace holds instead of kernels, and why they are not analysed."""
        ev = self.events
        device = ev.loc[ev["on_device"], "cat"].value_counts()
        if device.empty:
            return (
                "On a CPU-only run eager PyTorch launches no kernels at all (ATen ops run inline on the "
                "host): look at ops() instead, or compile with torch._inductor.config.cpp.enable_kernel_profile "
                "= True to see generated C++ kernels. On a GPU this means the device activity was not recorded "
                "(no CUPTI, or activities without ProfilerActivity.CUDA). Pass allow_empty=True to get an "
                "empty table."
            )
        found = "; ".join(
            f"{n:,} '{cat}' events ({NOT_WORK.get(cat, 'device events that are not kernels, memsets or memcpys')})"
            for cat, n in device.items()
        )
        return (
            f"Its device events are: {found}. None of them is a kernel with a real duration, so there is "
            "nothing to analyse as kernels; events() lists them. Pass allow_empty=True to get an empty table."
        )

    def chain(self, op: str, max_depth: int | None = None) -> pd.DataFrame:
        """The dispatch tree under every call of operator `op`, merged across calls: one row per distinct
        path, depth first, kernels as leaves under the op that launched them. Columns: ``depth``, ``name``,
        ``path``, ``kind``, ``count``, ``calls_of_root``, ``tree`` (the indented name)."""
        return chain_table(self, op, max_depth)

    def profiler_table(self) -> pd.DataFrame:
        """The profiler's own `key_averages()` table, kept when the profile was recorded live (built on first use)."""
        if callable(self._profiler_table):
            self._profiler_table = self._profiler_table()  # and the profiler it read is let go
        if self._profiler_table is None:
            raise ValueError(
                f"{self.info.describe()} was loaded from a file: the profiler's key_averages() table is only "
                "kept for live profiles. Use ops(), which computes the same columns from the events."
            )
        return self._profiler_table.copy()

    # ----------------------------------------------------------------- output
    def timeline(self, **kwargs: Any):
        """A plotly timeline of this trace; see :func:`helpers.trace.timeline.timeline_figure` for options."""
        from .timeline import timeline_figure  # plotly only when a timeline is drawn, not to read a trace

        return timeline_figure(self, **kwargs)

    def save(
        self, path: str | os.PathLike | None = None, overwrite: bool = True, allow_reference: bool = False
    ) -> Path:
        """Write a gzipped Chrome trace that Perfetto opens (default ``<default folder>/<label>.json.gz``),
        atomically, never into a reference folder unless `allow_reference`; returns the path."""
        if path is None:
            if SAVING.default_dir is None:
                raise ValueError("no default folder for traces is configured: pass save(path=...)")
            safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.info.label).strip("_") or "trace"
            path = SAVING.default_dir / f"{safe}.json.gz"
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or pathlib.Path, got {type(path).__name__}")
        target = Path(path)
        if not target.name.endswith(".json.gz"):
            raise ValueError(
                f"save writes gzipped Chrome traces: give a file name ending in .json.gz, got {target.name!r}"
            )
        if SAVING.is_reference(target) and not allow_reference:
            raise ValueError(
                f"{target} is inside a reference traces folder: reference traces are read-only. "
                f"Save your own traces under {SAVING.default_dir} (the default)."
            )
        if not overwrite and os.path.lexists(target):
            raise FileExistsError(f"{target} exists; pass overwrite=True or choose another name")
        source = self._tables.source
        if self._document is not None:
            doc = dict(self._document)
            doc[PROVENANCE_KEY] = self.provenance()
            data: bytes | Iterator[bytes] = json_text.dump_document(doc)
        elif source is not None and source.events_span is not None:
            # Events streamed from a file: copy their text from it, with this trace's other keys.
            doc = {k: v for k, v in source.document.items() if k != "traceEvents"}
            doc[PROVENANCE_KEY] = self.provenance()
            head = json_text.dump_document(doc)[:-1] + (b',"traceEvents":[' if doc else b'"traceEvents":[')
            source.check_unchanged()
            data = itertools.chain([head], source.events_text(), [b"]}"])
        elif source is not None:  # an unusual layout that was parsed whole while streaming
            source.check_unchanged()
            doc = tracefile.read_document(source.path, source.max_bytes)
            doc[PROVENANCE_KEY] = self.provenance()
            data = json_text.dump_document(doc)
        else:  # pragma: no cover - every constructor path keeps one of the two
            raise ValueError("this trace keeps neither its document nor its source file; nothing to save")
        return write_gzip_atomic(data, target, overwrite=overwrite)

    def provenance(self) -> dict[str, Any]:
        """Where this trace came from, as stored in saved files."""
        info = self.info
        return {
            "label": info.label,
            "device": info.device,
            "torch": info.torch_version,
            "recorded_on": info.recorded_on,
            **info.extra,
        }


def load_trace(
    path: str | os.PathLike,
    label: str | None = None,
    keep_document: bool | None = None,
    max_bytes: int | None = None,
    max_events: int | None = None,
    max_arg_bytes: int | None = None,
) -> Trace:
    """Load a saved Chrome/Kineto trace (``.json`` or ``.json.gz``) from any torch 2.x, CPU-only or CUDA.

    Events are read in slices straight into columns unless `keep_document` keeps the parsed JSON;
    what could not be read cleanly is listed in ``trace.notes``. `max_bytes` (decompressed JSON text),
    `max_events` and `max_arg_bytes` (one event's shapes or launch configuration) raise the limits.
    """
    p = Path(path) if isinstance(path, (str, os.PathLike)) else path
    if not isinstance(p, Path):
        raise TypeError(f"expected a file path (str or pathlib.Path), got {type(path).__name__}")
    if keep_document is None:
        # Streamed by default: a whole parsed document costs several times its JSON text in Python
        # objects. A file that is not a regular file is read whole, so its errors come from one place.
        keep_document = not p.is_file()
    tables = None
    if keep_document:
        # raises TypeError / FileNotFoundError / ValueError with advice
        doc = tracefile.read_document(p, max_bytes, max_events=check_count(max_events, MAX_EVENTS, "max_events"))
        tables = events_from_document(doc, repr(str(p)), max_events, max_arg_bytes)
    else:
        # Big file: parse the events in slices straight into columns, never holding them all as dicts.
        tables, doc = events_from_file(p, max_bytes=max_bytes, max_events=max_events, max_arg_bytes=max_arg_bytes)
    prov = doc.get(PROVENANCE_KEY) or {}
    if not isinstance(prov, dict):
        prov = {}
    devices = [str(d["name"]) for d in tables.device_properties if d.get("name")]
    name = p.name.removesuffix(".gz").removesuffix(".json")
    info = TraceInfo(
        label=label or str(prov.get("label") or name),
        source="reference" if SAVING.is_reference(p) else "file",
        device=str(prov.get("device") or (devices[0] if devices else NO_DEVICE)),
        torch_version=str(prov.get("torch", NO_TORCH)),
        recorded_on=str(prov.get("recorded_on", NO_DATE)),
        path=str(p),
        extra={k: v for k, v in prov.items() if k not in {"label", "device", "torch", "recorded_on"}},
    )
    return Trace(doc, info, keep_document=keep_document, tables=tables)
