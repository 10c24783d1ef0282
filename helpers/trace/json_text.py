"""JSON text of a trace: parsing it (orjson when installed) into a document with a ``traceEvents``
list, and the one wording of every JSON error (byte offset, nesting depth, two event lists) that
both ways of reading a trace (:mod:`helpers.trace.files`, :mod:`helpers.trace.stream`) raise."""

from __future__ import annotations

import json
import re
from typing import Any

try:  # orjson parses large traces several times faster than the standard library
    import orjson as _fast_json
except ImportError:  # pragma: no cover - depends on the environment
    _fast_json = None

JSON_ERRORS = (ValueError, UnicodeDecodeError)  # orjson.JSONDecodeError subclasses ValueError
# orjson's nesting limit; Chrome/Kineto traces nest a handful of levels.
MAX_DEPTH = 1024
WHITESPACE = b" \t\r\n"
BOM = b"\xef\xbb\xbf"
_TEXT = "of its JSON text (after decompression)"
NON_SPACE = re.compile(rb"[^ \t\r\n]")


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


def dump_document(doc: dict[str, Any]) -> bytes:
    """Serialise a trace document to compact JSON bytes."""
    return dumps_compact(doc)


# --------------------------------------------------------------------------- JSON errors, in words
_MSGSPEC_BYTE = re.compile(r"\(byte (\d+)\)")
_PARSER_POSITION = re.compile(r"\s*\(byte \d+\)|: line \d+ column \d+ \(char \d+\)")


def error_offset(err: BaseException, data: bytes) -> int | None:
    """Where in `data` a JSON parser stopped (len(data) when it ran out of input); None when unknown."""
    text = str(err)
    if isinstance(err, UnicodeDecodeError) or "UTF-8" in text:
        try:
            bytes(data).decode("utf-8")
        except UnicodeDecodeError as bad:
            return bad.start
        return None
    if "truncated" in text:  # msgspec: the input ended inside a value
        return len(data)
    found = _MSGSPEC_BYTE.search(text)
    if found:
        return int(found.group(1))
    pos = getattr(err, "pos", None)  # orjson and json count characters, not bytes
    if not isinstance(pos, int):
        return None
    if data.isascii():
        return pos
    return len(bytes(data).decode("utf-8", "surrogateescape")[:pos].encode("utf-8", "surrogateescape"))


def too_deep(err: BaseException) -> bool:
    """True when a JSON parser gave up because of nesting depth."""
    return isinstance(err, RecursionError) or "depth limit" in str(err)


def deep_error(source: str, where: int | None) -> ValueError:
    """The one error for JSON nested too deeply, on every reading path."""
    near = f" (near byte {where:,} {_TEXT})" if where is not None else ""
    return ValueError(
        f"{source} nests JSON arrays or objects more than {MAX_DEPTH} levels deep{near}. Trace events "
        "nest a handful of levels: this is a damaged file or not a trace."
    )


def not_json(source: str, reason: str | BaseException, where: int | None = None) -> ValueError:
    """The error for text that is not valid JSON, with the byte offset where parsing stopped."""
    if isinstance(reason, BaseException):
        said = str(reason)
        if where is not None:  # the parser's own position counts from the start of a slice: drop it
            said = _PARSER_POSITION.sub("", said)
        reason = f"{type(reason).__name__}: {said[:200]}"
    near = f" near byte {where:,} {_TEXT}" if where is not None else ""
    return ValueError(
        f"{source} is not a JSON trace: invalid JSON{near} ({reason}). Expected a Chrome/Kineto trace as "
        "written by torch.profiler's export_chrome_trace; a damaged or cut-short file (an interrupted "
        "write or copy) also ends up here."
    )


def check_document(doc: Any, source: str) -> dict[str, Any]:
    """`doc` as a trace document (a bare list of events is wrapped); ValueError when it is not one."""
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        keys = sorted(doc)[:8] if isinstance(doc, dict) else type(doc).__name__
        raise ValueError(
            f"{source} is JSON but not a trace: it has no 'traceEvents' list (found {keys}). "
            "Expected a Chrome/Kineto trace as written by torch.profiler's export_chrome_trace."
        )
    return doc


_EVENTS_KEY = re.compile(rb'"traceEvents"[ \t\r\n]*:')
_ESCAPED_KEY = re.compile(rb'\\u[0-9a-fA-F]{4}[^"\\]*"[ \t\r\n]*:')  # a key spelled with an escape
_KEY_TOKEN = re.compile(rb'"((?:[^"\\]|\\.)*)"([ \t\r\n]*:)?|[\[\]{}]', re.S)


def events_key_count(data: bytes) -> int:
    """How many top-level ``traceEvents`` keys `data` holds: a parser keeps the last of two equal keys, the
    streamed reader meets the first, so a second one must be found."""
    if len(_EVENTS_KEY.findall(data)) < 2 and not _ESCAPED_KEY.search(data):
        return 1
    depth = count = 0
    for m in _KEY_TOKEN.finditer(data):
        if m.group(1) is None:  # a bracket
            depth += 1 if data[m.start()] in (0x5B, 0x7B) else -1
        elif depth == 1 and m.group(2) is not None:
            key = m.group(1)
            count += key == b"traceEvents" or (b"\\" in key and _loads(b'"' + key + b'"') == "traceEvents")
    return count


def two_event_lists(source: str) -> ValueError:
    """The one error for a document with two top-level ``traceEvents`` keys, on every reading path."""
    return ValueError(
        f"{source} has two top-level 'traceEvents' keys: which list is the trace is ambiguous (JSON "
        "readers keep one or the other without a word), so it is refused. Keep one list: a file "
        "written by torch.profiler has exactly one."
    )


def check_start(data: bytes, source: str, where: int) -> None:
    """A trace is a JSON object or a list: anything else is refused from its first byte."""
    if data[:1] not in (b"{", b"["):
        raise not_json(source, f"it starts with {bytes(data[:16])!r}, not '{{' or '['", where)


def parse_document(data: bytes, source: str = "<bytes>", base: int = 0) -> dict[str, Any]:
    """Parse trace JSON into a document with a ``traceEvents`` list (a bare list of events is wrapped);
    `base` is where `data` starts in the file, for byte offsets in errors."""
    if data[:3] == BOM:
        data, base = data[3:], base + 3
    first = NON_SPACE.search(data)
    if first is None:
        raise ValueError(f"{source} is empty: no trace events to read")
    check_start(data[first.start() : first.start() + 16], source, base + first.start())
    try:
        doc = _loads(data)
    except RecursionError as err:
        raise deep_error(source, None) from err
    except JSON_ERRORS as err:
        where = error_offset(err, data)
        where = None if where is None else base + where
        if too_deep(err):
            raise deep_error(source, where) from err
        raise not_json(source, err, where) from err
    doc = check_document(doc, source)
    if isinstance(doc, dict) and data[first.start() : first.start() + 1] == b"{" and events_key_count(data) > 1:
        raise two_event_lists(source)
    return doc
