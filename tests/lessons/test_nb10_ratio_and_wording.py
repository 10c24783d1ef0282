"""Lesson 10's wording around live numbers, fed the rounds an H100 gave (two passes on a shared GPU)."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers import nb10


def test_the_profiler_ratio_comes_with_its_range_and_a_warning_when_noisy():
    # pass A: profiled rounds from 15.4 to 77 ms, one below every unprofiled round
    noisy = nb10.ratio_text([19192, 17888, 20267, 17452, 26562], [39598, 24112, 57725, 15407, 77058])
    assert "unprofiled_ratio = 0.48" in noisy and "middle halves" in noisy and "spans 2.4x" in noisy
    # pass B-like: tight rounds
    quiet = nb10.ratio_text([19000, 19200, 18900, 19100, 19050], [26000, 26200, 25900, 26100, 26050])
    assert "unprofiled_ratio = 0.73" in quiet and "noise" not in quiet
    with pytest.raises(ValueError):
        nb10.ratio_text([1.0, 1.0, 1.0], [0.0, 0.0, 0.0])


def _findings(bound: float) -> pd.DataFrame:
    return pd.DataFrame(
        {"rule": ["unfused_optimizer"], "saving_upper_bound_us": [bound], "time_us": [bound / 2]}
    ).assign(**{"evidence": ["x"]})


def test_a_right_method_whose_bound_missed_says_so_in_its_message():
    nb10.reset()
    findings = _findings(5506.0)
    before = [11642.0, 10848.0, 16172.0, 10393.0, 11000.0, 11500.0, 12000.0]
    after = [b - 3404.0 for b in before]  # the saving measured: 3,404 us, outside 25% of 5,506
    fb = nb10.check_saving("first_saving", 5506.0, before, after, findings, problem="optimizer")
    assert fb.ok and "bound missed the measurement" in str(fb)
    after = [b - 5400.0 for b in before]
    held = nb10.check_saving("first_saving", 5506.0, before, after, findings, problem="optimizer")
    assert held.ok and "bound missed" not in str(held)
    nb10.reset()


def test_a_ratio_range_reaching_above_one_is_explained_as_noise_not_a_faster_profiled_step():
    wide = nb10.ratio_text([3000, 2800, 5200, 3100, 6000], [5000, 4100, 5300, 4900, 5100])
    assert "above 1" in wide and "never does" in wide
    assert "above 1" not in nb10.ratio_text([19000, 19200, 18900, 19100, 19050], [26000, 26200, 25900, 26100, 26050])
