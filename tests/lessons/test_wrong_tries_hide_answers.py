"""A wrong try gets a hint that says where to look, never the answer; the answer shows once the learner is right or
asks for it (Exercises.reveal / answered). And lesson 08's fix and speedup are one answer."""

from __future__ import annotations

import pandas as pd
import pytest

import helpers
from helpers.lessons import nb08, nb10
from helpers.lessons.exercises import Exercise, Exercises, check

RIGHT, WRONG, TIE = "right", "wrong", "too close to call"
BEFORE = [2400.0, 2450.0, 2500.0, 2420.0, 2480.0]
AFTER = [1800.0, 1790.0, 1850.0, 1820.0, 1810.0]  # saved 650 us (middle half 600 to 660)
FINDINGS = pd.DataFrame(
    {
        "rule": ["unfused_optimizer", "host_pointwise_chains"],
        "saving_upper_bound_us": [700.0, 500.0],
        "time_us": [1400.0, 560.0],
    }
)


@pytest.fixture(autouse=True)
def _fresh_books():
    nb08.reset(), nb10.reset()
    yield
    nb08.reset(), nb10.reset()


def test_the_answer_shows_only_when_right_or_asked_for():
    book = Exercises("99", count=Exercise("kernels per forward", hint="count the launches in the table"))
    assert book.reveal("count").status == "not answered yet" and not book.answered("count")  # check first
    wrong = book.check("count", 5, 7)
    assert wrong.status == WRONG and "7" not in wrong.message and "count the launches" in wrong.message
    assert not book.answered("count")
    shown = book.reveal("count")
    assert "7" in shown.message and shown.status == WRONG and book.answered("count")  # asked: shown, still wrong
    book.reset()
    assert book.check("count", 7, 7).status == RIGHT and book.answered("count") and not book.revealed


def test_the_plain_check_never_names_the_expected_value_when_wrong():
    fb = check("kernel", "relative error 3e-1", "matches geglu_reference", source="reference")
    assert fb.status == WRONG and "matches geglu_reference" not in fb.message


def test_10_costliest_wrong_tries_point_at_the_column_not_the_answer():
    taught = nb10.check_costliest("optimizer", FINDINGS)
    assert taught.status == RIGHT and nb10.answered("costliest")
    nb10.reset()
    for naive in ("pointwise", "item"):  # the runner-up, and the alarming-looking .item() of a CPU loop
        fb = nb10.check_costliest(naive, FINDINGS)
        assert fb.status == WRONG and "optimizer" not in fb.message and "700" not in fb.message, fb.message
        assert "saving_upper_bound_us" in fb.message  # where to look
    assert not nb10.answered("costliest")
    assert "optimizer" in nb10.reveal("costliest").message


def test_10_first_saving_wrong_tries_name_neither_the_bound_nor_the_measurement():
    assert nb10.check_saving("first_saving", 700.0, BEFORE, AFTER, FINDINGS, ratio=0.6).status == RIGHT
    for wrong in (1400.0, 700.0 * 0.6, 100.0):  # the events' own time, the bound scaled, a guess
        fb = nb10.check_saving("first_saving", wrong, BEFORE, AFTER, FINDINGS, ratio=0.6)
        assert fb.status == WRONG, (wrong, fb.message)
        assert "700" not in fb.message and "650" not in fb.message and "Hint:" in fb.message, fb.message
    item = nb10.check_saving("item_saving", 5000.0, BEFORE, AFTER, FINDINGS, problem="item")
    assert item.status == WRONG and "0 us" not in item.message.replace("5,000 us", "")


@pytest.fixture(scope="module")
def h200():
    decode = nb08.reference_trace("h200_decoder_decode", missing_ok=True)
    prefill = nb08.reference_trace("h200_decoder_prefill", missing_ok=True)
    variant = nb08.reference_trace("h200_decoder_variant_x", missing_ok=True)
    if decode is None or prefill is None or variant is None:
        pytest.skip("the H200 reference traces of lesson 08 are not in this checkout")
    return {"decode": decode, "prefill": prefill, "variant": variant, "results": helpers.load_results("h200_decoder")}


