"""Lesson 08's memory-peak exercise when the profiler loses track of the activations (seen on an H100: they
showed as 'unknown'): the check cannot grade a category then, and says why instead of calling the taught answer
wrong."""

from __future__ import annotations

import pandas as pd

from helpers.lessons import nb08
from helpers.lessons.exercises import RIGHT, UNDECIDED, WRONG
from helpers.measure.memory import CATEGORIES


def timeline(**mb: float) -> pd.DataFrame:
    row = {c: [0, int(mb.get(c, 0) * 1e6)] for c in CATEGORIES}
    t = pd.DataFrame({"time_us": [0.0, 1.0], **row})
    t["total"] = t[list(CATEGORIES)].sum(axis=1)
    t.attrs["profiles"] = 3
    return t


def test_the_largest_labelled_category_is_graded():
    t = timeline(parameters=700, **{"optimizer state": 1300, "activations": 2400})
    assert nb08.largest_at_peak(t) == "activations"
    nb08.reset()
    assert nb08.check("memory_peak", "activations", expected=nb08.largest_at_peak(t)).status == RIGHT
    assert nb08.check("memory_peak", "optimizer state", expected=nb08.largest_at_peak(t)).status == WRONG


def test_an_unlabelled_peak_is_not_graded_and_says_why():
    t = timeline(parameters=700, **{"optimizer state": 1300, "unknown": 2400})
    expected = nb08.largest_at_peak(t)
    nb08.reset()
    fb = nb08.check("memory_peak", "activations", expected=expected)
    assert fb.status == UNDECIDED and "2,400 MB" in fb.message and "3 profiles" in fb.message
