"""Lesson 08's speedup answer under load: the taught model applied to the learner's own trace is right even when
the profiled step shared its time otherwise than the unprofiled one (an H100 pass beside a busy test suite:
LM head 16 % of the profiled step, measured speedup 1.37-1.41), and the naive and tempting formulas stay wrong."""

from __future__ import annotations

from helpers.lessons import nb08_variant as variant
from helpers.lessons.exercises import RIGHT, WRONG
from helpers.lessons.nb08 import EXERCISES

SHARE, ROUNDS = 0.16, [1.37, 1.39, 1.41, 1.40, 1.38]


def grade(speedup: float, fix: str = "last logits", model: float | None = 1 / (1 - SHARE)):
    EXERCISES.reset()
    return variant.check_variant(EXERCISES, "lm_head", SHARE, "lm_head", fix, speedup, ROUNDS, model)


def test_the_taught_model_from_the_trace_is_right_and_says_it_missed():
    taught = 1 / (1 - SHARE)
    part, fix, speedup = grade(round(taught, 3))
    assert (fix.status, speedup.status) == (RIGHT, RIGHT)
    assert "model gives 1.19" in speedup.message and "missed" in speedup.message
    assert grade(1.39)[2].status == RIGHT  # the measurement itself stays right


def test_naive_and_tempting_formulas_are_wrong():
    assert grade(1 + SHARE)[2].status == WRONG  # naive: 1 + share, a few % under the model
    assert grade(1 / SHARE)[2].status == WRONG  # tempting: 1 / share
    # without a model (an old caller), only the measured rounds count
    assert grade(round(1 / (1 - SHARE), 3), model=None)[2].status == WRONG


def test_a_model_value_with_the_wrong_fix_is_still_the_wrong_pair():
    fix, speedup = grade(1 / (1 - SHARE), fix="compile")[1:]
    assert (fix.status, speedup.status) == (WRONG, WRONG) and "graded with its fix" in speedup.message
