"""An exercise says where its expected value comes from, and the feedback says so: a value computed
by arithmetic or checked against a reference is not "measured" (lesson 06); others keep their words."""

from __future__ import annotations

import pytest

from helpers.lessons import exercises as ex
from helpers.lessons import nb06


def _book(source: str | None) -> ex.Exercises:
    kw = {} if source is None else {"source": source}
    return ex.Exercises("99", q=ex.Exercise("a question", **kw))


def test_measured_is_the_default_wording():
    book = _book(None)
    assert book.check("q", 3, 3).message.startswith("the measurement agrees: 3")
    assert "does not match the measurement" in book.check("q", 4, 3).message


@pytest.mark.parametrize(
    ("source", "right", "wrong"),
    [
        ("computed", "the computation agrees", "the computed value"),
        ("reference", "the reference agrees", "the reference"),
    ],
)
def test_computed_and_reference_values_are_not_called_measured(source, right, wrong):
    book = _book(source)
    ok, bad = book.check("q", 3, 3), book.check("q", 4, 3)
    assert ok.status == ex.RIGHT and ok.message.startswith(right) and "measure" not in ok.message
    assert bad.status == ex.WRONG and f"does not match {wrong}" in bad.message and "measure" not in bad.message


def test_an_unknown_source_is_refused():
    with pytest.raises(ValueError, match="source must be one of"):
        ex.Exercise("a question", source="guessed")
    with pytest.raises(ValueError, match="source must be one of"):
        ex.check("q", 1, 1, source="guessed")


def test_the_old_check_never_names_the_answer_after_a_wrong_try():
    assert ex.check("q", 1, 2).message.startswith("you said 1; that does not match the measurement")
    assert ex.check("q", 1, 2, source="reference").message.startswith("you said 1; that does not match the reference")
    assert "2" not in ex.check("q", 1, 2, source="reference").message


def test_lesson_06_arithmetic_and_kernel_checks_do_not_say_measured():
    book = nb06.EXERCISES.book
    assert {k: book[k].source for k in ("bytes_saved", "predicted_speedup", "gate_tiles_at_128")} == dict.fromkeys(
        ("bytes_saved", "predicted_speedup", "gate_tiles_at_128"), "computed"
    )
    assert book["my_geglu_kernel"].source == "reference"
    assert book["kept"].source == "measured"  # counted from a live backward's saved tensors

    def wrong(gate, up, out):
        out.zero_()

    try:
        message = nb06.check_geglu_kernel(wrong).message
    finally:
        nb06.reset()
    assert "reference" in message and "measured" not in message and "profile" not in message


def test_lessons_07_and_08_call_their_computed_answers_computed():
    from helpers.lessons import nb07, nb08

    # the causal share is counted from the mask, the replayed step from a formula on the traces: no measurement
    assert nb07.EXERCISES.book["causal_fraction"].source == "computed"
    assert nb08.EXERCISES.book["graph_step"].source == "computed"
    try:
        message = nb07.check("causal_fraction", 0.502, 0.502).message
    finally:
        nb07.reset()
    assert message.startswith("the computation agrees") and "measure" not in message
