"""The events of a trace file in slices (never a million dicts at once), cut at a candidate ``},`` and
checked by parsing: a wrong cut only makes a slice longer. It remembers where they lie, to save a copy."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .files import FileStamp, TraceText, TraceTooLargeError, as_path, check_file, check_limit, text_size
from .json_text import (
    BOM,
    JSON_ERRORS,
    WHITESPACE,
    check_document,
    check_start,
    deep_error,
    error_offset,
    loads,
    not_json,
    parse_document,
    too_deep,
    two_event_lists,
)

# How much decompressed text one slice of events holds when streaming: its parsed dicts are the
# loader's largest passing cost on mid-size traces, and smaller slices parse no slower.
STREAM_BLOCK_BYTES = 1 << 20
# A first block whose density puts the file this many times over `max_events` is refused at once: a real
# trace's events vary in size, but not by this factor across a whole file.
EARLY_REFUSAL = 2
# A header (everything before "traceEvents") longer than this is not a Kineto trace: read it whole.
_MAX_HEADER_BYTES = 64 << 20


@dataclass
class SourceText:
    """Where a trace read in slices came from (the events' byte span, the other top-level keys), to save a copy."""

    path: Path
    stamp: FileStamp
    max_bytes: int | None
    events_span: tuple[int, int] | None = None
    document: dict[str, Any] = field(default_factory=dict)

    def check_unchanged(self) -> None:
        """FileNotFoundError or ValueError when the file vanished or changed since it was read."""
        try:
            now = FileStamp.of(self.path)
        except FileNotFoundError:
            raise FileNotFoundError(
                f"the file this trace was loaded from, {str(self.path)!r}, no longer exists. A trace loaded "
                "in slices keeps its tables, not the file's events, so it cannot be saved without that file: "
                "load a trace with keep_document=True when you mean to save it after its file is gone."
            ) from None
        if now != self.stamp:
            raise ValueError(
                f"the file this trace was loaded from, {str(self.path)!r}, changed since it was loaded "
                f"({self.stamp.size:,} bytes then, {now.size:,} now; or rewritten): saving would copy the new "
                "content under this trace's label. Load the file again, or load it with keep_document=True "
                "to keep its text in memory."
            )

    def events_text(self, block: int = 16 << 20) -> Iterator[bytes]:
        """The text inside the file's ``traceEvents`` list, in blocks (checks the file did not change)."""
        if self.events_span is None:
            raise ValueError("the events of this file were not located while loading it")
        start, end = self.events_span
        self.check_unchanged()
        with TraceText(self.path, self.max_bytes) as text:
            text.skip(start)
            left = end - start
            while left > 0:
                got = text.read(min(left, block))
                if not got:
                    raise ValueError(f"{str(self.path)!r} is shorter than when it was loaded")
                left -= len(got)
                yield got
        self.check_unchanged()


# Stands for the events list while the document's other keys are parsed (no trace holds this text).
_STAND_IN = b"\\u0000events read in slices"
_STAND_IN_VALUE = "\x00events read in slices"
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)


def _list_end(buf: bytes) -> int:
    """Index of the ']' closing the list `buf` starts inside, skipping strings (one linear regex pass); -1 if none."""
    depth = 0
    for m in _TOKEN.finditer(buf):
        c = buf[m.start()]
        if c == 0x22:  # '"': a string, its brackets do not count
            continue
        if c in (0x5B, 0x7B):  # '[', '{'
            depth += 1
        elif depth:
            depth -= 1
        else:
            return m.start() if c == 0x5D else -1  # ']' closes the list; '}' closes nothing: damaged
    return -1


