"""Lesson 02, `nn.Linear` and the `addmm` epilogue: what this notebook alone uses (its exercises, their explanations and hints, its views)."""

from __future__ import annotations

from .exercises import Exercises

EXERCISES = Exercises("02")
check, hint, summary = EXERCISES.check, EXERCISES.hint, EXERCISES.summary
assert_all_correct, reset = EXERCISES.assert_all_correct, EXERCISES.reset
