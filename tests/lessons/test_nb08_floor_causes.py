"""Lesson 08's split of a decode step against the weight-read floor: the guess of its largest cause, graded from
the table (a tie when two causes are within 10 %), and the sentence on what reaching 60 % of the floor takes."""

import pandas as pd
import pytest

import helpers
from helpers import nb08

floor = nb08.floor


def causes(gemv: float = 280.0, small: float = 160.0, attention: float = 130.0, idle: float = 110.0) -> pd.DataFrame:
    """A causes table of the benchmark's shape for the best configuration, step 1200 us, floor 480 us."""
    rows = [
        ("weights at the memory roof (the floor)", 480.0),
        ("GEMV kernels above the floor (below the memory roof), LM head excluded", gemv - 5.0),
        ("LM head GEMV above its own floor", 5.0),
        ("attention kernels", attention),
        ("normalization kernels", small / 2),
        ("elementwise kernels", small / 2),
        ("GPU idle between kernels inside the step (profiled)", idle),
        ("copy kernels", 10.0),
    ]
    step = 1200.0
    return pd.DataFrame(
        [{"configuration": floor.BEST, "cause": c, "us": us, "pct_of_step": 100 * us / step} for c, us in rows]
    )


@pytest.fixture(autouse=True)
def _fresh():
    nb08.reset()


def test_the_right_guess_is_computed_from_the_table():
    assert nb08.check_floor_cause("gemv", causes()).status == "right"
    assert nb08.check_floor_cause(" GEMV ", causes()).status == "right"
    assert nb08.check_floor_cause("attention", causes(attention=400.0)).status == "right"
    assert nb08.check_floor_cause("gemv", causes(attention=400.0)).status == "wrong"


def test_a_wrong_guess_a_blank_and_a_wrong_type():
    assert nb08.check_floor_cause("idle", causes()).status == "wrong"
    assert nb08.check_floor_cause(None, causes()).status == "not answered yet"
    fb = nb08.check_floor_cause(3, causes())
    assert fb.status == "wrong" and "expected text" in fb.message
    fb = nb08.check_floor_cause("the floor", causes())
    assert fb.status == "wrong" and "small kernels" in fb.message


def test_two_causes_within_ten_percent_tie():
    table = causes(gemv=280.0, small=270.0)
    assert floor.largest_causes(table) == ["gemv", "small kernels"]
    assert nb08.check_floor_cause("small_kernels", table).status == "too close to call"
    assert nb08.check_floor_cause("Small-Kernels", table).status == "too close to call"  # any usual spelling
    assert nb08.check_floor_cause("gemv", table).status == "too close to call"
    assert nb08.check_floor_cause("idle", table).status == "wrong"
    assert nb08.check_floor_cause(None, table).status == "not answered yet"
    assert floor.largest_causes(causes(gemv=280.0, small=250.0)) == ["gemv"]  # 11 % apart: no tie


def test_the_target_sentence_says_what_must_go_and_that_it_is_not_done():
    text = floor.target_text(causes(), share=0.6)
    # floor 480 us / 0.6 = 800 us; step 1200 us: 400 us to remove, more than any one cause
    assert "800 us" in text and "**400 us**" in text and "no cause alone" in text
    assert "**gemv** and **small kernels** together hold 440 us" in text
    assert "split-KV" in text and "not met" not in text and "target" not in text  # no project status in a lesson
    assert "alone would be enough" in floor.target_text(causes(gemv=500.0), share=0.6)
    assert "already" in floor.target_text(causes(), share=0.4)
    for bad in (0, 1.5, True, "0.6"):
        with pytest.raises(ValueError):
            floor.target_text(causes(), share=bad)


def test_bad_tables_are_refused():
    with pytest.raises(TypeError):
        floor.cause_groups([1, 2])
    with pytest.raises(ValueError):
        floor.cause_groups(causes().drop(columns="pct_of_step"))
    with pytest.raises(ValueError):
        floor.cause_groups(causes(), "no such configuration")


def test_the_recorded_result_reads_and_its_table_ends_with_the_whole_step():
    recorded = helpers.load_results("h200_decode_floor")
    table = floor.causes_table(recorded.table("causes"))
    assert table.index[-1] == "the whole step"
    assert table.iloc[-1][f"{floor.BEST}: pct_of_step"] == 100
    assert floor.largest_causes(recorded.table("causes"))[0] in floor.GROUPS
    assert "(recorded)" in recorded.label


def test_the_course_kernels_result_is_read_as_stored_and_said_by_group():
    """Lesson 08's H100 table of the batch-1 kernels: the value on screen is the stored one, and the sentence gives
    every group's before and after, computed from the table, saying which moved by more than the noise."""
    import json

    from helpers.lessons.results import RESULTS_DIR, load_results

    causes = load_results("h100_decode_floor").table("causes")
    stored = json.loads((RESULTS_DIR / "h100_decode_floor.json").read_text())["tables"]["causes"]["rows"]
    shown = floor.causes_table(causes, (floor.KERNELS, floor.KERNELS_FROM))
    row = next(r for r in stored if r[0] == floor.KERNELS and r[1].startswith("GPU idle"))
    assert shown.loc[row[1], f"{floor.KERNELS}: us"] == row[2]
    text = floor.kernels_text(causes)
    groups_new, groups_old = floor.cause_groups(causes, floor.KERNELS), floor.cause_groups(causes, floor.KERNELS_FROM)
    for g in floor.GROUPS:
        assert f"{g} {groups_old[g]:,.0f} -> {groups_new[g]:,.0f} us" in text, g
    verdict = text.split("us. ")[-1]
    for g in floor.GROUPS:
        moved = abs(groups_new[g] - groups_old[g]) > 0.1 * max(groups_new[g], groups_old[g])
        assert (g in verdict.split(";")[0].lower()) == moved, g
    assert f"{floor.step_us(causes, floor.KERNELS):,.0f} us" in text


def test_the_course_kernels_sentence_gives_gemv_and_attention_and_the_table_ends_with_the_step():
    """From a learner probe: the sentence left out GEMV (259 -> 236 us) and attention (128 -> 123 us), the two
    causes the kernels were written for, and the H100 table put 'normalization kernels' (a cause only the older
    configuration has) below 'the whole step'."""
    causes = helpers.load_results("h100_decode_floor").table("causes")
    text = floor.kernels_text(causes)
    assert "gemv 259 -> 236 us" in text and "attention 128 -> 123 us" in text
    assert "idle 110 -> 63 us" in text and "small kernels 160 -> 51 us" in text
    table = floor.causes_table(causes, (floor.KERNELS, floor.KERNELS_FROM))
    assert table.index[-1] == "the whole step"
    assert "normalization kernels" in table.index
