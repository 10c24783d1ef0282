"""How the course times code, one way everywhere: medians, so a call paused by another process does not move it."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from ..checks import bounded_int, check_callable
from .device import synchronize, wait_device

# Upper bounds on repetitions: a typo such as repeats=10**9 must fail fast, not run for hours.
MAX_REPEATS = 100_000


def time_per_call(fn: Callable, *inputs: Any, repeats: int = 20, warmup: int = 3, grad: bool = False) -> float:
    """Median wall-clock seconds of ``fn(*inputs)``, synchronising after every call (``no_grad`` unless `grad`)."""
    check_callable(fn)
    repeats, warmup = bounded_int("repeats", repeats, 1, MAX_REPEATS), bounded_int("warmup", warmup, 0, MAX_REPEATS)
    device = wait_device(fn, inputs)
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


def time_end_to_end(fn: Callable, *inputs: Any, iters: int = 50, rounds: int = 1) -> dict[str, float]:
    """Wall time per call in us: back to back with one synchronise (``nosync_us``; also CUDA events), each call
    synchronised (``sync_us``), and the host's enqueue time per call; the median of `rounds` back-to-back loops."""
    check_callable(fn)
    iters = bounded_int("iters", iters, 1, MAX_REPEATS)
    rounds = bounded_int("rounds", rounds, 1, MAX_REPEATS // iters)
    device = wait_device(fn, inputs)
    with torch.no_grad():
        fn(*inputs)
        synchronize(device)
        measured = [_back_to_back(fn, inputs, iters, device) for _ in range(rounds)]
        out = {key: statistics.median(m[key] for m in measured) for key in measured[0]}
        out["sync_us"] = time_per_call(fn, *inputs, repeats=iters, warmup=0) * 1e6
    return out


def _back_to_back(fn: Callable, inputs: tuple, iters: int, device: torch.device | None) -> dict[str, float]:
    """One round of `iters` calls without a synchronise between them (see time_end_to_end)."""
    out: dict[str, float] = {}
    events = None
    if device is not None and device.type == "cuda":
        events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        events[0].record()
    start = time.perf_counter()
    for _ in range(iters):
        fn(*inputs)
    enqueued = time.perf_counter()
    if events is not None:
        events[1].record()
    synchronize(device)
    out["nosync_us"] = (time.perf_counter() - start) / iters * 1e6
    out["enqueue_us"] = (enqueued - start) / iters * 1e6
    if events is not None:
        out["nosync_events_us"] = events[0].elapsed_time(events[1]) * 1e3 / iters
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


def readable_seconds(seconds: float) -> str:
    """``2.2 s``, ``12 ms``, ``0.34 ms``: one decimal of seconds from a second up, else milliseconds (two digits
    under 10 ms), so no time reads as ``0.00 s`` or ``1.00e-03``."""
    if seconds >= 1:
        return f"{seconds:.1f} s"
    return f"{seconds * 1e3:.0f} ms" if seconds >= 0.01 else f"{seconds * 1e3:.2g} ms"
