"""Lesson 09's prefetching guess, graded against the FSDP2 runs' step times by the course's tie rule, on any path:
two H200s' recording (read on a CPU or one GPU) and live GPUs alike."""

import pytest

from helpers.lessons import nb09
from helpers.lessons.exercises import TIE
from helpers.lessons.rounds import Tie


def summary(step_ms: float, steps: list[float]) -> dict:
    ranks = [{"rank": r, "step_ms": steps, "median_step_ms": step_ms} for r in (0, 1)]
    return {"step_ms": step_ms, "ranks": ranks}


def test_the_h200_recording_answers_no():
    # 09 cell 54 on the recording: 62.2 ms with prefetching against 54.2 ms without, spread 5.5 ms
    change = {"change_ms": 8.06, "noise_ms": 5.5, "within_noise": False}
    expected, details = nb09.prefetch_answer(change, "NVIDIA H200, 2026-12-01 (recorded)")
    assert expected is False
    assert details["measured"] == (
        "Without the profiler (NVIDIA H200, 2026-12-01 (recorded)), prefetching changed the step by +8.1 ms, "
        "against a spread of 5.5 ms between the timed steps of one run"
    )
    right = nb09.check("prefetch_faster", False, expected=expected, details=details)
    assert right.ok and "+8.1 ms" in right.message
    assert not nb09.check("prefetch_faster", True, expected=expected, details=details).ok


def test_a_change_inside_the_spread_accepts_both_answers():
    none = summary(54.0, [52.0, 54.0, 56.0, 53.0, 55.0])
    pre = summary(53.5, [51.0, 53.5, 57.0, 52.0, 55.0])
    expected, details = nb09.prefetch_answer(nb09.measured_change(none, pre), "live")
    assert isinstance(expected, Tie)
    for answer in (True, False):
        assert nb09.check("prefetch_faster", answer, expected=expected, details=details).status == TIE
    assert not nb09.check("prefetch_faster", "yes", expected=expected, details=details).ok


def test_a_clear_gain_answers_yes():
    none = summary(60.0, [59.5, 60.0, 60.5, 60.2, 59.8])
    pre = summary(50.0, [49.5, 50.0, 50.5, 50.2, 49.8])
    expected, _ = nb09.prefetch_answer(nb09.measured_change(none, pre), "live")
    assert expected is True


def test_prefetch_answer_rejects_what_is_not_a_measured_change():
    with pytest.raises(ValueError):
        nb09.prefetch_answer({"change_ms": 1.0}, "x")
    with pytest.raises(TypeError):
        nb09.prefetch_answer({"change_ms": 1.0, "noise_ms": 1.0, "within_noise": True}, "")


def test_the_guess_is_marked_a_guess_and_needs_only_an_answer():
    assert nb09.EXERCISES.book["prefetch_faster"].guess
    assert [k for k, ex in nb09.EXERCISES.book.items() if ex.guess] == ["prefetch_faster"]
