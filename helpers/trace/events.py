"""A Chrome/Kineto trace as tables: one row per event, fields read defensively (torch versions differ,
lanes come from events, never from metadata), derived columns from :mod:`helpers.trace.links`."""

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
    """Pause the cyclic garbage collector while millions of small dicts are made: parsed JSON holds no cycles,
    yet the collector would walk every live object every few thousand dicts."""
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
    """Build :class:`TraceTables` from a parsed trace document; `source` names the trace in messages."""
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
    """Build :class:`TraceTables` from a trace file by streaming its events; returns them and the document's
    other top-level keys. The tables remember where the events lie in the file, so a copy can be saved."""
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
