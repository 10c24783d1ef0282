"""A small builder of Kineto traces for the diagnosis tests: events whose answers are known by construction."""

from __future__ import annotations

import json
from pathlib import Path

import helpers

PID, TID = 100, 1


class Kineto:
    """Collects events; `cpu`, `launch` and `sync` return the new event so tests can read its times."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.corr = 0

    def x(self, name: str, cat: str, ts: float, dur: float, pid=PID, tid=TID, **args) -> dict:
        e = {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}
        self.events.append(e)
        return e

    def cpu(self, name: str, ts: float, dur: float, tid: int = TID, **args) -> dict:
        return self.x(name, "cpu_op", ts, dur, tid=tid, **args)

    def step(self, n: int, ts: float, dur: float) -> dict:
        return self.x(f"ProfilerStep#{n}", "user_annotation", ts, dur)

    def launch(
        self,
        kernel: str,
        call_ts: float,
        call_dur: float,
        kernel_ts: float,
        kernel_dur: float,
        stream: int = 7,
        call: str = "cudaLaunchKernel",
        cat: str = "kernel",
        tid: int = TID,
        **kernel_args,
    ) -> dict:
        """A launch call on the host and the device work it issued (returns the device event)."""
        self.corr += 1
        c = self.corr
        self.x(call, "cuda_runtime", call_ts, call_dur, tid=tid, correlation=c, **{"External id": c})
        return self.x(kernel, cat, kernel_ts, kernel_dur, pid=0, tid=stream, correlation=c, device=0, stream=stream,
                      **{"External id": c}, **kernel_args)  # fmt: skip

    def runtime(self, name: str, ts: float, dur: float, tid: int = TID) -> int:
        """A runtime call (returns its correlation id)."""
        self.corr += 1
        self.x(name, "cuda_runtime", ts, dur, tid=tid, correlation=self.corr, **{"External id": self.corr})
        return self.corr

    def sync_record(self, kind: str, corr: int, ts: float, dur: float, stream: int = -1, **args) -> dict:
        """A ``cuda_sync`` record of the GPU side of a synchronisation (torch >= 2.1 writes these)."""
        return self.x(kind, "cuda_sync", ts, dur, pid=0, tid=stream, correlation=corr, stream=stream, device=0,
                      cuda_sync_kind=kind, **args)  # fmt: skip

    def memory(self, ts: float, nbytes: int, addr: int, total: int, device_type: int = 1, device: int = 0) -> dict:
        """A ``[memory]`` instant event (profile_memory=True): an allocation (`nbytes` > 0) or a free."""
        e = {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "ts": ts, "pid": PID, "tid": TID,
             "args": {"Total Reserved": total, "Total Allocated": total, "Bytes": nbytes, "Device Id": device,
                      "Device Type": device_type, "Addr": addr}}  # fmt: skip
        self.events.append(e)
        return e

    def write(self, path: Path, **doc) -> Path:
        path.write_text(json.dumps({"traceEvents": self.events, **doc}))
        return path

    def load(self, tmp_path: Path, name: str = "synthetic.json", **doc) -> helpers.trace.Trace:
        return helpers.load_trace(self.write(tmp_path / name, **doc))
