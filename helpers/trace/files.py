"""Reading and writing Chrome/Kineto trace files (``.json`` or ``.json.gz``).

This module only knows about files and JSON documents; turning events into tables is the job of
:mod:`helpers.trace.events`.

Two ways to read a trace:

* :func:`read_document` parses the whole file into one dict (simple; what small traces use, and
  needed when the document is kept to be saved again).
* :func:`stream_events` parses the ``traceEvents`` array in slices of a few MB, so a 200 MB trace
  never exists as a million Python dicts at once: peak memory stays near the size of the
  decompressed text plus one slice. Slices are cut at candidate event boundaries (``},``) and each
  cut is checked by parsing: a cut inside a string or a nested object never parses, so a wrong
  cut only makes the slice longer, never the result different.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import tempfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

try:  # orjson parses large traces several times faster than the standard library
    import orjson as _fast_json
except ImportError:  # pragma: no cover - depends on the environment
    _fast_json = None

_JSON_ERRORS = (ValueError, UnicodeDecodeError)  # orjson.JSONDecodeError subclasses ValueError
# How much decompressed text one slice of events holds when streaming.
STREAM_BLOCK_BYTES = 4 << 20
# A header (everything before "traceEvents") longer than this is not a Kineto trace: read it whole.
_MAX_HEADER_BYTES = 64 << 20
_WHITESPACE = b" \t\r\n"


def _loads(data: bytes) -> Any:
    return _fast_json.loads(data) if _fast_json is not None else json.loads(data)


def loads(data: bytes | str) -> Any:
    """Parse JSON text (orjson when installed)."""
    return _loads(data)


def dumps_compact(value: Any) -> bytes:
    """Compact JSON bytes of `value` (orjson when installed); used as a hashable key for lists."""
    if _fast_json is not None:
        return _fast_json.dumps(value)
    return json.dumps(value, separators=(",", ":")).encode()


def _as_path(path: str | os.PathLike) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"expected a file path (str or pathlib.Path), got {type(path).__name__}")
    return Path(path)


def _check_file(p: Path) -> None:
    if not p.exists():
        raise FileNotFoundError(
            f"trace file {str(p)!r} does not exist. Check the path; reference traces live in the "
            "repository's traces/ folder (see helpers.reference_trace_path)."
        )
    if p.is_dir():
        raise ValueError(f"{str(p)!r} is a folder, not a trace file: pass the .json or .json.gz file inside it")


def _damaged_gzip(p: Path, err: BaseException) -> ValueError:
    return ValueError(
        f"{str(p)!r} is a damaged or truncated gzip file ({type(err).__name__}: {err}). "
        "Re-download or re-record the trace; an interrupted copy or save leaves such a file."
    )


def text_size(path: str | os.PathLike) -> int:
    """Bytes of JSON text in a trace file: its size, or for gzip the size recorded in its trailer.

    (The trailer holds the size modulo 4 GiB; a file is never smaller than its compressed form,
    so the larger of the two is used.)
    """
    p = _as_path(path)
    size = p.stat().st_size
    with open(p, "rb") as fh:
        if fh.read(2) != b"\x1f\x8b" or size < 18:
            return size
        fh.seek(-4, os.SEEK_END)
        return max(int.from_bytes(fh.read(4), "little"), size)


def read_bytes(path: str | os.PathLike) -> bytes:
    """The decompressed bytes of a trace file; gzip is detected from the content, not the name."""
    p = _as_path(path)
    _check_file(p)
    data = p.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (EOFError, OSError, zlib.error) as err:
            raise _damaged_gzip(p, err) from err
    return data


def _not_json(source: str, err: BaseException) -> ValueError:
    return ValueError(
        f"{source} is not a JSON trace ({type(err).__name__}: {str(err)[:200]}). "
        "Expected a Chrome/Kineto trace as written by torch.profiler's export_chrome_trace; "
        "a file cut short (an interrupted write or copy) also ends up here."
    )


def _check_document(doc: Any, source: str) -> dict[str, Any]:
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        keys = sorted(doc)[:8] if isinstance(doc, dict) else type(doc).__name__
        raise ValueError(
            f"{source} is JSON but not a trace: it has no 'traceEvents' list (found {keys}). "
            "Expected a Chrome/Kineto trace as written by torch.profiler's export_chrome_trace."
        )
    return doc


def parse_document(data: bytes, source: str = "<bytes>") -> dict[str, Any]:
    """Parse trace JSON into a document with a ``traceEvents`` list.

    A bare JSON list of events (allowed by the Chrome trace format) is wrapped into a document.
    """
    if not data.strip():
        raise ValueError(f"{source} is empty: no trace events to read")
    try:
        doc = _loads(data)
    except _JSON_ERRORS as err:
        raise _not_json(source, err) from err
    return _check_document(doc, source)


def read_document(path: str | os.PathLike) -> dict[str, Any]:
    """Read and parse a ``.json`` or ``.json.gz`` trace file."""
    return parse_document(read_bytes(path), source=repr(str(path)))


# --------------------------------------------------------------------------- streaming
class EventStream:
    """The events of a trace file, parsed slice by slice; iterate it once.

    Iterating yields lists of event dicts (each list a slice of ``traceEvents``, in file order).
    Once the iteration has finished, :attr:`document` holds every other top-level key of the file
    (``deviceProperties``, ``course_provenance`` ...) with ``traceEvents`` set to an empty list.
    A file that does not look like a Kineto trace (no ``traceEvents`` key near its start) is parsed
    whole instead: same results, only the memory saving is lost.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        block_bytes: int = STREAM_BLOCK_BYTES,
        decode: Callable[[bytes], list[Any]] | None = None,
    ) -> None:
        self.path = _as_path(path)
        _check_file(self.path)
        if block_bytes < 1:
            raise ValueError(f"block_bytes must be positive, got {block_bytes}")
        self.block_bytes = block_bytes
        # Turns one slice (a JSON array of events) into a list; must raise ValueError on invalid JSON.
        self._decode = decode or _loads
        self.document: dict[str, Any] | None = None
        self.streamed = False  # True when the events were parsed in slices (not the whole file at once)
        self._used = False

    @property
    def source(self) -> str:
        return repr(str(self.path))

    def _open(self, stack: contextlib.ExitStack) -> BinaryIO:
        raw = stack.enter_context(open(self.path, "rb"))
        if raw.read(2) == b"\x1f\x8b":  # gzip is detected from the content, not the name
            raw.seek(0)
            return stack.enter_context(gzip.GzipFile(fileobj=raw, mode="rb"))
        raw.seek(0)
        return raw

    def _blocks(self, fh: BinaryIO) -> Iterator[bytes]:
        while True:
            try:
                block = fh.read(self.block_bytes)
            except (EOFError, OSError, zlib.error) as err:
                raise _damaged_gzip(self.path, err) from err
            if not block:
                return
            yield block

    def __iter__(self) -> Iterator[list[Any]]:
        if self._used:
            raise RuntimeError("an EventStream can be iterated only once; make a new one")
        self._used = True
        with contextlib.ExitStack() as stack:
            yield from self._parse(self._open(stack))

    def _whole(self, fh: BinaryIO, start: bytes) -> Iterator[list[Any]]:
        """Fallback: read the rest and parse everything at once."""
        rest = b"".join([start, *self._blocks(fh)])
        doc = parse_document(rest, self.source)
        events = doc["traceEvents"]
        doc["traceEvents"] = []
        self.document = doc
        yield events

    def _parse(self, fh: BinaryIO) -> Iterator[list[Any]]:
        blocks = self._blocks(fh)
        buf = b""
        # 1. The header: everything up to and including the '[' that opens traceEvents.
        while True:
            block = next(blocks, None)
            if block is None:
                if not buf.strip():
                    raise ValueError(f"{self.source} is empty: no trace events to read")
                yield from self._whole(fh, buf)
                return
            buf += block
            text = buf.lstrip(_WHITESPACE + b"\xef\xbb\xbf")  # a UTF-8 byte-order mark is harmless
            if text[:1] == b"[":  # a bare list of events
                header, buf = b"", text[1:]
                break
            if text[:1] != b"{":
                yield from self._whole(fh, buf)  # raises the usual "not a JSON trace" error
                return
            key = text.find(b'"traceEvents"')
            bracket = -1
            if key >= 0:
                after = text[key + len(b'"traceEvents"') :].lstrip(_WHITESPACE)
                if after[:1] == b":" and after[1:].lstrip(_WHITESPACE)[:1] == b"[":
                    bracket = len(text) - len(after[1:].lstrip(_WHITESPACE))
            if bracket >= 0:
                header, buf = text[:key], text[bracket + 1 :]
                try:  # the key must be a top-level key of the object, not text inside a string
                    head_ok = isinstance(_loads(header + b'"traceEvents":[]}'), dict)
                except _JSON_ERRORS:
                    head_ok = False
                if not head_ok:
                    yield from self._whole(fh, text)
                    return
                break
            if len(text) > _MAX_HEADER_BYTES or key >= 0:
                yield from self._whole(fh, text)
                return
        self.streamed = True
        # 2. The events, one slice per block: cut at the last '},' that parses.
        for block in blocks:
            buf += block
            cut = buf.rfind(b"},")
            if cut < 0:
                continue
            try:
                events = self._decode(b"[" + buf[: cut + 1] + b"]")
            except _JSON_ERRORS:
                continue  # not a boundary between events (or a damaged file): read on and retry
            buf = buf[cut + 2 :]
            yield events
        # 3. The end: the last events, the ']' closing the array, then the rest of the document.
        events, tail = self._split_end(buf, header)
        yield events

    def _split_end(self, buf: bytes, header: bytes) -> tuple[list[Any], bytes]:
        end = len(buf)
        last_error: BaseException | None = None
        while True:
            close = buf.rfind(b"]", 0, end)
            if close < 0:
                err = last_error or ValueError("the traceEvents list is never closed (no ']')")
                raise _not_json(self.source, err)
            tail = buf[close + 1 :]
            try:
                rest = _loads(header + b'"traceEvents":[]' + tail) if header else _loads(b"[]" + tail)
                events = self._decode(b"[" + buf[: close + 1])
            except _JSON_ERRORS as err:
                last_error = err
                end = close
                continue
            self.document = _check_document(rest, self.source)
            return events, tail


