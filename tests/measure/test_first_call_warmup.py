"""The "later" call of :func:`time_first_call` is a normal call: the first calls after a compile, which still pay
one-time set-up (on an H100 they read 0.69 ms where section 6b's synchronised calls took 293 us), are not timed."""

from __future__ import annotations

import types

import pytest
import torch

from helpers.measure import compile_costs as cc
from helpers.measure import timing

FIRST_S, SETTLING_S, SETTLED_S = 2.2, 0.00069, 0.000293


@pytest.fixture
def settling_call(monkeypatch):
    """A call whose cost a fake clock advances: the compile, three settling calls, then settled calls."""
    clock = {"now": 0.0, "calls": 0}
    fake = types.SimpleNamespace(perf_counter=lambda: clock["now"])
    monkeypatch.setattr(timing, "time", fake)
    monkeypatch.setattr(cc, "time", fake)

    def fn(x: torch.Tensor) -> torch.Tensor:
        clock["calls"] += 1
        n = clock["calls"]
        clock["now"] += FIRST_S if n == 1 else SETTLING_S if n <= 4 else SETTLED_S
        return x

    return fn, clock


def test_later_calls_are_timed_after_warm_up(settling_call):
    fn, clock = settling_call
    first = cc.time_first_call(fn, torch.zeros(2), later=5, progress=False)
    assert first.later_s == pytest.approx(SETTLED_S)
    assert clock["calls"] == 1 + 5 + 5  # the first call, the warm-up, the timed calls


def test_no_warm_up_times_the_settling_calls(settling_call):
    fn, _ = settling_call
    assert cc.time_first_call(fn, torch.zeros(2), later=5, warmup=0, progress=False).later_s == pytest.approx(
        SETTLING_S
    )


def test_the_frame_says_how_the_later_call_was_timed():
    frame = cc.FirstCall(first_s=FIRST_S, later_s=SETTLED_S, fx_cache={}).as_frame().set_index("what")
    note = frame.loc["later call (median)", "note"]
    assert "warm-up" in note and "synchronised" in note
