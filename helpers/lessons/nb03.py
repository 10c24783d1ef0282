"""Lesson 03, The GeGLU MLP, eager: what this notebook alone uses (its exercises, their explanations and hints, its views)."""

from __future__ import annotations

from .exercises import Exercises

EXERCISES = Exercises("03")
check, hint, summary = EXERCISES.check, EXERCISES.hint, EXERCISES.summary
assert_all_correct, reset = EXERCISES.assert_all_correct, EXERCISES.reset
