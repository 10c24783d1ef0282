"""A hint asked for after an answer does not say "not answered yet", and the lesson's summary keeps
who asked for an answer with reveal() (a learner probe of lesson 09 found both)."""

from __future__ import annotations

from helpers.lessons import exercises as ex


def _book() -> ex.Exercises:
    return ex.Exercises("99", q=ex.Exercise("a question", hint="count the buckets"), r=ex.Exercise("another"))


def test_a_hint_is_a_hint_not_a_verdict():
    book = _book()
    book.check("q", 3, 3)
    shown = book.hint("q")
    assert shown.status == ex.HINT and shown.status != ex.MISSING
    assert 'data-status="hint"' in shown._repr_html_() and "count the buckets" in shown.message
    # asking for the hint leaves the verdict the answer earned
    assert book.summary().set_index("exercise").loc["a question", "status"] == ex.RIGHT


def test_the_summary_says_which_answers_were_revealed():
    book = _book()
    book.check("q", 4, 3)
    book.check("r", 1, 1)
    assert book.reveal("q").message == "the answer: 3."
    table = book.summary().set_index("exercise")
    assert list(table.columns) == ["status", "revealed", "message"]
    assert table.loc["a question", "revealed"] and table.loc["a question", "status"] == ex.WRONG
    assert not table.loc["another", "revealed"]
    book.reset()
    assert not book.summary()["revealed"].any()
