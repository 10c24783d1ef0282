"""Lesson 08's transfer exercise: its status lines say which half of the pair (fix, speedup) is wrong without telling
a speedup's verdict before its fix is right, and both printed ends of the accepted range are accepted."""

from __future__ import annotations

import re

from helpers.lessons import nb08_variant as variant
from helpers.lessons.exercises import MISSING, RIGHT, WRONG
from helpers.lessons.nb08 import EXERCISES

ROUNDS = [1.46, 1.40, 1.44, 1.42, 1.45]  # max 1.46: 1.1 x 1.46 = 1.606


def grade(speedup: float, fix: str = "last logits"):
    EXERCISES.reset()
    return variant.check_variant(EXERCISES, "lm_head", 0.3, "lm_head", fix, speedup, ROUNDS, None)


def status_line(fb) -> str:
    return re.search(r"<b>(.*?)</b>", fb._repr_html_()).group(1)


def test_right_fix_wrong_speedup_status_line_says_the_fix_is_right():
    fix, speedup = grade(1.20)[1:]
    assert (fix.status, speedup.status) == (WRONG, WRONG)  # the pair is still one wrong answer
    line = status_line(fix)
    assert line != "variant X: the fix: wrong"
    assert "right fix" in line and "wrong speedup" in line
    assert "the fix is the right one" in fix.message
    # the lesson's summary keeps the exercise's own title, and records the pair as wrong
    row = EXERCISES.summary().set_index("exercise").loc["variant X: the fix"]
    assert row["status"] == WRONG


def test_with_a_wrong_fix_the_speedup_waits_for_it_whatever_its_value():
    # a verdict on the speedup alone would tell the learner whether their number is right
    right, wrong = grade(1.45, fix="compile")[2], grade(3.0, fix="compile")[2]
    assert right.status == wrong.status == WRONG and "graded once the fix is right" in status_line(right)
    assert (status_line(right), right.message) == (status_line(wrong), wrong.message)


def test_a_speedup_without_a_fix_waits_for_the_fix():
    speedup = grade(1.45, fix=None)[2]
    assert speedup.status == MISSING and "write the fix too" in speedup.message and "accepted" not in speedup.message


def test_both_printed_ends_of_the_accepted_range_are_accepted():
    speedup = grade(1.45)[2]
    assert speedup.status == RIGHT
    low, high = map(float, re.search(r"accepted here: ([\d.]+) to ([\d.]+)", speedup.message).groups())
    assert (low, high) == (1.26, 1.60)  # 0.9 x 1.40 = 1.26 exactly stays; 1.606 rounds in to 1.60
    assert grade(low)[2].status == RIGHT and grade(high)[2].status == RIGHT


def test_accepted_ends_round_inward():
    assert variant.accepted_ends(1.2601, 1.6060000000000003) == (1.27, 1.60)
    assert variant.accepted_ends(0.9 * 1.4, 1.1 * 1.5) == (1.26, 1.65)
