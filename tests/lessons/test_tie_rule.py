"""The course's one rule for "too close to call" between two timings (helpers.lessons.rounds.too_close), and the one
wording a learner reads when a checker meets it."""

import pytest

from helpers.lessons.exercises import TIE, Exercise, Exercises
from helpers.lessons.rounds import TOO_CLOSE, Spread, Tie, compare_rounds, noise_why, spread_of, too_close

FAST = [10.0, 10.2, 10.4, 10.6, 10.8]  # median 10.4, middle half 10.2-10.6
SLOW = [12.0, 12.2, 12.4, 12.6, 12.8]


def test_a_clear_win_and_a_clear_loss_are_decided_and_say_so():
    assert not too_close(FAST, SLOW) and not too_close(SLOW, FAST)
    v = compare_rounds(FAST, SLOW)
    assert v.a_faster is True and compare_rounds(SLOW, FAST).a_faster is False
    assert "beyond the larger middle-half spread" in v.why()


def test_a_difference_inside_the_larger_spread_is_a_tie():
    wide = [9.0, 10.0, 10.6, 11.5, 12.0]  # median 10.6, middle half 10.0-11.5: the 0.2 apart is inside it
    assert too_close(FAST, wide) and too_close(wide, FAST)
    verdict = compare_rounds(FAST, wide).a_faster
    assert isinstance(verdict, Tie) and "inside the larger middle-half spread" in verdict.why


def test_one_slow_round_does_not_make_a_tie():
    # min-max ranges would overlap here; the quartiles ignore the one round another program slowed
    assert not too_close(FAST, [12.0, 12.2, 12.4, 12.6, 30.0]) and not too_close(FAST, [9.0, *SLOW[1:]])


def test_one_sample_has_no_spread_and_ties():
    assert too_close([10.0], [20.0]) and too_close([10.0, 10.1], SLOW)
    assert "no spread" in noise_why(spread_of([10.0]), spread_of(SLOW))


def test_zero_spread_is_decided_by_any_difference_and_equal_medians_tie():
    assert not too_close([5.0, 5.0, 5.0], [5.1, 5.1, 5.1])
    assert too_close([5.0, 5.0, 5.0], [5.0, 5.0, 5.0])
    # a plain number is a value taken as exact (a prediction): against rounds, their spread decides
    assert too_close(10.5, FAST) and not too_close(11.0, FAST)


def test_bad_rounds_are_refused():
    with pytest.raises(ValueError):
        spread_of([])
    with pytest.raises(ValueError):
        spread_of([1.0, float("nan"), 2.0])
    with pytest.raises(ValueError, match="at least 3 rounds"):
        compare_rounds([1.0], SLOW)
    assert Spread(1.0, 0.5, 2.0, 3).iqr == 1.5


def test_every_checker_tie_reads_the_one_wording():
    book = Exercises("99", race=Exercise("which is faster", explain="because."))
    fb = book.check("race", True, compare_rounds(FAST, [9.0, 10.0, 10.6, 11.5, 12.0]).a_faster)
    assert fb.status == TIE and fb.ok
    assert fb.message.startswith(TOO_CLOSE[0].upper() + TOO_CLOSE[1:]) and "middle-half spread" in fb.message
    number = book.check("race", 3.0, Tie("one run has no spread", float))
    assert number.status == TIE and number.message.startswith("Any number is accepted, and this is why: one run")
    # the status says "too close to call": the message under it never repeats it
    assert "too close to call" not in fb.message.lower() and "too close to call" not in number.message.lower()
    assert book.check("race", "a", Tie("close", str)).message.startswith("Any text is accepted")
    assert repr(fb).startswith("[too close to call] which is faster: Both answers are accepted, and this is why: ")
