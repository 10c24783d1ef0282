"""Lesson 04 keeps "back to back" (the guess) and "synchronised" (the pay-back) apart, and names why a synchronised
compiled call is slower only when the kernel times show it (numbers of the H100 run 17 review, row N1)."""

import pytest

from helpers.lessons import nb04
from helpers.lessons.exercises import Tie
from helpers.measure.compile_costs import FirstCall

# cell 29/30 of the H100 run: kernels per call from the profile, synchronised rounds
KERNEL = {"eager": 252.83, "compiled": 231.62}
SYNC = {"eager": [303.0, 305.0, 307.0, 308.0, 310.0], "compiled": [340.0, 341.0, 343.0, 343.0, 347.0]}
FIRST = FirstCall(first_s=20.0, later_s=0.000343, fx_cache={})


def test_the_guess_and_its_title_say_back_to_back():
    assert nb04.EXERCISES.book["compiled_faster_end_to_end"].title == "compiled faster back to back"
    tie = nb04.end_to_end_why({"eager": "GPU", "compiled": "GPU"}, None, Tie("close"))
    assert "faster back to back" in tie and "end to end" not in tie


def test_payback_says_synchronised_and_why_only_with_kernel_times():
    text = nb04.payback(FIRST, SYNC, (), KERNEL)
    assert "a synchronised compiled call is not faster here" in text and "end to end" not in text
    assert "Its kernels take less time (232 against 253 us" in text
    assert "waits 111 us beyond its kernels compiled against 54 us eager" in text
    bare = nb04.payback(FIRST, SYNC)
    assert "synchronised compiled call is not faster" in bare and "host work" not in bare


def test_sync_host_clause_is_silent_when_the_kernels_explain_it():
    assert nb04.sync_host_clause({"eager": 200.0, "compiled": 240.0}, {"eager": 300.0, "compiled": 340.0}) == ""
    assert nb04.sync_host_clause(KERNEL, {"eager": 340.0, "compiled": 300.0}) == ""
    with pytest.raises(ValueError, match="'compiled' and 'eager'"):
        nb04.sync_host_clause({"eager": 1.0}, {"eager": 1.0, "compiled": 2.0})
    with pytest.raises(ValueError, match="kernel_us"):
        nb04.sync_host_clause({"eager": float("nan"), "compiled": 1.0}, {"eager": 1.0, "compiled": 2.0})
