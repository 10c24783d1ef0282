"""The committed notebooks follow the course's rules (checked without running them).

- committed without outputs or execution counts;
- self-checking exercises: at least two `solution` cells, each answer read by a later check,
  a `helpers.exercises.reset()` first and an `assert_all_correct()` solution cell last, whose
  learner copy shows `summary()` instead;
- learner copies build, with every solution replaced;
- every reference trace a notebook needs is shipped in traces/ (a cell catching FileNotFoundError
  marks one as optional), and none is a CPU trace.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest
from make_learner_copies import SOLUTION_TAG, SUMMARY_TAG, learner_notebook, make_learner_copies

import helpers
import helpers.lessons.exercises
from helpers.paths import NOTEBOOKS_DIR

NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))
CHECK_CALL = re.compile(r"\bcheck\w*\(")
REFERENCE = re.compile(r"reference_trace_path\(\s*[\"']([^\"']+)[\"']")


def _read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def _code(nb: nbformat.NotebookNode) -> list:
    return [c for c in nb.cells if c.cell_type == "code"]


def _assigned(source: str) -> list[str]:
    """Names a solution cell binds at top level: assignments and function definitions."""
    names = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.append(node.name)
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        for target in targets:
            names += [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
    return names


def _tagged(cell) -> bool:
    return SOLUTION_TAG in cell.get("metadata", {}).get("tags", [])


def test_the_first_four_notebooks_exist():
    names = {p.name for p in NOTEBOOKS}
    assert {
        "00_setup_and_first_trace.ipynb",
        "01_strides_and_views.ipynb",
        "02_linear_and_addmm_epilogue.ipynb",
        "03_geglu_mlp_eager.ipynb",
    } <= names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_without_outputs(path):
    nb = _read(path)
    nbformat.validate(nb)
    dirty = [
        i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count is not None)
    ]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs or execution counts; strip them before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_exercises_are_self_checking(path):
    cells = _code(_read(path))
    book = f"nb{path.name[:2]}"
    assert f"{book}.reset()" in cells[0].source, f"the first code cell resets the lesson's exercises ({book}.reset())"
    final = cells[-1]
    assert _tagged(final) and f"{book}.assert_all_correct()" in final.source
    assert final.metadata.get("learner_source") == f"{book}.summary()"
    answers = [i for i, c in enumerate(cells[:-1]) if _tagged(c)]
    assert len(answers) >= 2, f"{path.name} has {len(answers)} exercises; the course asks for at least two"
    for i in answers:
        # a check cell calls helpers.lessons.exercises.check or a checker built on it (e.g. check_geglu_kernel)
        checks = "\n".join(c.source for c in cells[i + 1 :] if CHECK_CALL.search(c.source))
        names = _assigned(cells[i].source)
        assert names, f"{path.name}: solution cell {i} defines nothing for a check to read"
        assert any(re.search(rf"\b{re.escape(n)}\b", checks) for n in names), (
            f"{path.name}: no answer of solution cell {i} ({names}) reaches a check"
        )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_learner_copy_replaces_every_solution(path):
    nb = _read(path)
    copy = learner_notebook(nb, path.name)
    assert copy.metadata["course"]["solutions_replaced"] == sum(_tagged(c) for c in nb.cells)
    assert not any(_tagged(c) for c in copy.cells)
    originals = [c for c in nb.cells if _tagged(c)]
    replaced = [c.source for c in copy.cells if "exercise" in c.get("metadata", {}).get("tags", [])]
    assert len(replaced) == len(originals)
    for before, after in zip(originals, replaced):
        assert before.source != after
        custom = before.metadata.get("learner_source")
        assert after == custom if custom is not None else after.endswith("= None  # your answer")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_lessons_summary_is_not_in_its_learner_copy(path):
    """The summary states the exercises' answers: the copy holds a call that shows it once they are done."""
    nb = _read(path)
    summary = [c for c in nb.cells if SUMMARY_TAG in c.get("metadata", {}).get("tags", [])]
    headings = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and c.source.startswith("## Summary")]
    if headings:
        assert summary, f"{path.name}: tag its summary's markdown cell {SUMMARY_TAG!r}"
        assert nb.cells[headings[0]].source.strip() == "## Summary", "the heading stays in the copy: a cell of its own"
    copy = learner_notebook(nb, path.name)
    text = "\n".join(c.source for c in copy.cells)
    for cell in summary:
        bullets = [line for line in cell.source.splitlines() if line.startswith("- ")]
        assert bullets and not any(b in text for b in bullets), f"{path.name}: a summary line is in the copy"
    calls = [c for c in copy.cells if f"nb{path.name[:2]}.EXERCISES.lesson_summary()" in c.source]
    assert len(calls) == len(summary) and all(c.cell_type == "code" for c in calls)