class EventStream:
    """The events of a trace file as lists of event dicts, slice by slice; iterate it once. Afterwards
    :attr:`document` holds the other top-level keys. A file that does not look like Kineto's is parsed whole."""

    def __init__(
        self,
        path: str | os.PathLike,
        block_bytes: int = STREAM_BLOCK_BYTES,
        decode: Callable[[bytes], list[Any]] | None = None,
        max_bytes: int | None = None,
        max_events: int | None = None,
    ) -> None:
        self.path = as_path(path)
        # counted by their "ph" keys in the text, before parsing: refusing costs a read, not a parse
        self.max_events = max_events
        check_file(self.path)
        if isinstance(block_bytes, bool) or not isinstance(block_bytes, int) or block_bytes < 1:
            raise ValueError(f"block_bytes must be a positive int, got {block_bytes!r}")
        self.block_bytes = block_bytes
        check_limit(max_bytes)
        self.max_bytes = max_bytes  # None: the default limit and the compression-ratio check
        # Turns one slice (a JSON array of events) into a list; must raise ValueError on invalid JSON.
        self._decode = decode or loads
        self.document: dict[str, Any] | None = None
        self.source: SourceText | None = None
        self.streamed = False  # True when the events were parsed in slices (not the whole file at once)
        self._used = False

    @property
    def source_name(self) -> str:
        return repr(str(self.path))

    def __iter__(self) -> Iterator[list[Any]]:
        if self._used:
            raise RuntimeError("an EventStream can be iterated only once; make a new one")
        self._used = True
        stamp = FileStamp.of(self.path)
        self.source = SourceText(self.path, stamp, self.max_bytes)
        with TraceText(self.path, self.max_bytes) as text:
            yield from self._parse(self._counted(text.blocks(self.block_bytes)))
        self.source.document = self.document or {}

    def _counted(self, blocks: Iterator[bytes]) -> Iterator[bytes]:
        """`blocks`, refused past `max_events` events; after the first block a file estimated far over the limit
        is refused before any parsing."""
        seen, read = 0, 0
        for block in blocks:
            seen += block.count(b'"ph"')
            read += len(block)
            if self.max_events is not None:
                total = text_size(self.path) if read == len(block) and seen else 0
                if total > read:  # a first block that is not the whole file
                    estimate = seen * total / read
                    if estimate > EARLY_REFUSAL * self.max_events:
                        raise TraceTooLargeError(
                            f"{self.source_name} holds about {estimate:,.0f} events (estimated from the density "
                            f"of its first {read:,} bytes), more than {self.max_events:,}",
                            "max_events",
                            max(4 * self.max_events, int(2 * estimate)),
                        )
                if seen > self.max_events:
                    raise TraceTooLargeError(
                        f"{self.source_name} holds more than {self.max_events:,} events (by their 'ph' keys)",
                        "max_events",
                        4 * self.max_events,
                    )
            yield block

    def _decoded(self, data: bytes, base: int, final: bool) -> list[Any] | None:
        """The events in `data`, or None when the cut was not an event boundary; raises on damage before the end of
        `data`, or on any error when `final`."""
        try:
            return self._decode(data)
        except RecursionError:  # msgspec counts nesting against Python's recursion limit: ask orjson
            try:
                return loads(data)
            except (RecursionError, *JSON_ERRORS) as err:
                where = error_offset(err, data)
                raise deep_error(self.source_name, None if where is None else base + where) from err
        except JSON_ERRORS as err:
            where = error_offset(err, data)
            if too_deep(err):
                raise deep_error(self.source_name, None if where is None else base + where) from err
            if final or where is None or where < len(data) - 1:
                raise not_json(self.source_name, err, None if where is None else base + where) from err
            return None

    def _whole(self, blocks: Iterator[bytes], start: bytes, base: int) -> Iterator[list[Any]]:
        """Fallback: read the rest and parse everything at once."""
        rest = b"".join([start, *blocks])
        doc = parse_document(rest, self.source_name, base)
        events = doc["traceEvents"]
        doc["traceEvents"] = []
        self.document = doc
        yield events

    def _parse(self, blocks: Iterator[bytes]) -> Iterator[list[Any]]:
        # 1. The header: everything up to and including the '[' that opens traceEvents.
        buf = next(blocks, b"")
        while 0 < len(buf) < len(BOM) and (more := next(blocks, b"")):
            buf += more
        offset = len(BOM) if buf.startswith(BOM) else 0  # where buf[0] lies in the text
        buf = buf[offset:]
        while True:
            text = buf.lstrip(WHITESPACE)  # leading whitespace is dropped, never accumulated
            offset, buf = offset + len(buf) - len(text), text
            if buf:
                check_start(buf, self.source_name, offset)
                if buf[:1] == b"[":  # a bare list of events
                    header, buf, offset = b"", buf[1:], offset + 1
                    break
                key = buf.find(b'"traceEvents"')
                bracket = -1
                if key >= 0:
                    after = buf[key + len(b'"traceEvents"') :].lstrip(WHITESPACE)
                    if after[:1] == b":" and after[1:].lstrip(WHITESPACE)[:1] == b"[":
                        bracket = len(buf) - len(after[1:].lstrip(WHITESPACE))
                if bracket >= 0:
                    header = buf[:key]
                    try:  # the key must be a top-level key of the object, not text inside a string
                        head = loads(header + b'"' + _STAND_IN + b'":0}')
                    except (RecursionError, *JSON_ERRORS):
                        head = None
                    head_ok = isinstance(head, dict)
                    if head_ok and "traceEvents" in head:  # one spelled with an escape came first
                        raise two_event_lists(self.source_name)
                    if not head_ok:
                        yield from self._whole(blocks, buf, offset)
                        return
                    buf, offset = buf[bracket + 1 :], offset + bracket + 1
                    break
                if len(buf) > _MAX_HEADER_BYTES or key >= 0:
                    yield from self._whole(blocks, buf, offset)
                    return
            block = next(blocks, None)
            if block is None:
                if not buf:
                    raise ValueError(f"{self.source_name} is empty: no trace events to read")
                yield from self._whole(blocks, buf, offset)
                return
            buf += block
        self.streamed = True
        events_start = offset
        # 2. The events, one slice per block: cut at the last '},' that parses. Blocks wait in a
        # list, joined only when a cut is tried; after a failed try (an event longer than a block)
        # the next waits until the text has doubled, so one event of any size costs linear time.
        pending, size, next_try = [buf], len(buf), 0
        for block in blocks:
            pending.append(block)
            size += len(block)
            if size < next_try:
                continue
            buf = b"".join(pending)
            pending = [buf]
            cut = buf.rfind(b"},")
            try:
                events = None if cut < 0 else self._decoded(b"[" + buf[: cut + 1] + b"]", offset - 1, final=False)
            except ValueError:
                # A '},' after the list's closing ']' (inside the document's other keys) is no event
                # boundary: when the list has closed in this buffer, read the rest and finish below.
                if _list_end(buf) < 0:
                    raise
                pending.extend(blocks)
                break
            if events is None:
                next_try = 2 * size  # not a boundary between events: read on and retry
                continue
            buf, offset = buf[cut + 2 :], offset + cut + 2
            pending, size, next_try = [buf], len(buf), 0
            yield events
        buf = b"".join(pending)
        del pending
        # 3. The end: the last events, the ']' closing the array, then the rest of the document.
        close = _list_end(buf)
        if close < 0:  # damage, or a list cut short: the parser says where it stops
            self._decoded(b"[" + buf, offset - 1, final=True)
            raise not_json(self.source_name, "the traceEvents list is never closed", offset + len(buf))
        events = self._decoded(b"[" + buf[: close + 1], offset - 1, final=True)
        # the document's other keys: the header, a stand-in for the events, what follows (a second
        # top-level traceEvents key replaces the stand-in: the parser keeps the last of equal keys)
        prefix = header + b'"traceEvents":"' + _STAND_IN + b'"' if header else b"[]"
        rest_text = prefix + buf[close + 1 :]
        try:
            rest = loads(rest_text)
        except (RecursionError, *JSON_ERRORS) as err:
            where = error_offset(err, rest_text)  # in rest_text; the text after the list starts at close + 1
            where = None if where is None else offset + close + 1 + where - len(prefix)
            if too_deep(err):
                raise deep_error(self.source_name, where) from err
            raise not_json(self.source_name, err, where) from err
        if header and isinstance(rest, dict):
            if rest.get("traceEvents") != _STAND_IN_VALUE:
                raise two_event_lists(self.source_name)
            rest["traceEvents"] = []
        self.document = check_document(rest, self.source_name)
        if self.source is not None:
            self.source.events_span = (events_start, offset + close)
        yield events


def stream_events(
    path: str | os.PathLike,
    block_bytes: int = STREAM_BLOCK_BYTES,
    decode: Callable[[bytes], list[Any]] | None = None,
    max_bytes: int | None = None,
    max_events: int | None = None,
) -> EventStream:
    """An :class:`EventStream` over a trace file; `decode` parses one slice of JSON array bytes (default: dicts)."""
    return EventStream(path, block_bytes, decode, max_bytes, max_events)
