"""Notebooks 00-04 teach the tools before the helpers, end with a transfer exercise, and keep few asserts.

Issue 11: a learner must leave able to profile without `helpers` (00 shows torch.profiler and
key_averages().table(); 04 shows TORCH_LOGS and torch._dynamo.explain), each lesson has an open
exercise on something the learner chooses, and regression checks live in tests/, not in lessons.
Checked on the notebooks' sources (the notebooks themselves run under nbmake).
"""

from __future__ import annotations

import re

import nbformat
import pytest

from helpers.paths import NOTEBOOKS_DIR

LESSONS = sorted(NOTEBOOKS_DIR.glob("0[0-4]_*.ipynb"))
MAX_ASSERTS = 2  # a learner may see a few checks; regression checks belong in tests/


def _code(path):
    return [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def _source(path) -> str:
    return "\n".join(c.source for c in _code(path))


def test_notebook_00_shows_the_profiler_itself_before_the_helpers():
    src = _source(NOTEBOOKS_DIR / "00_setup_and_first_trace.ipynb")
    for piece in (
        "from torch.profiler import",
        "schedule(wait=",
        "record_shapes=True",
        "record_function(",
        "prof.step()",
        "key_averages().table(sort_by=",
        "export_chrome_trace(",
        "key_averages_frame(prof",
    ):
        assert piece in src, piece
    assert src.index("prof.key_averages().table(") < src.index("helpers.profile("), "the raw API comes first"


def test_notebook_04_shows_compiles_own_tools():
    cells = nbformat.read(NOTEBOOKS_DIR / "04_torch_compile.ipynb", as_version=4).cells
    text = "\n".join(c.source for c in cells)
    assert 'TORCH_LOGS="recompiles,graph_breaks"' in text
    src = _source(NOTEBOOKS_DIR / "04_torch_compile.ipynb")
    assert "torch._logging.set_logs(recompiles=True, graph_breaks=True)" in src
    assert "torch._dynamo.explain(" in src
    assert src.index("torch._dynamo.explain(") < src.index("nb04.shape_sweep("), (
        "torch's tools before the course's counter"
    )


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_an_open_exercise_on_the_learners_own_choice(path):
    cells = _code(path)
    open_ones = [
        c
        for c in cells[:-1]
        if "solution" in c.metadata.get("tags", []) and "change me" in (c.metadata.get("learner_source") or "")
    ]
    assert open_ones, (
        f"{path.name} has no open exercise (a solution cell whose learner copy keeps a 'change me' choice)"
    )
    for cell in open_ones:
        assert "= None" in cell.metadata["learner_source"], "the prediction is blanked in the learner copy"


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_few_asserts_in_lessons(path):
    asserts = sum(len(re.findall(r"^\s*assert\b", c.source, flags=re.M)) for c in _code(path))
    assert asserts <= MAX_ASSERTS, f"{path.name} has {asserts} assert lines: move regression checks to tests/"


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_no_superseded_ceilings_or_excuses_above_100(path):
    text = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells)
    assert "673" not in text and "4.14" not in text, "ceilings come from the recorded ceilings file, never typed in"
    assert not re.search(r"(above|over) 100\s?%", text.replace("at or below 100%", "")), (
        "a floor a kernel beats is a bug"
    )
