"""A CUDA allocator snapshot (``torch.cuda.memory._dump_snapshot``) read safely, as tables. No torch.

A snapshot is a pickle, and ``pickle.load`` runs whatever code the file names: here the unpickler
refuses every class and function (plain data needs none) and files past a size limit.
"""

from __future__ import annotations

import io
import os
import pickle
from typing import Any

import pandas as pd

from .files import as_path, check_file

MAX_SNAPSHOT_BYTES = 1 << 30  # a snapshot of a full 141 GB GPU with stacks is hundreds of MB
SEGMENT_COLUMNS = [
    "device", "address", "total_size", "allocated_size", "active_size", "segment_type", "stream", "blocks",
]  # fmt: skip
BLOCK_COLUMNS = ["device", "segment_address", "address", "size", "requested_size", "state", "frame"]
ACTION_COLUMNS = ["device", "index", "action", "addr", "size", "stream", "time_us", "frame"]


class _PlainDataUnpickler(pickle.Unpickler):
    """An unpickler that builds only dicts, lists, tuples, sets, strings, bytes and numbers."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"the file asks for {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("the file asks for a persistent object")


def read_snapshot(path: str | os.PathLike, max_bytes: int = MAX_SNAPSHOT_BYTES) -> dict[str, Any]:
    """The snapshot dict of a ``torch.cuda.memory._dump_snapshot`` pickle, without running anything in the file.

    Refuses (ValueError) a file over `max_bytes`, a pickle that needs any class or function (a
    snapshot needs none: such a file is not a snapshot, or is hostile), and a pickle that is not
    a dict with a ``segments`` list.
    """
    p = as_path(path)
    check_file(p)
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise ValueError(f"max_bytes must be a positive number of bytes, got {max_bytes!r}")
    size = p.stat().st_size
    if size > max_bytes:
        raise ValueError(
            f"{str(p)!r} holds {size:,} bytes, more than max_bytes={max_bytes:,}: a damaged file, or a real "
            "snapshot that big reads with read_snapshot(path, max_bytes=...)"
        )
    with open(p, "rb") as fh:
        data = fh.read(max_bytes + 1)
    try:
        snapshot = _PlainDataUnpickler(io.BytesIO(data)).load()
    except pickle.UnpicklingError as err:
        if "asks for" in str(err):
            raise ValueError(
                f"{str(p)!r} was refused: {err}. A memory snapshot holds only dicts, lists, strings and "
                "numbers, so this file is not one (or was made to run code when loaded); nothing in it was run."
            ) from None
        raise ValueError(f"{str(p)!r} is not a readable pickle ({err}): a damaged or cut-short file?") from None
    except (EOFError, ValueError, TypeError, IndexError, KeyError, OverflowError, MemoryError) as err:
        raise ValueError(
            f"{str(p)!r} is not a readable pickle ({type(err).__name__}: {err}): a damaged or cut-short file?"
        ) from None
    return _check_snapshot(snapshot, repr(str(p)))


def _check_snapshot(snapshot: Any, source: str) -> dict[str, Any]:
    if not isinstance(snapshot, dict) or not isinstance(snapshot.get("segments"), list):
        found = sorted(map(str, snapshot))[:8] if isinstance(snapshot, dict) else type(snapshot).__name__
        raise ValueError(
            f"{source} is not a CUDA memory snapshot: expected a dict with a 'segments' list (found {found}). "
            "Write one with torch.cuda.memory._dump_snapshot(path)."
        )
    return snapshot


def _as_snapshot(snapshot: dict[str, Any] | str | os.PathLike) -> dict[str, Any]:
    if isinstance(snapshot, (str, os.PathLike)):
        return read_snapshot(snapshot)
    return _check_snapshot(snapshot, "the snapshot")


def _dicts(values: Any) -> list[dict]:
    return [v for v in values if isinstance(v, dict)] if isinstance(values, list) else []


def _frame(entry: dict) -> str:
    """The innermost recorded frame that asked, as 'file:line name' ('' when none was recorded)."""
    frames = _dicts(entry.get("frames"))
    if not frames:
        return ""
    f = frames[0]
    return f"{f.get('filename', '?')}:{f.get('line', '?')} {f.get('name', '')}".strip()


def snapshot_segments(snapshot: dict[str, Any] | str | os.PathLike) -> pd.DataFrame:
    """One row per segment (a ``cudaMalloc``'d region): sizes in bytes, ``blocks`` = how many blocks it is split into.

    `snapshot`: the dict from :func:`read_snapshot`, or the pickle's path.
    """
    segments = _dicts(_as_snapshot(snapshot)["segments"])
    rows = [
        {
            "device": s.get("device"),
            "address": s.get("address"),
            "total_size": s.get("total_size"),
            "allocated_size": s.get("allocated_size"),
            "active_size": s.get("active_size"),
            "segment_type": s.get("segment_type"),
            "stream": s.get("stream"),
            "blocks": len(_dicts(s.get("blocks"))),
        }
        for s in segments
    ]
    return pd.DataFrame(rows, columns=SEGMENT_COLUMNS)


def snapshot_blocks(snapshot: dict[str, Any] | str | os.PathLike) -> pd.DataFrame:
    """One row per block: its segment, address, ``size`` (rounded), ``requested_size``, ``state``
    (``active_allocated``, ``active_awaiting_free``, ``inactive``) and the frame that allocated it."""
    rows = [
        {
            "device": s.get("device"),
            "segment_address": s.get("address"),
            "address": b.get("address"),
            "size": b.get("size"),
            "requested_size": b.get("requested_size"),
            "state": b.get("state"),
            "frame": _frame(b),
        }
        for s in _dicts(_as_snapshot(snapshot)["segments"])
        for b in _dicts(s.get("blocks"))
    ]
    return pd.DataFrame(rows, columns=BLOCK_COLUMNS)


def snapshot_actions(snapshot: dict[str, Any] | str | os.PathLike) -> pd.DataFrame:
    """One row per allocator action recorded in ``device_traces`` (``_record_memory_history``):
    ``action`` (alloc, free_requested, free_completed, segment_alloc, segment_free, oom, snapshot), sizes in bytes."""
    traces = _as_snapshot(snapshot).get("device_traces")
    rows = [
        {
            "device": device,
            "index": i,
            "action": e.get("action"),
            "addr": e.get("addr"),
            "size": e.get("size"),
            "stream": e.get("stream"),
            "time_us": e.get("time_us"),
            "frame": _frame(e),
        }
        for device, trace in enumerate(traces if isinstance(traces, list) else [])
        for i, e in enumerate(_dicts(trace))
    ]
    return pd.DataFrame(rows, columns=ACTION_COLUMNS)
