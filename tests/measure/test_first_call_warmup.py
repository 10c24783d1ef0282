"""The "later" call of :func:`time_first_call` is a normal call: the first calls after a compile, which still pay
one-time set-up (on an H100 they read 0.69 ms where section 6b's synchronised calls took 293 us), are not timed."""

from __future__ import annotations

import time

import torch

from helpers.measure import compile_costs as cc


def _settling_call(first_s: float, settling_s: float, settled_s: float, settling_calls: int):
    calls = []

    def fn(x: torch.Tensor) -> torch.Tensor:
        calls.append(None)
        n = len(calls)
        time.sleep(first_s if n == 1 else settling_s if n <= 1 + settling_calls else settled_s)
        return x

    return fn, calls


def test_later_calls_are_timed_after_warm_up():
    # the on-screen ratio, scaled tenfold so a sleep can time it: 0.69 ms settling, 0.293 ms settled
    fn, calls = _settling_call(0.05, 0.0069, 0.00293, settling_calls=3)
    first = cc.time_first_call(fn, torch.zeros(2), later=5, progress=False)
    assert first.later_s < 0.005
    assert len(calls) == 1 + 5 + 5  # the first call, the warm-up, the timed calls


def test_no_warm_up_times_the_settling_calls():
    fn, _ = _settling_call(0.05, 0.0069, 0.00293, settling_calls=3)
    assert cc.time_first_call(fn, torch.zeros(2), later=5, warmup=0, progress=False).later_s > 0.005


def test_the_frame_says_how_the_later_call_was_timed():
    note = (
        cc.FirstCall(first_s=2.2, later_s=0.000293, fx_cache={}).as_frame().set_index("what").loc["later call (median)"]
    )
    assert "warm-up" in note["note"] and "synchronised" in note["note"]
