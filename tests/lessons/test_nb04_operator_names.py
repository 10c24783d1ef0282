"""Lesson 04's operator question: a learner who writes the bare name is told the form the trace uses."""

from __future__ import annotations

from helpers.lessons import nb04


def test_a_bare_operator_name_is_wrong_and_the_hint_names_the_aten_form():
    fb = nb04.check("left_of_the_chain", "mm", expected="aten::mm")
    assert not fb.ok and "`aten::...`" in fb.message
    assert nb04.check("left_of_the_chain", "aten::mm", expected="aten::mm").ok
