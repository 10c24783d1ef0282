"""profile() refuses what would grow without limit or measure nothing (issue 13, items 4 and 11)."""

from __future__ import annotations

import pytest
import torch

import helpers


def limited(calls: int = 50):
    """A function that fails after `calls` calls: a profile that ignored its bounds stops here, fast."""
    count = [0]

    def fn(x: torch.Tensor) -> torch.Tensor:
        count[0] += 1
        if count[0] > calls:
            raise AssertionError(f"called {count[0]} times: the step bound was not checked before running")
        return x * 2

    return fn


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"steps": 10**9}, r"steps=1,000,000,000 is more than 100: every profiled step keeps all its events"),
        ({"steps": 101}, "is more than 100"),
        ({"warmup": 10**9}, r"warmup=1,000,000,000 is more than 1,000: warm-up calls only"),
    ],
)
def test_unbounded_steps_are_refused_before_anything_runs(kwargs, match):
    with pytest.raises(ValueError, match=match) as info:
        helpers.profile(limited(), torch.ones(4), **kwargs)
    assert "helpers.time_per_call" in str(info.value)


def test_the_largest_warm_up_still_profiles():
    trace = helpers.profile(limited(calls=10**6), torch.ones(4), steps=2, warmup=1000)
    assert len(trace.steps) == 2


def test_a_model_on_the_meta_device_is_refused_not_labelled_cpu():
    model = torch.nn.Linear(8, 4, device="meta")
    with pytest.raises(ValueError, match="'meta' device: meta tensors have shapes but no data"):
        helpers.profile(model, torch.ones(2, 8, device="meta"))
    with pytest.raises(ValueError, match="meta"):
        helpers.profile(lambda x: x + 1, torch.ones(2, device="meta"))
