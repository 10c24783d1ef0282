"""The profiler's ``[memory]`` events, read while a trace loads: one row per allocation or free, as
numpy columns (``TraceTables.memory``); :mod:`helpers.trace.memory_view` says what they mean.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .columns import Codes, float_array, int_array
from .links import MISSING_ID as _MISSING

MEMORY_EVENT = "[memory]"
# The args read from a [memory] event: column -> key.
MEMORY_ARGS = {
    "addr": "Addr",
    "bytes": "Bytes",
    "total_allocated": "Total Allocated",
    "total_reserved": "Total Reserved",
    "device_type": "Device Type",
    "device_id": "Device Id",
}
MEMORY_COLUMNS = ["ts", "pid", "tid", *MEMORY_ARGS, "device"]
# torch's c10::DeviceType numbers for the devices a trace names (ROCm builds report CUDA's number)
_DEVICE_KINDS = {0: "CPU", 1: "GPU", 6: "GPU", 12: "XPU", 13: "MPS", 19: "MTIA"}
SKIPPED_NOTE = "'[memory]' events without a numeric 'ts' or 'Bytes' (an allocation cannot be placed without them)"

MEMORY_KEY = b'"[memory]"'  # a slice of JSON text without it holds no memory event


def memory_decoder(event_cls: Any, args_cls: Any) -> Any:
    """A msgspec decoder for slices that hold ``[memory]`` events, so only those pay for the extra fields."""
    import msgspec  # only called where the loader found msgspec

    fields = [(col, int, msgspec.field(default=_MISSING, name=key)) for col, key in MEMORY_ARGS.items()]
    args = msgspec.defstruct(f"{args_cls.__name__}WithMemory", fields, bases=(args_cls,), gc=False)
    event = msgspec.defstruct(
        f"{event_cls.__name__}WithMemory", [("args", args | None, None)], bases=(event_cls,), gc=False
    )
    return msgspec.json.Decoder(list[event])


def device_label(device_type: int, device_id: int) -> str:
    """'CPU', 'GPU 0' ... from torch's device type number and index (as the profiler writes them)."""
    kind = _DEVICE_KINDS.get(int(device_type))
    if kind == "CPU":
        return "CPU"
    if kind is None:
        kind = f"device type {int(device_type)}"
    return f"{kind} {int(device_id)}" if device_id >= 0 else kind


class MemoryEvents:
    """Collects the ``[memory]`` instant events of a trace, slice by slice, as numpy columns."""

    def __init__(self) -> None:
        self.pids = Codes()
        self.tids = Codes()
        self.parts: list[dict[str, np.ndarray]] = []
        self.skipped = 0

    def add_typed(self, events: list) -> None:
        """Add the ``[memory]`` events among typed records (see :mod:`helpers.trace.builder`)."""
        mem = [e for e in events if e.ph == "i" and e.name == MEMORY_EVENT and e.args is not None]
        if not mem:
            return
        args = [e.args for e in mem]
        # getattr's default: a name spelled with escapes reaches here decoded without the memory fields
        part: dict[str, Any] = {col: [getattr(a, col, _MISSING) for a in args] for col in MEMORY_ARGS}
        self._add([e.ts for e in mem], [e.pid for e in mem], [e.tid for e in mem], part)

    def add_dicts(self, events: list[dict]) -> None:
        """Add the ``[memory]`` events among event dicts (the loader's path for unusual field types)."""
        mem = [e for e in events if e.get("ph") == "i" and e.get("name") == MEMORY_EVENT]
        if not mem:
            return
        args = [a if isinstance(a := e.get("args"), dict) else {} for e in mem]
        part = {col: [a.get(key, _MISSING) for a in args] for col, key in MEMORY_ARGS.items()}
        self._add([e.get("ts") for e in mem], [e.get("pid", "") for e in mem], [e.get("tid", "") for e in mem], part)

    def _add(self, ts: list, pids: list, tids: list, values: dict[str, list]) -> None:
        out: dict[str, np.ndarray] = {
            "ts": float_array(ts),
            "pid": self.pids.encode(pids),
            "tid": self.tids.encode(tids),
        }
        for col, vals in values.items():
            out[col], out[col + "_na"] = int_array(vals)
        self.parts.append(out)

    def frame(self) -> pd.DataFrame | None:
        """The table (sorted by time, ties in file order), or None when the trace holds no ``[memory]`` event."""
        if not self.parts:
            return None
        parts, self.parts = self.parts, []
        cols = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        keep = np.isfinite(cols["ts"]) & ~cols["bytes_na"]
        self.skipped = int((~keep).sum())
        order = np.flatnonzero(keep)
        order = order[np.argsort(cols["ts"][order], kind="stable")]
        pid_table = np.array([str(v) for v in self.pids.values()] or [""], dtype=object)
        tid_table = np.array([str(v) for v in self.tids.values()] or [""], dtype=object)
        out: dict[str, Any] = {"ts": cols["ts"][order], "pid": pid_table[cols["pid"][order]]}
        out["tid"] = tid_table[cols["tid"][order]]
        for col in MEMORY_ARGS:
            out[col] = pd.arrays.IntegerArray(cols[col][order], cols[col + "_na"][order])
        dtype = out["device_type"].to_numpy(dtype=np.int64, na_value=0)
        did = out["device_id"].to_numpy(dtype=np.int64, na_value=-1)
        # one label per distinct (type, index), not per row
        pairs, inverse = np.unique(np.stack([dtype, did]), axis=1, return_inverse=True)
        labels = np.array([device_label(t, i) for t, i in pairs.T] or ["CPU"], dtype=object)
        out["device"] = labels[inverse.reshape(-1)] if len(order) else np.zeros(0, dtype=object)
        return pd.DataFrame(out, columns=MEMORY_COLUMNS)
