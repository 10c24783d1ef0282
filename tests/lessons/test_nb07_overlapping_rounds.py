"""Lesson 07's causal table on a CPU: a length whose causal and full rounds overlap is named as one this run
cannot order (a learner probe saw causal 84-105 ms against full 75-123 ms read against 'expect near 0.75')."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers.lessons import nb07


def _table(causal, full):
    return pd.DataFrame([nb07.readings.causal_timing_row(1024, {"causal": causal, "full": full}, 0.5)])


def test_overlapping_rounds_are_named_with_their_ranges():
    sentence = nb07.readings.overlapping_rounds_sentence(_table([84.07, 90.0, 105.0], [74.66, 95.0, 123.0]))
    assert "seq 1024 (causal 84.07-105.00 ms, full 74.66-123.00 ms)" in sentence
    assert "cannot tell the two apart" in sentence


def test_rounds_apart_say_nothing():
    assert nb07.readings.overlapping_rounds_sentence(_table([60.0, 61.0, 62.0], [80.0, 81.0, 83.0])) == ""


def test_a_table_without_the_column_is_refused():
    with pytest.raises(ValueError, match="rounds_overlap"):
        nb07.readings.overlapping_rounds_sentence(pd.DataFrame({"seq": [1024]}))
