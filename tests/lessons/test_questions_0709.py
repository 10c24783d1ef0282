"""Lessons 07-09 ask every question before its answer cell, and keep what gives an answer away below it.

A guess without its question (09 once lost "is more than half of the all-reduce time hidden?" in an
edit) leaves a learner with `more_than_a_third_hidden = None` and nothing to answer. Checked on the full
lessons, whose markdown the learner copies keep as it is.
"""

from __future__ import annotations

import re

import nbformat
import pytest

from helpers.paths import NOTEBOOKS_DIR

LESSONS = ("07", "08", "09")
# words a prompt uses: a question mark, or one of the course's prompt headings and phrasings
ASKS = re.compile(r"\?|guess first|\bpredict\b|your turn|your exercises|### exercise", re.IGNORECASE)


def _cells(number: str) -> list:
    (path,) = NOTEBOOKS_DIR.glob(f"{number}_*.ipynb")
    return nbformat.read(path, as_version=4).cells


def _answers(cells: list) -> list[int]:
    return [i for i, c in enumerate(cells) if "solution" in c.metadata.get("tags", [])]


@pytest.mark.parametrize("number", LESSONS)
def test_every_answer_cell_follows_a_question(number):
    cells = _cells(number)
    answers = _answers(cells)
    assert answers, f"lesson {number} has no answer cell"
    for previous, here in zip([-1, *answers], answers):
        prose = "\n".join(c.source for c in cells[previous + 1 : here] if c.cell_type == "markdown")
        assert ASKS.search(prose), (
            f"lesson {number}: the answer cell {here} ({cells[here].source[:60]!r}) has no question"
        )


def test_09_asks_whether_more_than_a_third_is_hidden_right_before_its_answer():
    cells = _cells("09")
    (here,) = (i for i, c in enumerate(cells) if c.source.startswith("more_than_a_third_hidden ="))
    question = cells[here - 1]
    assert question.cell_type == "markdown" and "waited least" in question.source
    assert "more than a third" in question.source and "every profiled step" in question.source


def _first(cells: list, needle: str) -> int:
    return next(i for i, c in enumerate(cells) if needle in c.source)


def test_07_the_plan_with_the_score_bytes_comes_after_the_score_guess():
    # the plan's bytes per step over its score passes is one division away from the megabytes asked for
    cells = _cells("07")
    assert _first(cells, "score_mb = ") < _first(cells, "nb07.manual_attention_plan(shape")


def test_08_the_recompute_prompt_leaves_the_tensor_count_to_the_learner():
    cells = _cells("08")
    here = _first(cells, "recompute_saves_mb = ")
    prompt = " ".join(c.source for c in cells[here - 3 : here] if c.cell_type == "markdown").lower()
    assert "[tokens, intermediate]" in prompt  # the shape to count is named ...
    assert not re.search(r"\b(four|4)\b[^.]*\[tokens, intermediate\]", prompt)  # ... the count is not


@pytest.mark.parametrize("number", [f"{n:02d}" for n in range(11)])
def test_each_lesson_draws_its_figures_as_pngs_too(number):
    # nbNN.reset() turns the PNGs on (tests/lessons/test_static_figures.py checks that it does)
    first_code = next(c for c in _cells(number) if c.cell_type == "code")
    assert f"nb{number}.reset()" in first_code.source
