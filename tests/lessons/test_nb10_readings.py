"""Lesson 10's notes on readings a shared machine moves, fed the numbers an H100 run gave beside three other
notebooks (so the GPU branches are tested on a CPU)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from helpers.lessons import nb10, rounds
from helpers.lessons.nb08_live import two_readings_note as nb08_name


def test_the_shared_two_readings_note_keeps_lesson_08s_name():
    assert nb08_name is rounds.two_readings_note
    with pytest.raises(ValueError):
        rounds.two_readings_note("x", math.nan, "a", 1.0, "b")


def test_a_later_step_reading_is_noted_against_the_furthest_earlier_one():
    # the planted step: 18,236 us in section 3, 19,536 us in the first fix's rounds, 11,922 us with all the loops
    note = nb10.later_reading_note("the planted step", {"in section 3": 18236.0, "first": 19536.0}, 11922.0, "here")
    assert "19,536 us first against 11,922 us here" in note and "(1.6x)" in note and "range" in note
    assert nb10.later_reading_note("the planted step", {"in section 3": 18236.0}, 19536.0, "here") == ""
    with pytest.raises(ValueError):
        nb10.later_reading_note("x", {}, 1.0, "here")
    with pytest.raises(ValueError):
        nb10.later_reading_note("x", {"a": 0.0}, 1.0, "here")


def test_two_savings_of_one_fix_are_noted_past_a_fifth_apart_whatever_their_sign():
    # fp32: -3,517 us in section 4, -1,939 us in the table
    note = nb10.two_savings_note("the saving of fixing fp32", -3517.0, "in section 4", -1939.0, "in this table")
    assert "-3,517 us in section 4 against -1,939 us in this table" in note and "not even" not in note
    # the cause is not known: the note says what changed, not that other work ran
    assert "cannot check" in note and "shared with other work" not in note
    assert "not even of one sign" in nb10.two_savings_note("s", -300.0, "a", 400.0, "b")
    assert nb10.two_savings_note("s", 1000.0, "a", 900.0, "b") == ""
    assert nb10.two_savings_note("s", 0.0, "a", 0.0, "b") == ""


def test_a_ratio_above_one_scales_nothing():
    assert nb10.scaled_bound(4658.0, 1.14) != nb10.scaled_bound(4658.0, 1.14)  # NaN
    assert nb10.scaled_bound(5372.0, 0.81) == pytest.approx(4351.32)
    with pytest.raises(ValueError):
        nb10.scaled_bound(1.0, 0.0)
    s = {"median": 2000.0, "q1": 1500.0, "q3": 2500.0}
    assert "not used to scale" in nb10.scaling_note(4658.0, 1.14, s)


def test_the_verdict_on_scaling_leaves_out_rows_it_could_not_scale():
    fixes = pd.DataFrame(
        {
            "fix": ["fp32", "pointwise", "item"],
            "predicted_us": [5372.0, 4658.0, 352.0],
            "held": [False, True, True],
            "scaled_us": [4351.0, math.nan, 143.0],
            "scaled_held": [False, False, True],
        }
    )
    text = nb10.scaling_verdict(fixes)
    assert "1 of the 2 non-zero predictions" in text and "pointwise: not scaled" in text
    only = fixes.iloc[[1]]
    assert nb10.scaling_verdict(only).startswith("pointwise: not scaled")


def test_a_right_method_says_first_whether_its_prediction_held():
    missed = nb10.right_method_message(5372.0, {"median": -3517.0, "q1": -3664.0, "q3": -1777.0, "step": 19536.0})
    assert "missed the measurement by 8,889 us" in missed
    held = nb10.right_method_message(352.0, {"median": 75.0, "q1": -130.0, "q3": 824.0, "step": 7124.0})
    assert held.endswith("the bound held against the measurement.")


def _path() -> pd.DataFrame:
    # two ~3 ms launches on a path of 18,169 us, where the same call averages about 25 us in the trace
    return pd.DataFrame(
        {
            "name": ["cudaLaunchKernelExC", "cudaLaunchKernelExC", "gemm", "gemm", "aten::mul", "gap"],
            "duration_us": [3050.0, 3029.8, 160.0, 158.0, 300.0, 38.1],
        }
    )


def test_outlier_pieces_on_the_path_are_named():
    medians = {"cudaLaunchKernelExC": 20.5, "gemm": 159.0, "aten::mul": 15.0}
    text = nb10.outlier_pieces_text(_path(), medians, 18169.0)
    assert "`cudaLaunchKernelExC`: 2 pieces of 6,080 us together (33 % of the path" in text
    assert "20.5 us" in text and "gemm" not in text and "one-off" in text
    # a far piece holding under 2 % of the path changes no reading
    assert "aten::mul" not in text
    assert nb10.outlier_pieces_text(_path(), {"gemm": 159.0}, 18169.0) == ""
    with pytest.raises(ValueError):
        nb10.outlier_pieces_text(_path(), medians, 0.0)
    with pytest.raises(TypeError):
        nb10.outlier_pieces_text(pd.DataFrame({"x": [1]}), medians, 1.0)


def test_call_medians_read_every_event_of_a_name():
    events = pd.DataFrame({"name": ["a", "a", "a", "b"], "dur": [1.0, 2.0, 30.0, 5.0]})
    assert nb10.call_medians(events, ["a", "c"]) == {"a": 2.0}
    with pytest.raises(TypeError):
        nb10.call_medians(pd.DataFrame({"name": ["a"]}), ["a"])
