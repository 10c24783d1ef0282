"""Lesson 08's notes on readings a shared GPU disturbed, fed synthetic numbers for each branch."""

from __future__ import annotations

import pytest

from helpers.lessons import nb08_live as live


def test_the_lowest_reading_is_used_and_a_wide_spread_noted():
    value, note = live.lowest_reading("the eager decode step", [29955.0, 9800.0, 9600.0])
    assert value == 9600.0 and "disagree" in note and "use the lowest" in note
    value, note = live.lowest_reading("the eager decode step", [9700.0, 9600.0])
    assert value == 9600.0 and note == ""
    with pytest.raises(ValueError):
        live.lowest_reading("x", [])


def test_a_speedup_from_disagreeing_readings_is_a_range():
    assert live.speedup_text([9574.0], [4237.0]) == "2.3x"
    text = live.speedup_text([29955.0, 9574.0], [2428.0, 4237.0])
    assert text.startswith("between 2.3x and 12.3x") and "did not run alike" in text
    with pytest.raises(ValueError):
        live.speedup_text([1.0], [0.0])


def test_a_step_above_its_upper_bound_is_flagged():
    note = live.above_bound_note("the graphed step", 3113.0, 4236.6, "in this benchmark run")
    assert note.startswith(" The graphed step measured in this benchmark run, 4,237 us, is above")
    assert "did not run alike while it was timed" in note
    assert live.above_bound_note("the graphed step", 3113.0, 2428.0, "here") == ""


def test_a_kernel_time_that_moved_is_called_out():
    note = live.kernel_time_moved_note("the graphed step's kernels", 2151.0, "in section 4", 3801.65, "here")
    assert "The kernel time itself moved" in note and "(1.77x)" in note and "cannot check" in note
    assert live.kernel_time_moved_note("k", 2151.0, "a", 2200.0, "b") == ""
    with pytest.raises(ValueError):
        live.kernel_time_moved_note("k", 0.0, "a", 1.0, "b")


def test_a_step_faster_than_its_kernels_is_a_disturbed_run_and_no_verdict():
    unprofiled = {"for-loop": 6978.0, "foreach": 7714.0, "fused": 2592.0}
    kernels = {"for-loop": 8764.0, "foreach": 7292.0, "fused": 3473.0}
    assert live.disturbed_options(unprofiled, kernels) == ["for-loop", "fused"]
    assert "A disturbed run" in live.disturbed_note(unprofiled, kernels)
    assert live.disturbed_note({"foreach": 7714.0}, kernels) == ""
    rounds = {"for-loop": [6577, 6900, 6978, 7000, 7639], "foreach": [7569, 7700, 7714, 7750, 7803]}
    text = live.ranked_with_ties(rounds, disturbed=["for-loop"])
    assert "For-loop and foreach are not ranked: this run was disturbed (a synchronised step shorter" in text
    assert "For-loop is faster than foreach" in live.ranked_with_ties(rounds)


def test_a_gap_far_beyond_the_disturbance_is_ranked_anyway():
    """The H100 run of the review: fused 3x faster, no overlap, yet called "too close to call" before."""
    unprofiled = {"for-loop": 6849.19, "foreach": 6012.49, "fused": 2299.27}
    kernels = {"for-loop": 8091.95, "foreach": 6954.60, "fused": 2029.72}
    assert live.disturbed_options(unprofiled, kernels) == ["for-loop", "foreach"]
    factor = live.disturbance_factor(unprofiled, kernels)
    assert factor == pytest.approx(8091.95 / 6849.19)
    rounds = {
        "for-loop": [6601, 6700, 6849, 7000, 7691],
        "foreach": [5734, 5900, 6012, 6100, 7282],
        "fused": [2247, 2280, 2299, 2330, 2357],
    }
    text = live.ranked_with_ties(rounds, disturbed=["for-loop", "foreach"], disturbance=factor)
    assert "For-loop and foreach are not ranked: this run was disturbed" in text
    assert "fused is faster than for-loop even so (3.0x" in text and "fused is faster than foreach even so" in text
    assert "too close to call" not in text
    assert "1.18x" in live.disturbed_note(unprofiled, kernels) and "too close" not in live.disturbed_note(
        unprofiled, kernels
    )
    assert live.disturbance_factor({"fused": 3000.0}, kernels) == 1.0
    with pytest.raises(ValueError, match="at least 1"):
        live.ranked_with_ties(rounds, disturbed=["fused"], disturbance=0.5)


def test_live_rows_off_the_recording_are_named():
    live_rows = {"train_step_ms": {"eager": 321.8, "course": 856.5, "recompute": 1168.9}}
    recorded = {"train_step_ms": {"eager": 280.3, "course": 284.1, "recompute": 313.4}}
    text = live.live_vs_recorded_text(live_rows, recorded)
    assert "course train_step_ms 2.66x eager here against 1.01x" in text and "recompute" in text
    assert "reading below is of the recording" in text
    same = {"train_step_ms": {"eager": 321.8, "course": 330.0}}
    assert live.live_vs_recorded_text(same, recorded).startswith("Live against recorded: every live row is within")
