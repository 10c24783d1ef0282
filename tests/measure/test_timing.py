"""The course's timing functions (helpers/measure/timing.py): what each reports, and where it refuses."""

from __future__ import annotations

import time

import pytest
import torch

from helpers.measure import timing


def test_end_to_end_reports_host_time_per_call() -> None:
    a = torch.randn(64, 64)
    out = timing.time_end_to_end(torch.mm, a, a, iters=5)
    assert set(out) >= {"nosync_us", "sync_us", "enqueue_us"}
    # on a CPU the work runs inline: issuing the calls is the whole time
    assert 0 < out["enqueue_us"] <= out["nosync_us"]


def test_end_to_end_rounds_report_the_median_round() -> None:
    calls = []

    def slow_first_round(x):
        calls.append(1)
        # the first round (calls 2-4, after one warm-up call) is slow, as if another process held the device
        time.sleep(0.02 if 2 <= len(calls) <= 4 else 0.0)
        return x

    out = timing.time_end_to_end(slow_first_round, torch.ones(1), iters=3, rounds=3)
    assert len(calls) == 1 + 3 * 3 + 3  # warm-up, 3 rounds of 3, then 3 synchronised calls
    assert out["nosync_us"] < 5_000  # the median round, not the slow one (20,000 us per call)
    with pytest.raises(ValueError, match="rounds"):
        timing.time_end_to_end(torch.mm, torch.ones(2, 2), torch.ones(2, 2), iters=10, rounds=10**6)
