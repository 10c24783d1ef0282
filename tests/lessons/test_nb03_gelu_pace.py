"""Lesson 03's CPU verdict on the GeLU's pace, from rounds of timings (the H200 host's oversubscribed numbers too)."""

from __future__ import annotations

import pytest
import torch

from helpers import nb03


def test_equal_times_are_flagged_not_read_as_memory_bound():
    # the H200 host at 16 threads: copy, mul and gelu all took one scheduler tick, ~8000 us
    msg = nb03.gelu_pace([8000.4, 7999.0, 8001.2], [8001.1, 8000.0, 7998.8], [7999.0, 8000.5, 8001.0])
    assert "same time" in msg and "keeps up" not in msg and "arithmetic of the tanh" not in msg


def test_the_verdict_follows_the_rounds():
    copy, mul = [40.0, 42.0, 41.0], [60.0, 61.0, 62.0]
    assert "arithmetic of the tanh" in nb03.gelu_pace(copy, [300.0, 310.0, 305.0], mul)
    assert "keeps up" in nb03.gelu_pace(copy, [44.0, 45.0, 46.0], mul)
    # a slow round puts the ratio across 2: no verdict
    assert "no verdict" in nb03.gelu_pace(copy, [70.0, 75.0, 90.0], mul)


def test_gelu_pace_rejects_too_few_rounds():
    with pytest.raises(ValueError, match="at least 3"):
        nb03.gelu_pace([1.0, 2.0], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="positive"):
        nb03.gelu_pace([1.0, 2.0, float("nan")], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0])


def test_one_thread_restores_the_count():
    before = torch.get_num_threads()
    with nb03.one_thread():
        assert torch.get_num_threads() == 1
        rounds = nb03.call_rounds({"add": lambda: torch.ones(8) + 1}, rounds=3, repeats=2, warmup=2)
    assert torch.get_num_threads() == before
    assert len(rounds["add"]) == 3 and min(rounds["add"]) > 0
