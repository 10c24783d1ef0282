"""A display that depends on several answers stays hidden until all are right or revealed, and its placeholder
names every answer still needed; right messages start their explanation as a sentence; a kernel's wrong result
reads as the kernel's, not as a quote of the learner."""

from __future__ import annotations

import pytest

from helpers.lessons import exercises as ex


def _book() -> ex.Exercises:
    return ex.Exercises(
        "99", a=ex.Exercise("first", explain="one per block."), b=ex.Exercise("second", explain="it sleeps.")
    )


def test_the_placeholder_names_each_unanswered_key():
    book = _book()
    book.check("a", 1, 2)
    book.check("b", 1, 2)
    hidden = book.evidence(("a", "b"), "table")
    text = hidden._repr_markdown_()
    assert "`nb99.reveal('a')`" in text and "`nb99.reveal('b')`" in text and "your answers are" in text
    book.reveal("a")
    text = repr(book.evidence(("a", "b"), "table"))
    assert "nb99.reveal('b')" in text and "nb99.reveal('a')" not in text and "your answer is" in text
    assert book.check("b", 2, 2).ok
    assert book.evidence(("a", "b"), "table") == "table"


def test_one_key_still_works_and_empty_calls_are_refused():
    book = _book()
    book.check("a", 1, 2)
    assert "nb99.reveal('a')" in repr(book.evidence("a", "x"))
    with pytest.raises(TypeError):
        book.evidence(("a",))
    with pytest.raises(TypeError):
        book.evidence((), "x")


def test_right_messages_capitalise_the_explanation():
    book = _book()
    assert book.check("a", 5, 5).message == "the measurement agrees: 5. One per block."
    assert ex.check("q", 1, 1, explain="every weight.").message == "the profile agrees: 1. Every weight."


def test_a_kernel_result_is_stated_not_quoted():
    fb = ex.check(
        "k",
        "relative error 1.0e-01 on a [37, 341] float32 input, above the limit of 1e-04",
        "matches",
        source="reference",
        subject="your kernel",
        explain="check the formula.",
    )
    assert fb.status == ex.WRONG
    assert fb.message == (
        "Your kernel: relative error 1.0e-01 on a [37, 341] float32 input, above the limit of 1e-04. Check the formula."
    )
    assert "you said" not in fb.message