def stream_events(
    path: str | os.PathLike, block_bytes: int = STREAM_BLOCK_BYTES, decode: Callable[[bytes], list[Any]] | None = None
) -> EventStream:
    """An :class:`EventStream` over a ``.json`` or ``.json.gz`` trace (see the module docstring).

    `decode` parses one slice (JSON array bytes) into a list and raises ValueError on invalid
    JSON; the default gives dicts. :mod:`helpers.trace.events` passes a typed decoder that skips the
    fields it does not use.
    """
    return EventStream(path, block_bytes, decode)


def dump_document(doc: dict[str, Any]) -> bytes:
    """Serialise a trace document to compact JSON bytes."""
    if _fast_json is not None:
        return _fast_json.dumps(doc)
    return json.dumps(doc, separators=(",", ":")).encode()


def write_gzip_atomic(data: bytes, path: str | os.PathLike) -> Path:
    """Write `data` gzipped to `path` atomically: a crash mid-write never leaves a truncated file there.

    The bytes go to a temporary file in the same folder, are flushed to disk, then renamed over
    the final name (a rename within one file system is atomic).
    """
    target = _as_path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as gz:
            gz.write(data)
        with open(tmp_name, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp_name, 0o644)  # mkstemp makes files private; traces are meant to be shared
        os.replace(tmp_name, target)
    except BaseException:
        try:
            os.unlink(tmp_name)
        except FileNotFoundError:
            pass
        raise
    return target
