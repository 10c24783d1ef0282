"""The learner copies of lessons 04-06 do not show a solution: not in an answer cell, not in the source
of the check cell the learner runs, and no explanation text (those live in helpers.nbNN, shown once
an answer is given).

The copies are made by ``scripts/make_learner_copies.py`` (its ``make_learner_copies``), as a
workshop makes them.
"""

from __future__ import annotations

import ast
import importlib
import re
import string

import nbformat
import pytest
from make_learner_copies import SOLUTION_TAG

from helpers.paths import NOTEBOOKS_DIR

LESSONS = ("04_torch_compile", "05_hand_tuned_kernels", "06_writing_fused_kernels")


@pytest.fixture(scope="module")
def copies(learner_copies):
    return {name: nbformat.read(learner_copies / f"{name}.ipynb", as_version=4) for name in LESSONS}


def _literal_assignments(source: str) -> dict[str, object]:
    """name -> value for every top-level `name = <literal>` of a cell (expressions are skipped)."""
    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return out


def _answers(name: str) -> list[tuple[int, dict[str, object]]]:
    """(index of the solution cell, the answers it blanks in the learner copy) for each exercise cell."""
    nb = nbformat.read(NOTEBOOKS_DIR / f"{name}.ipynb", as_version=4)
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or SOLUTION_TAG not in cell.metadata.get("tags", []):
            continue
        solved = _literal_assignments(cell.source)
        learner = cell.metadata.get("learner_source")
        kept = _literal_assignments(learner) if learner else {}
        # an input the learner chooses (kept as it is in the copy) is not an answer
        out.append((i, {k: v for k, v in solved.items() if kept.get(k, object()) != v}))
    return out


def _pattern(value: object) -> re.Pattern:
    if isinstance(value, (bool, int)):
        # a small number is in any code: look for it where a check would state it
        return re.compile(rf"(?:expected\s*=|==|\bis)\s*{re.escape(repr(value))}(?![\w.])")
    if isinstance(value, str):
        return re.compile(re.escape(value), re.IGNORECASE)
    return re.compile(re.escape(repr(value)))


@pytest.mark.parametrize("name", LESSONS)
def test_no_answer_is_written_in_the_learner_copy(copies, name):
    copy = copies[name]
    code = [c.source for c in copy.cells if c.cell_type == "code"]
    for _, answers in _answers(name):
        for var, value in answers.items():
            for source in code:
                assigned = _literal_assignments(source) if source.strip() else {}
                assert assigned.get(var, None) is None or assigned[var] != value, f"{name}: {var} = {value!r} shown"


@pytest.mark.parametrize("name", LESSONS)
def test_the_check_cells_do_not_state_the_solution(copies, name):
    copy = copies[name]
    # the learner copy has one more cell at the top (its banner); cell i of the lesson is cell i + 1 here
    offset = len(copy.cells) - len(nbformat.read(NOTEBOOKS_DIR / f"{name}.ipynb", as_version=4).cells)
    for i, answers in _answers(name):
        for var, value in answers.items():
            if value is None:
                continue
            # the cells after the answer, down to the one that checks it
            for cell in copy.cells[i + offset + 1 :]:
                if cell.cell_type != "code":
                    continue
                checks_it = re.search(rf"\b{re.escape(var)}\b", cell.source) and "check" in cell.source
                if checks_it:
                    assert not _pattern(value).search(cell.source), f"{name}: the check of {var} states {value!r}"
                    break


@pytest.mark.parametrize("name", LESSONS)
def test_explanations_stay_in_the_lesson_module(copies, name):
    book = importlib.import_module(f"helpers.lessons.nb{name[:2]}").EXERCISES.book
    text = "\n".join(c.source for c in copies[name].cells)
    assert len(book) >= 3
    for key, exercise in book.items():
        for field in (exercise.explain, exercise.hint):
            # the longest piece of the text without a {field}: what would show if it were pasted in a cell
            pieces = [lit for lit, *_ in string.Formatter().parse(field) if lit]
            longest = max(pieces, key=len, default="")
            if len(longest) > 30:
                assert longest not in text, f"{name}: the text of {key!r} stands in the notebook"
