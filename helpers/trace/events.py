"""Turn a Chrome/Kineto trace into tables: one row per event, plus the links between them.

Everything here reads fields defensively: torch versions differ in which fields they write
(torch 2.11 on the GPU machine, 2.13 here), ``pid``/``tid`` can be strings, ``dur`` can be
missing, and CPU-only traces may still declare ``GPU 0..15`` processes in their metadata (lanes
are made from events, never from metadata).

Vocabulary used in the columns of :attr:`TraceTables.events`:

* ``name``, ``cat``, ``ts`` (us), ``dur`` (us), ``pid``, ``tid`` (as text), ``external_id``,
  ``correlation``, ``stream``, ``device`` (nullable integers), ``input_dims``, ``input_types``,
  ``grid``, ``block`` (text, empty when not recorded).
* ``on_device``: the event ran on a GPU stream.
* ``lane``: where an event is drawn: ``"CPU <pid>/<tid>"`` for a host thread, ``"GPU <dev> stream <s>"``.
* ``parent``: row index of the innermost host event that encloses this one on the same thread (-1 if none).
* ``depth``: nesting depth on its thread (0 = outermost).
* ``launch``: for a device event, the row index of the runtime/driver call that launched it
  (matched through ``correlation``; ``cudaLaunchKernel`` and ``cuLaunchKernelEx`` alike).
* ``launched_by``: for a device event, the row index of the innermost ``cpu_op`` around that launch.
* ``annotation``: row index of the innermost ``user_annotation`` (``record_function``) around the
  event, profiler steps excluded; for a device event, around its launch (-1 if none).
* ``step``: the ``ProfilerStep#N`` number (-1 outside steps).

Speed matters: a trace can hold a million events. Columns are built slice by slice with list
comprehensions (no dict per row is kept), strings are shared through lookup tables, and the
links above are computed with numpy over whole columns, not per event in Python.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator
from typing import Any

from . import stream as tracestream
from .builder import (  # noqa: F401  (the column names and limits are read from here too)
    DERIVED_COLUMNS,
    EVENT_COLUMNS,
    MAX_ARG_BYTES,
    MAX_EVENTS,
    _Builder,
    check_count,
    decode_slice,
)
from .links import annotate
from .memory_events import SKIPPED_NOTE
from .tables import TraceTables


# --------------------------------------------------------------------------- public entry points
@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while millions of small dicts are made and dropped.

    Parsed JSON holds no reference cycles, yet every few thousand new dicts the collector walks
    all live objects (torch alone brings hundreds of thousands): on a million-event trace that
    walking cost more than the parsing. Reference counting still frees everything as usual.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def events_from_document(
    doc: dict[str, Any], source: str = "the trace", max_events: int | None = None, max_arg_bytes: int | None = None
) -> TraceTables:
    """Build :class:`TraceTables` from a parsed trace document (see :mod:`helpers.trace.files`).

    `max_events` (default :data:`MAX_EVENTS`) and `max_arg_bytes` (default :data:`MAX_ARG_BYTES`):
    see :class:`_Builder`; `source` names the trace in messages.
    """
    raw = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(raw, list):
        raise ValueError("trace document has no 'traceEvents' list")
    builder = _Builder(source, max_events, max_arg_bytes)
    step = 200_000  # slices keep the temporary lists small on big documents
    with _no_cyclic_gc():
        for start in range(0, len(raw), step):
            builder.add(raw[start : start + step])
        return _finish(builder, doc)


def events_from_file(
    path: str | os.PathLike,
    block_bytes: int = tracestream.STREAM_BLOCK_BYTES,
    max_bytes: int | None = None,
    max_events: int | None = None,
    max_arg_bytes: int | None = None,
) -> tuple[TraceTables, dict[str, Any]]:
    """Build :class:`TraceTables` from a trace file, streaming its events (see :class:`tracestream.EventStream`).

    Returns the tables and the document's other top-level keys (``traceEvents`` left empty).
    `max_bytes`: the most JSON text read (see :class:`helpers.trace.files.TraceText`); `max_events`
    and `max_arg_bytes`: see :func:`events_from_document`. The tables
    remember where the events lie in the file (``source``), so that a copy can be saved.
    """
    max_events = check_count(max_events, MAX_EVENTS, "max_events")
    stream = tracestream.stream_events(path, block_bytes, decode_slice, max_bytes, max_events)
    builder = _Builder(stream.source_name, max_events, max_arg_bytes)
    with _no_cyclic_gc():
        for chunk in stream:
            builder.add(chunk)
            del chunk
        doc = stream.document or {"traceEvents": []}
        tables = _finish(builder, doc)
    tables.source = stream.source
    return tables, doc


def _finish(builder: _Builder, doc: dict[str, Any]) -> TraceTables:
    events = builder.frame()
    annotate(events, codes=builder.codes)
    memory = builder.memory.frame()
    builder._skip(SKIPPED_NOTE, builder.memory.skipped)
    flow_count, unmatched = builder.flow_counts()
    props = doc.get("deviceProperties") if isinstance(doc, dict) else None
    if props is not None and not isinstance(props, list):
        builder._skip(f"'deviceProperties' value ({type(props).__name__} where a list of GPU properties belongs)", 1)
    elif isinstance(props, list) and not all(isinstance(p, dict) for p in props):
        builder._skip(
            "entries of 'deviceProperties' that are not JSON objects", sum(not isinstance(p, dict) for p in props)
        )
    return TraceTables(
        events=events,
        process_names=builder.process_names,
        thread_names=builder.thread_names,
        flow_count=flow_count,
        unmatched_flows=unmatched,
        device_properties=[p for p in props if isinstance(p, dict)] if isinstance(props, list) else [],
        dropped_without_dur=builder.dropped_without_dur,
        skipped=builder.skipped,
        fixed=builder.fixed,
        examples=builder.examples,
        memory=memory,
    )
