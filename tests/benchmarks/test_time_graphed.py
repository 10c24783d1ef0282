"""benchmarks.common.time_graphed: a CUDA graph's replay timed against the same calls launched one by one."""

from __future__ import annotations

import pytest
import torch
from support import requires_cuda

from benchmarks.common import time_graphed
from helpers.measure import timing


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
