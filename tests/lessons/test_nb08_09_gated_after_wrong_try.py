"""What a wrong try must not be followed by, in lessons 08 and 09 (a learner probe found each one shown).

Lesson 08: cells after a check that show its answer go through ``nb08.evidence(key, ...)``, which shows them
only once the answer is right or revealed. Lesson 09: the tables the one-bucket exercise gives the learner
leave out the hidden share, the answer of the question before it."""

from __future__ import annotations

import ast

import nbformat
import pytest

from helpers import nb09
from helpers.paths import NOTEBOOKS_DIR

LESSON_08 = next(NOTEBOOKS_DIR.glob("08_*.ipynb"))
LESSON_09 = next(NOTEBOOKS_DIR.glob("09_*.ipynb"))


def _cell(path, needle: str) -> str:
    (source,) = [c.source for c in nbformat.read(path, as_version=4).cells if needle in c.source]
    return source


@pytest.mark.parametrize(
    ("needle", "key"),
    [
        ("gpu_prefill_parts, title=", "prefill_part"),  # the H200 prefill by part: mlp's share
        ("nb08.floor.target_text(", "floor_cause"),  # names the largest cause
        ("nb08.floor.kernels_text(", "floor_cause"),  # the H100 split by cause
        ("memory_prof.key_averages().table(", "gemms"),  # its call counts: the GEMMs of a forward
        ('display(nb08.evidence("graph_step", replay_table))', "graph_step"),  # the measured replay
        ('"decode_tokens_per_s", "pct_of_floor"', "graph_step"),  # the benchmark's eager+graph row
        ('"eager step, no profiler (us)"', "gpu_busy"),  # with the kernel time: the busy share
        ("nb08.live.replay_window_text(", "graph_step"),  # reads the hidden replay table
        ('results.table("configurations").drop(columns="what")', "graph_step"),  # the final table's eager+graph
        ("nb08.fix_bounds(", "recompute_mb"),  # the bounds hold the graphed step and the tensors recompute frees
        ("before_text = (", "memory_peak"),  # the categories' MB against the peak, the operators alive at it
    ],
)
def test_lesson_08_gates_what_answers_an_earlier_guess(needle, key):
    source = _cell(LESSON_08, needle)
    gated = "nb08.evidence(" in source and (f'"{key}"' in source or "ANSWERED_BEFORE" in source)
    assert gated, f"{needle!r} is not shown through evidence({key!r})"


def _shown_outside_evidence(source: str, names: set[str]) -> set[str]:
    """Which of `names` a cell shows other than through ``nb08.evidence(...)``: inside a display() call or as a
    bare expression (the cell's last one is displayed)."""
    shown: set[str] = set()

    def visit(node: ast.AST, displayed: bool) -> None:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "evidence":
            return  # what evidence shows is gated
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "display":
            displayed = True
        if displayed and isinstance(node, ast.Name) and node.id in names:
            shown.add(node.id)
        for child in ast.iter_child_nodes(node):
            visit(child, displayed)

    for stmt in ast.parse(source).body:
        visit(stmt, isinstance(stmt, ast.Expr))
    return shown


def test_lesson_08_shows_the_memory_sentence_and_the_operators_at_the_peak_only_through_evidence():
    source = _cell(LESSON_08, "before_text = (")
    assert not _shown_outside_evidence(source, {"before_text", "by_op"})
    # the check itself: a display of either outside evidence is found
    assert _shown_outside_evidence(source + "\ndisplay(Markdown(before_text))\nby_op", {"before_text", "by_op"}) == {
        "before_text",
        "by_op",
    }


def test_lesson_08_asks_for_the_floor_share_the_right_way_round():
    prompt = _cell(LESSON_08, "An exercise in reading that table")
    assert "floor to be 60 % of the best" in " ".join(prompt.split()) and "step at 60 % of the floor" not in prompt


def test_lesson_09s_one_bucket_tables_leave_out_the_hidden_share():
    (cell,) = [
        c for c in nbformat.read(LESSON_09, as_version=4).cells if "one_bucket_change_ms = least_one" in c.source
    ]
    tree = ast.parse(cell.metadata["learner_source"])
    (read,) = [n.value for n in tree.body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "READ"]
    columns = ast.literal_eval(read)
    shown = nb09.per_rank(*nb09.gpu_run("ddp_bucket25"))[columns]  # every column it names exists
    assert not {"hidden_ms", "hidden_pct"} & set(shown.columns)
    # what the solution reads is there
    assert {"compute_ms", "communication_ms", "waited_least"} <= set(shown.columns)


def test_lesson_08s_final_tables_wait_for_every_answer_they_hold():
    cells = [c.source for c in nbformat.read(LESSON_08, as_version=4).cells]
    (defined,) = [c for c in cells if "ANSWERED_BEFORE = (" in c]
    keys = ast.literal_eval(defined.split("ANSWERED_BEFORE = ", 1)[1].splitlines()[0])
    assert {"decode_per_token", "gpu_busy", "graph_step", "recompute_mb"} <= set(keys)


def test_lesson_09s_bucket_schedule_hides_its_overlap_until_the_hidden_share_is_answered():
    source = _cell(LESSON_09, "schedule = nb09.bucket_schedule(gpu25_run")
    assert 'nb09.answered("more_than_a_third_hidden")' in source and 'drop(columns=["overlapped_us"])' in source
