"""Lesson 10's saving checks read without a stutter or a contradiction: the title says the method is graded, the
message says, after the method verdict, whether the bound held (numbers of an H100 run, review run 15)."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers.lessons import nb10


@pytest.fixture(autouse=True)
def _fresh_book():
    nb10.reset()
    yield
    nb10.reset()


FINDINGS = pd.DataFrame({"rule": ["unfused_optimizer"], "saving_upper_bound_us": [7690.0], "time_us": [782.6]})
BEFORE = [16088.0, 15095.0, 16121.0, 15500.0, 16300.0, 15900.0, 16050.0, 15800.0, 16200.0]
AFTER = [t - 5150.0 for t in BEFORE]  # the fix saved 5,150 us every round: the bound of 7,690 us missed


def test_a_right_method_whose_prediction_missed_says_so_without_a_stutter():
    fb = nb10.check_saving("first_saving", 7690.0, BEFORE, AFTER, FINDINGS, ratio=0.77)
    assert fb.status == "right"
    assert repr(fb).startswith("[right] method for the first fix's saving: you predicted 7,690 us, the bound")
    assert "missed the measurement by 2,540 us" in fb.message and "the bound held" not in fb.message
    assert "right right" not in fb._repr_html_() and "right method" not in fb.message


def test_a_right_method_whose_prediction_held_says_it_held():
    fb = nb10.check_saving("first_saving", 5200.0, BEFORE, AFTER, FINDINGS.assign(saving_upper_bound_us=[5200.0]))
    assert repr(fb).startswith("[right] method for the first fix's saving: you predicted 5,200 us")
    assert "the bound held against the measurement" in fb.message


def test_a_wrong_method_that_lands_close_is_accepted_without_being_told_it_held():
    # the finding's time_us instead of its bound: accepted only because the measurement cannot tell them apart
    fb = nb10.check_saving("first_saving", 5150.0, BEFORE, AFTER, FINDINGS)
    assert fb.status == "too close to call"
    assert fb.message.startswith("not the method this exercise grades") and "held" not in fb.message
