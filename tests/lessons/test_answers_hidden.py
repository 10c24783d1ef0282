"""The learner copies of lessons 00-03 and 10 show no answer before its check: no explanation or hint of the
lesson's book in any visible cell, and no solution value of the full lesson in a cell the learner reads before
the check cell runs.

The copies are made as a learner gets them (``scripts/make_learner_copies.py --dest DIR --fresh``). The
solutions are read from the full lesson: every assignment of a cell tagged ``solution`` that the copy blanks
(an input the learner chooses, kept in the cell's ``learner_source``, is not an answer).
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import nbformat
import pytest

from helpers.paths import NOTEBOOKS_DIR

ROOT = NOTEBOOKS_DIR.parent
LESSONS = ("00", "01", "02", "03", "10")
SHORTEST_TEXT = 25  # a stretch of an explanation or hint this long is distinctive enough to search for
# Questions that offer named options: a cell naming every option (the question, the list the question points at)
# gives none of them away; a cell naming the answer without the others does.
OPTIONS = {
    ("01", "copies"): [
        "x.t()",
        "x.transpose(0, 1)",
        "x.view(12)",
        "x.reshape(4, 3)",
        "x.t().contiguous()",
        "x.t().flatten()",
    ],  # fmt: skip
    ("10", "costliest"): ["item", "copies", "pointwise", "optimizer", "fp32"],
}


def _lesson(number: str) -> Path:
    (path,) = NOTEBOOKS_DIR.glob(f"{number}_*.ipynb")
    return path


@pytest.fixture(scope="module")
def copies(learner_copies) -> Path:
    return learner_copies


def _flat(text: str) -> str:
    return " ".join(text.split())


def _assignments(source: str) -> dict[str, ast.expr]:
    """target -> value node of every top-level single-target assignment of a cell."""
    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            out[ast.unparse(node.targets[0])] = node.value
    return out


def solutions(path: Path) -> list[tuple[int, str, ast.expr, bool]]:
    """(cell index in the full lesson, target, value, open) of every answer a solution cell writes; `open` when the
    cell also keeps inputs the learner chooses (then the answer depends on them)."""
    nb = nbformat.read(path, as_version=4)
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or "solution" not in cell.metadata.get("tags", []):
            continue
        kept = {k: ast.unparse(v) for k, v in _assignments(cell.metadata.get("learner_source", "")).items()}
        for target, value in _assignments(cell.source).items():
            if kept.get(target) != ast.unparse(value):
                out.append((i, target, value, bool(kept)))
    return out


def _check_cell(cells: list, start: int, target: str) -> int:
    """The first code cell after `start` that checks `target` (names it and calls a checker)."""
    for j in range(start + 1, len(cells)):
        src = cells[j].source
        if cells[j].cell_type == "code" and re.search(rf"\b{re.escape(target)}\b", src) and "check" in src:
            return j
    raise AssertionError(f"no check cell for {target} after cell {start}")


def _shows(value: ast.expr, target: str, cell) -> str | None:
    """What in `cell` gives the answer `value` away (None when nothing does)."""
    src = cell.source
    flat = _flat(src)
    if isinstance(value, (ast.Set, ast.Tuple, ast.List)) and all(isinstance(e, ast.Constant) for e in value.elts):
        items = [e.value for e in value.elts]
        if all(isinstance(v, str) for v in items):  # a set of names: each one named gives part of it away
            return next((hit for v in items if (hit := _shows(ast.Constant(v), target, cell))), None)
        return ast.unparse(value) if ast.unparse(value) in flat else None  # a tuple of numbers, as written
    if not isinstance(value, ast.Constant):  # a formula: shown when written out
        formula = _flat(ast.unparse(value))
        return formula if len(formula) > 12 and formula in flat else None
    v = value.value
    if isinstance(v, str):
        quoted = [f'"{v}"', f"'{v}'", f"`{v}`"]
        hit = next((q for q in quoted if q in src), None)
        if hit is None and len(v) >= 6:  # a distinctive name, in prose too
            match = re.search(rf"(?<![\w:]){re.escape(v)}(?![\w:])", src)
            hit = match.group(0) if match else None
        return hit
    if isinstance(v, float):  # a measured-looking number is distinctive as written
        return repr(v) if re.search(rf"(?<![\w.]){re.escape(repr(v))}(?![\w.])", src) else None
    # a small int or a bool is in any code: look for it where a check or an assignment would state it
    pattern = rf"(?:\b{re.escape(target)}\s*=|expected\s*=|==|\bis)\s*{re.escape(repr(v))}(?![\w.])"
    match = re.search(pattern, src)
    return match.group(0) if match else None


def _offered(number: str, target: str, cell) -> bool:
    """True when `cell` names every option the question offers (a list of choices, not a reveal)."""
    options = OPTIONS.get((number, target))
    return bool(options) and all(_shows(ast.Constant(o), target, cell) for o in options)


@pytest.mark.parametrize("number", LESSONS)
def test_no_solution_value_before_its_guess_or_in_its_check(copies, number):
    """What a learner reads before answering (every cell above the exercise) and the check cell they run must not
    hold the answer. An open exercise's answer depends on the learner's own inputs: only its check is searched."""
    full = _lesson(number)
    lesson = nbformat.read(full, as_version=4)
    copy = nbformat.read(copies / full.name, as_version=4)
    offset = len(copy.cells) - len(lesson.cells)  # the copy's banner
    assert offset == 1
    answers = solutions(full)
    assert answers, f"{full.name} has no solution cell"
    checks = {target: _check_cell(lesson.cells, i, target) for i, target, *_ in answers}
    for i, target, value, is_open in answers:
        # an answer an earlier exercise already checked is known from that check on
        known_from = max(
            (checks[t] + 1 for j, t, v, _ in answers if j < i and ast.dump(v) == ast.dump(value)),
            default=0,
        )
        before = [] if is_open else range(known_from, i)
        for k in [*before, i, checks[target]]:
            cell = copy.cells[k + offset]
            hit = _shows(value, target, cell)
            assert hit is None or _offered(number, target, cell), (
                f"{full.name}: cell {k} shows {hit!r}, the answer of {target}, "
                + ("in its check" if k == checks[target] else "before the guess")
            )
        assert "exercise" in copy.cells[i + offset].metadata.get("tags", [])


@pytest.mark.parametrize("number", LESSONS)
def test_no_explanation_or_hint_in_the_learner_copy(copies, number):
    full = _lesson(number)
    copy = nbformat.read(copies / full.name, as_version=4)
    text = _flat("\n".join(c.source for c in copy.cells))
    book = importlib.import_module(f"helpers.lessons.nb{number}").EXERCISES.book
    assert len(book) >= 3
    for key, exercise in book.items():
        for words in (exercise.explain, exercise.hint):
            # every stretch between the {fields} filled in at check time
            for piece in (_flat(p.split("}")[-1]) for p in words.split("{")):
                assert len(piece) < SHORTEST_TEXT or piece not in text, f"{full.name}: {key!r} shows {piece!r}"


def test_the_search_finds_a_planted_answer(copies):
    # the search means something: an answer pasted before its check is found
    full = _lesson("03")
    copy = nbformat.read(copies / full.name, as_version=4)
    i, target, value, _ = solutions(full)[0]
    planted = nbformat.v4.new_code_cell(f"{target} = {ast.unparse(value)}")
    assert _shows(value, target, planted)
    prose = nbformat.v4.new_markdown_cell("The multiply reads it back: `aten::addmm` runs the product.")
    assert _shows(ast.Constant("aten::addmm"), "x", prose)
    assert _shows(ast.Constant(True), "flag", nbformat.v4.new_code_cell("check(flag, expected=True)"))
    assert not _shows(ast.Constant(20), "n", copy.cells[0])


def _first(nb, needle: str) -> int:
    return next(i for i, c in enumerate(nb.cells) if needle in c.source)


@pytest.mark.parametrize(
    ("name", "guess", "reveal"),
    [
        # 00: on a GPU the profiler's table and the tree print the kernel under the operator that launched it
        ("00_setup_and_first_trace.ipynb", "gemm_launched_by = ", "prof.key_averages().table("),
        ("00_setup_and_first_trace.ipynb", "gemm_launched_by = ", 'helpers.chain_tree(trace, "aten::linear")'),
        # 01: on a GPU the costs table has a kernels_per_call column, the trees show the copy kernels
        ("01_strides_and_views.ipynb", "kernels_per_call = ", "costs = helpers.nb01.op_costs("),
        ("01_strides_and_views.ipynb", "kernels_per_call = ", "helpers.chain_tree(trace, op)"),
        # 02: the kernel tables and trees print the GEMM's name, layout letters included (on both paths)
        ("02_linear_and_addmm_epilogue.ipynb", "ab_layout = ", "helpers.kernel_table(gpu_by_hand)["),
        ("02_linear_and_addmm_epilogue.ipynb", "ab_layout = ", "helpers.chain_tree(gpu_linear"),
        ("02_linear_and_addmm_epilogue.ipynb", "ab_layout = ", "def addmm_strategy("),
        # 03: the kernel names (tiles) come after the tile guess
        ("03_geglu_mlp_eager.ipynb", "distinct_tiles = ", 'gemms[["short_name"'),
    ],
)
def test_guesses_come_before_what_reveals_them_on_a_gpu(copies, name, guess, reveal):
    nb = nbformat.read(copies / name, as_version=4)
    assert _first(nb, guess) < _first(nb, reveal)


def test_lesson_03_draws_its_first_tree_without_device_events(copies):
    # the tree before the device-event and tile guesses would list the memsets and the GEMM kernels' names
    nb = nbformat.read(copies / "03_geglu_mlp_eager.ipynb", as_version=4)
    first_tree = nb.cells[_first(nb, "helpers.chain_tree(")].source
    assert _first(nb, "helpers.chain_tree(") < _first(nb, "device_events_per_forward = ")
    assert "ops_only=True" in first_tree