def test_the_summary_shows_once_every_exercise_is_done(tmp_path):
    from helpers.lessons.exercises import Exercise, Exercises
    from helpers.lessons.lesson_summary import NotYet, Summary

    lesson = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_markdown_cell("- the answer is 7")
    cell.metadata["tags"] = [SUMMARY_TAG]
    lesson.cells = [nbformat.v4.new_markdown_cell("## Summary"), cell]
    nbformat.write(lesson, tmp_path / "42_topic.ipynb")
    book = Exercises("42", count=Exercise("how many"), first=Exercise("a guess", guess=True), other=Exercise("x"))
    shown = book.lesson_summary(tmp_path)
    assert isinstance(shown, NotYet) and [k for k, _ in shown.open_exercises] == ["count", "first", "other"]
    book.check("count", 6, 7)  # wrong: still open
    book.check("first", 1, 2)  # a guess is done once checked, right or wrong
    book.check("other", 0, 1)
    book.reveal("other")  # asked for after a wrong try
    assert book.lesson_summary(tmp_path).open_exercises == (("count", "how many"),)
    text = book.lesson_summary(tmp_path)._repr_markdown_()
    assert "how many" in text and "nb42.reveal('count')" in text and "run this cell again" in text
    book.check("count", 7, 7)
    shown = book.lesson_summary(tmp_path)
    assert isinstance(shown, Summary) and shown.text == "- the answer is 7"
    other_lesson = Exercises("43", one=Exercise("x"))
    other_lesson.check("one", 1, 1)
    with pytest.raises(ValueError, match="need one lesson 43"):
        other_lesson.lesson_summary(tmp_path)
    nbformat.write(lesson, tmp_path / "42_topic-Copy1.ipynb")  # a copy beside the lesson is not read
    assert book.lesson_summary(tmp_path).text == "- the answer is 7"


def test_learner_copies_are_written(tmp_path):
    written = make_learner_copies(NOTEBOOKS_DIR, tmp_path)
    assert [r.path.name for r in written] == [p.name for p in NOTEBOOKS]
    assert {r.action for r in written} == {"created"}
    for r in written:
        assert "Learner copy" in _read(r.path).cells[0].source


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_reference_traces_are_shipped_gpu_traces(path):
    cells = _code(_read(path))
    # a cell that catches FileNotFoundError says the trace is optional (e.g. not recorded yet)
    required = "\n".join(c.source for c in cells if "except FileNotFoundError" not in c.source)
    optional = "\n".join(c.source for c in cells if "except FileNotFoundError" in c.source)
    for name in REFERENCE.findall(optional):
        assert not name.startswith("cpu_"), f"{path.name} loads {name}: reference traces are GPU recordings"
    for name in REFERENCE.findall(required):
        assert not name.startswith("cpu_"), f"{path.name} loads {name}: reference traces are GPU recordings"
        trace_path = helpers.reference_trace_path(name)  # FileNotFoundError names what is missing
        assert helpers.paths.is_reference_location(trace_path)
