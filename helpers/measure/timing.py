"""How the course times code: one way, used by every notebook, benchmark and ceiling.

- :func:`time_per_call`: median wall time of one call followed by a synchronise (the CPU side and
  the device side both count: whichever is slower sets the time). Medians, not means: one call
  paused by another process must not move the number.
- :func:`time_end_to_end`: the same, plus calls issued back to back without a synchronise (the
  device queue then hides the CPU's launch work, as in a real loop).
- :func:`time_device`: median device time of a region from CUDA events (what the ceilings use).

Kernel time (what the profiler reports) and end-to-end time differ by the host's work: Python,
dispatch, launch calls, guards. The lessons report both, side by side.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from ..checks import bounded_int, check_callable
from .device import device_of, synchronize

# Upper bounds on repetitions: a typo such as repeats=10**9 must fail fast, not run for hours.
MAX_REPEATS = 100_000


def time_per_call(fn: Callable, *inputs: Any, repeats: int = 20, warmup: int = 3, grad: bool = False) -> float:
    """Median wall-clock seconds of ``fn(*inputs)``, synchronising after every call.

    Runs under ``no_grad`` unless `grad`. `warmup` calls run first and are not timed.
    """
    check_callable(fn)
    repeats, warmup = bounded_int("repeats", repeats, 1, MAX_REPEATS), bounded_int("warmup", warmup, 0, MAX_REPEATS)
    device = device_of(inputs)
    times = []
    with torch.set_grad_enabled(grad):
        for _ in range(warmup):
            fn(*inputs)
        synchronize(device)
        for _ in range(repeats):
            start = time.perf_counter()
            fn(*inputs)
            synchronize(device)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def time_end_to_end(fn: Callable, *inputs: Any, iters: int = 50) -> dict[str, float]:
    """Wall time per call in microseconds, two ways.

    ``nosync_us``: `iters` calls issued back to back, one synchronise at the end, divided by
    `iters` (the device queue overlaps the host's launch work with the device's work);
    ``sync_us``: median of `iters` calls each followed by a synchronise. On CUDA the back-to-back
    loop is also timed with CUDA events (``nosync_events_us``).
    """
    check_callable(fn)
    iters = bounded_int("iters", iters, 1, MAX_REPEATS)
    device = device_of(inputs)
    with torch.no_grad():
        fn(*inputs)
        synchronize(device)
        out: dict[str, float] = {}
        events = None
        if device is not None and device.type == "cuda":
            events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            events[0].record()
        start = time.perf_counter()
        for _ in range(iters):
            fn(*inputs)
        if events is not None:
            events[1].record()
        synchronize(device)
        out["nosync_us"] = (time.perf_counter() - start) / iters * 1e6
        if events is not None:
            out["nosync_events_us"] = events[0].elapsed_time(events[1]) * 1e3 / iters
        out["sync_us"] = time_per_call(fn, *inputs, repeats=iters, warmup=0) * 1e6
    return out


def time_device(fn: Callable[[], Any], repeats: int = 10, warmup: int = 3) -> float:
    """Median seconds of ``fn()`` on the current CUDA device, each run between two CUDA events."""
    check_callable(fn)
    repeats, warmup = bounded_int("repeats", repeats, 1, MAX_REPEATS), bounded_int("warmup", warmup, 0, MAX_REPEATS)
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
    for start, end in pairs:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in pairs) / 1e3
