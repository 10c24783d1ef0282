"""Lesson 04's sentences that a reviewer found arguing past their numbers, fed synthetic numbers for each branch: a
tied end-to-end check argues no side, a synchronised call exposes only the host's work before the first kernel, and
the autotuning note says what it compares."""

from __future__ import annotations

from helpers import nb04
from helpers.lessons.exercises import Tie

GPU = {"eager": "GPU", "compiled": "GPU"}


def test_a_tied_end_to_end_check_argues_no_side():
    tie = nb04.end_to_end_why(GPU, {"eager": 178.0, "compiled": 220.0}, Tie("too close to call"))
    assert "cannot tell which of the two is faster" in tie and "saves device time" not in tie
    assert "the GPU set the pace of both" in tie and "As the check says" not in tie
    mixed = nb04.end_to_end_why({"eager": "GPU", "compiled": "CPU"}, None, Tie("too close to call"))
    assert "the CPU that of compiled" in mixed and "waited" not in mixed
    # a recording is not this run: it is named as such, and why it cannot decide is said
    recorded = nb04.end_to_end_why(GPU, None, Tie("too close to call"), recorded=True)
    assert recorded.startswith("In the recording, the GPU set the pace of both") and " here" not in recorded
    assert "one number per variant" in recorded
    # a decided check keeps its explanation
    assert "saves device time" in nb04.end_to_end_why(GPU, None, True)


def test_synchronised_exposes_only_the_host_work_before_the_first_kernel():
    text = nb04.synchronised_sentence({"compiled": 242.0, "eager": 270.0}, {"compiled": 298.0, "eager": 291.0})
    assert "298 us compiled, 291 us eager" in text and "before the first kernel starts" in text
    assert "host work on top" not in text
    slowed = nb04.synchronised_sentence({"compiled": 320.0, "eager": 270.0}, {"compiled": 298.0, "eager": 291.0})
    assert "(other work, or its clocks) slowed those rounds" in slowed and "before the first kernel" not in slowed


def test_autotune_note_says_what_it_compares():
    same = nb04.autotune_note(232.0, 232.4, "H200")
    assert "as fast as in the trace" in same
    assert "against 205 us here" in nb04.autotune_note(205.0, 232.0, "H200")
