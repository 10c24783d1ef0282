"""The course's timing functions (helpers/measure/timing.py): what each reports, and where it refuses."""

from __future__ import annotations

import time

import pytest
import torch
from support import requires_cuda

from benchmarks.common import time_graphed
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


def test_graphed_needs_cuda_inputs() -> None:
    with pytest.raises(ValueError, match="CUDA graphs"):
        time_graphed(torch.mm, torch.ones(2, 2), torch.ones(2, 2))
    with pytest.raises(ValueError, match="iters"):
        time_graphed(torch.mm, torch.ones(2, 2), iters=0)


@requires_cuda
def test_graphed_replays_the_same_kernels() -> None:
    a = torch.randn(1024, 1024, device="cuda")
    g = time_graphed(torch.mm, a, a, iters=10, calls_per_graph=3)
    assert g["graphed_us"] > 0 and g["max_abs_diff"] == 0
    assert g["graphed_us"] <= timing.time_per_call(torch.mm, a, a) * 1e6  # no host work, no synchronise
