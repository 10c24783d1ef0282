"""Notebook 09's learner copy shows no answer before its guess: no solution value, explanation or hint in its
visible sources (every cell's source, which a learner reads to run it)."""

from __future__ import annotations

import shutil

import nbformat
import pytest
from make_learner_copies import make_learner_copies

from helpers.lessons import nb09
from helpers.paths import NOTEBOOKS_DIR

LESSON = next(NOTEBOOKS_DIR.glob("09_*.ipynb"))
# what the solutions of 09 write, and what would give them away
SOLUTIONS = [
    "one_bucket_allreduces = 1",
    "more_than_a_third_hidden = True",
    "2 * MODEL.num_hidden_layers + 1",
    "1 / NPROC",
    "prefetch_faster = False",
    '["communication_us"].idxmin()',
    '["start_idle_us"].max() - ',
    'least_one["communication_ms"] - tail_ms',
    "1/N of each",
    "straggler_ms",
]


@pytest.fixture(scope="module")
def learner_sources(tmp_path_factory) -> list[str]:
    src = tmp_path_factory.mktemp("lessons")
    shutil.copy(LESSON, src / LESSON.name)
    (made,) = make_learner_copies(src, dest=tmp_path_factory.mktemp("learner"), fresh=True)
    return [c.source for c in nbformat.read(made.path, as_version=4).cells]


def test_the_full_lesson_holds_its_solutions_so_the_search_means_something():
    full = "\n".join(c.source for c in nbformat.read(LESSON, as_version=4).cells)
    for value in SOLUTIONS[:-2]:
        assert value in full, value


@pytest.mark.parametrize("value", SOLUTIONS)
def test_no_solution_value_in_the_learner_copy(learner_sources, value):
    assert not any(value in s for s in learner_sources), value


def test_no_explanation_or_hint_in_the_learner_copy(learner_sources):
    text = "\n".join(learner_sources)
    for key, exercise in nb09.EXERCISES.book.items():
        for words in (exercise.explain, exercise.hint):
            # every stretch of 25 characters or more between the {fields} filled in at check time
            for piece in (p.split("}")[-1] for p in words.split("{")):
                assert len(piece) < 25 or piece not in text, (key, piece)


def test_on_gpus_the_answers_of_later_guesses_stay_off_screen():
    # on two GPUs the early cells show live GPU runs: the one-bucket step time and the hidden share are
    # answers of sections 3 and 4, so those cells must leave them out there
    cells = [c.source for c in nbformat.read(LESSON, as_version=4).cells]
    first = lambda text: next(i for i, s in enumerate(cells) if text in s)  # noqa: E731
    runs_table = first("ddp_runs = nb09.runs_table(")
    assert 'ddp_runs.loc[ddp_runs["run"].str.endswith("ddp_one_bucket"), ["step_ms"' in cells[runs_table]
    assert runs_table < first("one_bucket_change_ms = ")
    per_step = first("per_step25 = nb09.communication_per_step(run25)")
    assert '"overlap_us", "exposed_communication_us", "overlap_pct"]) if ON_GPUS' in cells[per_step]
    assert per_step < first("more_than_a_third_hidden = ")
