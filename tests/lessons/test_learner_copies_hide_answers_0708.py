"""The learner copies of lessons 07 and 08 show no answer before its guess.

The copies are generated as a learner gets them (``scripts/make_learner_copies.py --dest DIR --fresh``).
For every solution cell of the full lesson, the copy's visible sources must not hold the solution:
neither the assignment itself, nor its value in a code cell (a quoted answer, a formula), nor the
exercise's explanation or hint (those live in ``helpers.nb07`` / ``helpers.nb08``). And the cells that
show what a guess asks about come after that guess.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest

from helpers import nb07, nb08
from helpers.paths import NOTEBOOKS_DIR

ROOT = NOTEBOOKS_DIR.parent
LESSONS = {"07_attention.ipynb": nb07, "08_whole_model.ipynb": nb08}


@pytest.fixture(scope="module")
def copies(learner_copies) -> Path:
    return learner_copies


def _flat(text: str) -> str:
    return " ".join(text.split())


def solutions(name: str) -> list[tuple[int, str, str, ast.expr]]:
    """(which solution cell, target, the assignment's source, its value) for every answer in the full lesson."""
    nb = nbformat.read(NOTEBOOKS_DIR / name, as_version=4)
    out = []
    cells = [c for c in nb.cells if "solution" in c.metadata.get("tags", [])]
    for n, cell in enumerate(cells):
        shown = _flat(cell.metadata.get("learner_source", ""))  # set-up lines the copy keeps on purpose
        for node in ast.parse(cell.source).body:
            if isinstance(node, ast.Assign) and _flat(ast.unparse(node)) not in shown:
                out.append((n, ast.unparse(node.targets[0]), ast.unparse(node), node.value))
    return out


@pytest.mark.parametrize("name", sorted(LESSONS))
def test_no_solution_in_the_visible_sources(copies, name):
    nb = nbformat.read(copies / name, as_version=4)
    everything = _flat("\n".join(c.source for c in nb.cells))
    found = solutions(name)
    assert found, f"{name} has no solution cell"
    exercises = [i for i, c in enumerate(nb.cells) if "exercise" in c.metadata.get("tags", [])]
    for n, target, assignment, value in found:
        assert _flat(assignment) not in everything, f"{name}: the solution {assignment!r} is visible"
        # what a learner has run before answering: every cell above the exercise (the check cell after it may
        # name every option, as in `for kind in ("for-loop", "foreach", "fused")`; its texts are checked below)
        before = nb.cells[: exercises[n]]
        code = _flat("\n".join(c.source for c in before if c.cell_type == "code"))
        text = _flat("\n".join(c.source for c in before))
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            for quoted in (f'"{value.value}"', f"'{value.value}'"):
                assert quoted not in code, f"{name}: the answer {quoted} of {target} stands in a code cell before it"
        elif not isinstance(value, ast.Constant) and len(ast.unparse(value)) > 12:  # a formula, not a name
            assert _flat(ast.unparse(value)) not in text, f"{name}: the formula of {target} is visible"
    for key, ex in LESSONS[name].EXERCISES.book.items():
        for text in (ex.explain, ex.hint):
            fixed = text.split("{")[0].strip()  # the part written before any measured number
            if len(fixed) > 25:
                assert _flat(fixed) not in everything, f"{name}: the text of {key!r} is visible before an attempt"


def _first(nb, needle: str) -> int:
    return next(i for i, c in enumerate(nb.cells) if needle in c.source)


@pytest.mark.parametrize(
    ("name", "guess", "reveal"),
    [
        # 07: the CPU backend is named by the dispatch tree and the backends table
        ("07_attention.ipynb", "cpu_choice = None", 'chain_tree(trace, "aten::scaled_dot_product_attention")'),
        ("07_attention.ipynb", "cpu_choice = None", "nb07.sdpa_backends(q, k, v)"),
        # 07: the peak table answers the flash question, and so does the sweep's SDPA peak
        ("07_attention.ipynb", "flash_holds_scores = None", '"peak_holds_a_score_matrix"'),
        ("07_attention.ipynb", "flash_holds_scores = None", "last.sdpa_peak_mb"),
        # 07: torch.profiler itself comes before the course's wrapper of it
        ("07_attention.ipynb", "torch.profiler.profile(", "helpers.profile("),
        # 08: the decode breakdown and the timeline answer the GPU-busy question
        ("08_whole_model.ipynb", "gpu_busy_more_than_half = None", "decode_parts = nb08.part_breakdown(decode_trace)"),
        ("08_whole_model.ipynb", "predicted_graph_us = None", "nb08.graph_table("),
        # 08: the eager step's distance from the weight-read floor says the GPU mostly waits
        ("08_whole_model.ipynb", "gpu_busy_more_than_half = None", "nb08.weight_read_floor_us(model"),
        # 08: the decode step's causes, the table and the 60 % sentence answer the floor-cause guess
        ("08_whole_model.ipynb", "largest_floor_cause = None", "nb08.floor.causes_table("),
        ("08_whole_model.ipynb", "largest_floor_cause = None", "nb08.floor.target_text("),
        # 08: torch.profiler's own memory columns come before the course's categories of them
        ("08_whole_model.ipynb", "profile_memory=True) as memory_prof", "nb08.profile_memory("),
    ],
)
def test_guesses_come_before_what_reveals_them(copies, name, guess, reveal):
    nb = nbformat.read(copies / name, as_version=4)
    assert _first(nb, guess) < _first(nb, reveal)


def test_no_heading_gives_the_causal_answer(copies):
    nb = nbformat.read(copies / "07_attention.ipynb", as_version=4)
    headings = [
        line for c in nb.cells if c.cell_type == "markdown" for line in c.source.splitlines() if line.startswith("#")
    ]
    assert not [h for h in headings if "halves" in h.lower()]


def test_nothing_before_the_flash_guess_says_the_fused_backends_hold_no_score_matrix(copies):
    nb = nbformat.read(copies / "07_attention.ipynb", as_version=4)
    before = _flat(" ".join(c.source for c in nb.cells[: _first(nb, "flash_holds_scores = None")])).lower()
    for phrase in ("no score matrix", "never hold", "never allocate", "less than one score matrix"):
        assert phrase not in before
    # the feedback a learner reads after the CPU-backend guess, which comes first
    for text in (nb07.EXERCISES.book["cpu_choice"].explain, nb07.EXERCISES.book["cpu_choice"].hint):
        assert "score matrix" not in text


def test_the_growth_prompt_does_not_state_its_answer(copies):
    nb = nbformat.read(copies / "07_attention.ipynb", as_version=4)
    prompt = nb.cells[_first(nb, "growth_factor = None") - 1].source
    assert "?" in prompt and "seq x seq" not in prompt


def test_the_kernel_exercise_leaves_the_update_to_the_learner(copies):
    nb = nbformat.read(copies / "07_attention.ipynb", as_version=4)
    (cell,) = [c for c in nb.cells if "def my_online_softmax_update" in c.source]
    assert "exercise" in cell.metadata.get("tags", [])
    code = _flat(cell.source)
    for line in ("tl.maximum(m_i", "acc * alpha", "l_i * alpha", "tl.dot(p", "exp2(m_i - m_new)"):
        assert line not in code, f"the learner's kernel cell spells out {line!r}"
