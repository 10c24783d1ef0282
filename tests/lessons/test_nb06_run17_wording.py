"""Lesson 06's wording from the H100 run 17 review: one ratio in one direction (N7), "this run" when measured
live (N8); fed the review's numbers."""

import pandas as pd
import pytest

from helpers.lessons import nb06

# cell 37 of the H100 run: per call, us
TIMES = pd.DataFrame(
    {
        "variant": ["eager", "compile", "course-fused"],
        "kernel_us": [253.4, 231.4, 180.0],
        "e2e_sync_us": [287.3, 306.4, 265.4],
        "e2e_nosync_us": [261.9, 234.9, 183.4],
        "host_overhead_us": [33.9, 75.0, 85.5],
        "enqueue_us": [92.8, 142.1, 131.3],
    }
)


def test_the_course_against_compile_is_said_as_a_speed_up():
    assert nb06.speedup_phrase(180.0, 231.4) == "1.29x faster"
    assert nb06.speedup_phrase(265.4, 306.4) == "1.15x faster"
    assert nb06.speedup_phrase(306.4, 265.4) == "1.15x slower"
    with pytest.raises(ValueError, match="b_us"):
        nb06.speedup_phrase(1.0, float("nan"))


def test_the_host_lead_says_single_numbers_once():
    text = nb06.host_lead_sentence(TIMES)
    assert "comes out at 41 us synchronised: the host overheads per call differ by 10 us." in text
    assert text.count("single numbers") == 1


def test_the_margin_says_this_run_when_live():
    live = nb06.sync_margin(TIMES, live=True)
    assert live == {"variant": "eager", "margin_us": pytest.approx(33.9), "where": "this run"}
    assert nb06.sync_margin(TIMES)["where"] == "this recording"
    fb = nb06.check("sync_can_beat_kernels", False, False, details=live)
    assert "The smallest margin in this run: 34 us (eager)." in fb.message
    with pytest.raises(TypeError, match="live"):
        nb06.sync_margin(TIMES, live="yes")
