"""How much memory one call allocates at its peak, on a GPU or a CPU, measured one way per device.

- CUDA: the caching allocator's own counters (``torch.cuda.max_memory_allocated`` after
  ``reset_peak_memory_stats``), minus what was allocated before the call.
- CPU: there are no such counters, so the call runs once under ``torch.profiler`` with
  ``profile_memory=True``; every allocation and free is an event with its size, and the peak is
  the highest running total.

Both count what the call allocates and still holds at its peak, its output included; memory held
before the call (weights, inputs) is not counted. Used by notebook 07 to show that the fused
attention kernels never allocate the ``[seq, seq]`` score matrix.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..checks import check_callable
from .device import device_of, synchronize


def _cpu_peak(fn: Callable, inputs: tuple) -> int:
    with tempfile.TemporaryDirectory(prefix="course-memory-") as tmp:
        path = Path(tmp) / "trace.json"
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
            fn(*inputs)
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text()).get("traceEvents", [])
    running, peak = 0, 0
    for event in sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e.get("ts", 0)):
        args = event.get("args", {})
        if args.get("Device Type", 0) != 0:  # CPU allocations only
            continue
        running += int(args.get("Bytes", 0))
        peak = max(peak, running)
    return peak


def peak_memory(fn: Callable, *inputs: Any) -> int:
    """Peak bytes allocated by one call of ``fn(*inputs)`` (under ``no_grad``), beyond what was held before.

    The device is the inputs' (CPU when they hold no tensor).
    """
    check_callable(fn)
    device = device_of(inputs) or torch.device("cpu")
    with torch.no_grad():
        if device.type == "cuda":
            synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
            before = torch.cuda.memory_allocated(device)
            fn(*inputs)
            synchronize(device)
            return int(torch.cuda.max_memory_allocated(device) - before)
        return _cpu_peak(fn, inputs)
