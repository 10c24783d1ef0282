"""Reading and writing Chrome/Kineto trace files (``.json`` or ``.json.gz``).

This module only knows about files and JSON documents; turning a document into tables is the job
of :mod:`helpers.events`.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
import zlib
from pathlib import Path
from typing import Any

try:  # orjson parses large traces several times faster than the standard library
    import orjson as _fast_json
except ImportError:  # pragma: no cover - depends on the environment
    _fast_json = None


def _as_path(path: str | os.PathLike) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"expected a file path (str or pathlib.Path), got {type(path).__name__}")
    return Path(path)


def read_bytes(path: str | os.PathLike) -> bytes:
    """The decompressed bytes of a trace file; gzip is detected from the content, not the name."""
    p = _as_path(path)
    if not p.exists():
        raise FileNotFoundError(
            f"trace file {str(p)!r} does not exist. Check the path; reference traces live in the "
            "repository's traces/ folder (see helpers.paths.reference_trace_path)."
        )
    if p.is_dir():
        raise ValueError(f"{str(p)!r} is a folder, not a trace file: pass the .json or .json.gz file inside it")
    data = p.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (EOFError, OSError, zlib.error) as err:
            raise ValueError(
                f"{str(p)!r} is a damaged or truncated gzip file ({err}). Re-download or re-record the trace."
            ) from err
    return data


def parse_document(data: bytes, source: str = "<bytes>") -> dict[str, Any]:
    """Parse trace JSON into a document with a ``traceEvents`` list.

    A bare JSON list of events (allowed by the Chrome trace format) is wrapped into a document.
    """
    if not data.strip():
        raise ValueError(f"{source} is empty: no trace events to read")
    try:
        doc = _fast_json.loads(data) if _fast_json is not None else json.loads(data)
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(
            f"{source} is not a JSON trace ({type(err).__name__}: {str(err)[:200]}). "
            "Expected a Chrome/Kineto trace as written by torch.profiler's export_chrome_trace."
        ) from err
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        keys = sorted(doc)[:8] if isinstance(doc, dict) else type(doc).__name__
        raise ValueError(
            f"{source} is JSON but not a trace: it has no 'traceEvents' list (found {keys}). "
            "Expected a Chrome/Kineto trace as written by torch.profiler's export_chrome_trace."
        )
    return doc


def read_document(path: str | os.PathLike) -> dict[str, Any]:
    """Read and parse a ``.json`` or ``.json.gz`` trace file."""
    return parse_document(read_bytes(path), source=repr(str(path)))


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
