"""Lesson 04 fed the numbers of the H100 run J (four lessons sharing one GPU): rounds told apart by the spread
rule yet slowed by other work read "too unsteady to tell", never "too close to call"; compile times print as measured."""

from __future__ import annotations

import ast
import json

import pandas as pd
import pytest

from helpers import nb04
from helpers.lessons.exercises import ACCEPTED, BUSY, TIE, UNDECIDED, Exercise, Exercises, Tie
from helpers.paths import NOTEBOOKS_DIR

# run J, section 6b: back-to-back rounds (compiled median 355 us, middle half 351-359; eager 397 us, 394-406),
# synchronised rounds, kernel time and the host's work under the profiler per call
B2B = {"compiled": [348.0, 351.0, 355.0, 359.0, 359.0], "eager": [393.0, 394.0, 397.0, 406.0, 408.0]}
SYNC = {"compiled": [699.0, 700.0, 700.0, 701.0, 702.0], "eager": [732.0, 732.0, 733.0, 733.0, 734.0]}
KERNEL, CPU = {"compiled": 233.44, "eager": 254.15}, {"compiled": 224.75, "eager": 175.72}


def _readings():
    return {k: nb04.read_bound(KERNEL[k], B2B[k], SYNC[k], CPU[k]) for k in ("compiled", "eager")}


def test_rounds_apart_but_slowed_read_too_busy_to_tell_not_too_close_to_call():
    readings = _readings()
    assert {r.bound for r in readings.values()} == {"unclear"}
    verdict = nb04.first_is_faster(B2B)
    assert verdict is True  # 42 us apart against a 12 us spread: the spread rule tells them apart
    expected = nb04.end_to_end_expected(verdict, readings)
    assert isinstance(expected, Tie) and expected.status == BUSY
    why = nb04.end_to_end_why(readings, CPU, expected)
    nb04.reset()
    for answer in (True, False):
        fb = nb04.check("compiled_faster_end_to_end", answer, expected, details={"why": why})
        assert fb.status == "too unsteady to tell" and fb.ok
        assert "too close to call" not in fb.message and "too close to call" not in repr(fb)
    assert nb04.answered("compiled_faster_end_to_end")  # accepted: the rounds then show
    table = pd.DataFrame({"x": [1]})
    assert nb04.evidence("compiled_faster_end_to_end", table) is table


def test_a_spread_tie_stays_too_close_to_call_and_one_number_cannot_tell():
    overlap = {"compiled": [350.0, 380.0, 390.0, 400.0, 420.0], "eager": [360.0, 385.0, 395.0, 405.0, 430.0]}
    tie = nb04.first_is_faster(overlap)
    assert isinstance(tie, Tie) and tie.status == TIE
    assert nb04.end_to_end_expected(tie, _readings()) is tie  # the spread's own verdict is kept
    single = nb04.first_is_faster({"compiled": [210.9], "eager": [240.7]})
    assert isinstance(single, Tie) and single.status == UNDECIDED
    nb04.reset()
    assert nb04.check("compiled_faster_end_to_end", True, single, details={"why": "x"}).status == "cannot tell here"


def test_every_accepting_status_counts_as_right_and_an_unknown_one_is_refused():
    book = Exercises("97", a=Exercise("a"), b=Exercise("b"), c=Exercise("c"))
    for key, status in zip("abc", (TIE, BUSY, UNDECIDED), strict=True):
        fb = book.check(key, True, Tie("why", status=status))
        assert fb.status == status and fb.ok and fb.status in ACCEPTED
        assert f'data-status="{status}"' in fb._repr_html_()
    assert list(book.assert_all_correct()["status"]) == [TIE, BUSY, UNDECIDED]
    with pytest.raises(ValueError, match="status"):
        Tie("why", status="maybe")


def test_compile_seconds_keep_two_significant_figures():
    # run J's sweep: the two compiling calls took 0.06 and 0.31 s
    text = nb04.compile_seconds_text([0.06, 0.31])
    assert text == "Each Inductor compile here took 0.06 to 0.31 s." and "0.1 to" not in text
    assert nb04.compile_seconds_text([0.85]) == "The Inductor compile here took 0.85 s."
    assert nb04.compile_seconds_text([2.31, 2.34]) == "Each Inductor compile here took about 2.3 s."
    assert nb04.compile_seconds_text((1.26, 12.4)) == "Each Inductor compile here took 1.3 to 12 s."
    for bad in ([], [float("nan")], [-1.0], "0.3"):
        with pytest.raises(ValueError):
            nb04.compile_seconds_text(bad)


def test_the_line_before_the_sweep_claims_no_compile_time():
    # printed before the sweep runs, so it cannot follow its numbers: run J's compiles took 0.06 and 0.31 s
    nb = json.loads((NOTEBOOKS_DIR / "04_torch_compile.ipynb").read_text())
    (cell,) = [c for c in nb["cells"] if "default_sweep = nb04.shape_sweep(" in "".join(c["source"])]
    tree = ast.parse("".join(cell["source"]))
    printed = " ".join(
        ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "print"
    )
    assert "a compile takes seconds" not in printed and "fraction of a second" in printed