def test_08_graph_step_wrong_tries_hide_the_prediction(h200):
    model = nb08.graph_prediction(h200["decode"], h200["prefill"])
    for wrong in (model["kernel_us"], model["eager_window_us"]):  # naive: kernel time only; the profiled step
        fb = nb08.check_graph_step(wrong, h200["decode"], h200["prefill"], 2203.0, "H200")
        assert fb.status == WRONG and f"{model['predicted_us']:,.0f}" not in fb.message
        assert f"{model['predicted_us']:.4g}" not in fb.message and "2,203" not in fb.message
    assert not nb08.answered("graph_step")
    assert f"{model['predicted_us']:.4g}" in nb08.reveal("graph_step").message


def test_08_fix_and_speedup_are_one_answer(h200):
    measured = h200["results"].value("exercise", "speedup")
    parts = nb08.part_breakdown(h200["variant"]).set_index("part")
    step, head = parts.attrs["step_us"], parts.loc["lm_head", "time_us"]
    taught, naive, tempting = step / (step - head), 1 + head / step, step / head

    def statuses(fix, speedup):
        return [f.status for f in nb08.check_variant(h200["variant"], "lm_head", fix, speedup, measured)[1:]]

    assert statuses("last logits", taught) == [RIGHT, RIGHT]
    assert statuses("last logits", naive) == [WRONG, WRONG] and statuses("last logits", tempting) == [WRONG, WRONG]
    fix_fb, speedup_fb = nb08.check_variant(h200["variant"], "lm_head", "last logits", tempting, measured)[1:]
    assert "the speedup half is wrong" in fix_fb.message and "the speedup half is wrong" in speedup_fb.message
    # a right speedup for a wrong fix (the tempting fix: compile) is wrong, and reads as a wrong one would: the
    # speedup is graded with its fix, so it cannot tell the learner that their number is right
    fix_fb, speedup_fb = nb08.check_variant(h200["variant"], "lm_head", "compile", taught, measured)[1:]
    assert (fix_fb.status, speedup_fb.status) == (WRONG, WRONG) and "graded with its fix" in speedup_fb.message
    wrong_both = nb08.check_variant(h200["variant"], "lm_head", "compile", naive, measured)[2]
    assert (wrong_both.name, wrong_both.status, wrong_both.message) == (speedup_fb.name, WRONG, speedup_fb.message)
    for fb in (fix_fb, speedup_fb):  # neither the fix nor the measured speedup is named
        assert (
            "last logits" not in fb.message
            and f"{measured:.2f}" not in fb.message
            and "accepted here" not in fb.message
        )
    assert statuses("compile", naive) == [WRONG, WRONG]
    assert not nb08.answered("variant_speedup")


def test_a_check_cells_evidence_waits_for_a_right_answer_or_reveal():
    book = Exercises("98", count=Exercise("kernels per forward", hint="count the launches"))
    table = pd.DataFrame({"kernel": ["gemm", "gelu"], "calls": [2, 1]})
    with pytest.raises(TypeError, match="needs the object"):
        book.evidence("count")
    hidden = book.evidence("count", table)  # not checked yet
    assert hidden is not table and "nb98.reveal('count')" in repr(hidden)
    wrong = book.check("count", 5, 3)
    assert "nb98.reveal('count')" in wrong.message and "Think again" in wrong.message
    hidden = book.evidence("count", table)
    assert hidden is not table and "gemm" not in repr(hidden) and "reveal" in hidden._repr_markdown_()
    book.reveal("count")
    assert book.evidence("count", table) is table
    book.reset()
    book.check("count", 3, 3)
    assert book.evidence("count", "first", table) is table  # the earlier ones are displayed, the last returned


def test_every_lesson_offers_reveal_answered_and_evidence():
    for n in range(11):
        lesson = getattr(helpers, f"nb{n:02d}")
        for name in ("reveal", "answered", "evidence"):
            assert callable(getattr(lesson, name)), f"nb{n:02d}.{name}"
