"""Lesson 06 over review run 15 (an H100 shared by four lessons): a synchronised call longer than issuing it plus
its kernels gives no host overhead, the race reads both clocks, variants that did not run leave the tables with one
sentence, and the gradient error is not rounded to 0.0."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers import nb06

COLS = ["variant", "kernel_us", "graphed_us", "e2e_nosync_us", "e2e_sync_us", "host_overhead_us", "enqueue_us"]
RUN15 = pd.DataFrame(
    [
        ("eager", 253.7, 256.5, 282.8, 542.8, 289.1, 129.1),
        ("compile", 221.9, 223.0, 225.7, 293.5, 71.6, 132.6),
        ("course-geglu", 220.8, 231.3, 226.5, 255.5, 34.7, 147.7),
        ("course-geglu-cat", 214.5, 213.2, 223.8, 267.5, 53.0, 218.1),
        ("course-fused", 177.9, 174.7, 178.3, 253.6, 75.7, 104.3),
    ],
    columns=COLS,
)


def test_a_synchronised_call_beyond_issue_plus_kernels_is_disturbed():
    assert nb06.sync_disturbed(RUN15) == ["eager"]
    assert nb06.disturbed_times(RUN15) == {
        "eager": ["543 us synchronised against 129 us to issue a call plus 254 us of kernels"]
    }


def test_the_host_overhead_of_a_disturbed_variant_is_not_printed():
    text = nb06.host_lead_sentence(RUN15)
    assert "course-fused 76 us, compile 72 us, eager too disturbed to read" in text
    assert "289" not in text


def test_a_disturbed_compared_variant_reads_no_lead():
    times = RUN15.copy()
    times.loc[times["variant"] == "compile", "e2e_sync_us"] = 500.0
    text = nb06.host_lead_sentence(times)
    assert "compile too disturbed to read" in text and "reads no lead" in text


def test_one_variant_reads_in_the_singular():
    text = nb06.hiding_sentence(RUN15)
    assert "eager (543 us synchronised against 129 us to issue a call plus 254 us of kernels)" in text
    one = RUN15[RUN15["variant"] == "course-geglu"].assign(e2e_nosync_us=250.0)
    assert "took longer than its kernels although" in nb06.hiding_sentence(one)
    assert "their kernels" not in nb06.hiding_sentence(one)


RACE = pd.DataFrame(
    {
        "kernel": ["your kernel (1-D blocks)", "nb06.geglu (2-D tiles)"],
        "kernel_us": [50.29, 50.78],
        "call_us": [53.39, 91.74],
    }
)


def test_the_race_reads_both_columns_and_names_the_launcher():
    text = nb06.race_sentence(RACE)
    assert "By kernel time, your kernel (1-D blocks) and nb06.geglu (2-D tiles) are level (50 against 51 us" in text
    assert "53 us for your kernel (1-D blocks) against 92 us for nb06.geglu (2-D tiles)" in text
    assert "nb06.geglu (2-D tiles)'s call takes 41 us longer than its kernel (1.81x)" in text
    assert "Python launcher" in text


def test_the_race_when_both_calls_or_none_lag():
    both = RACE.assign(call_us=[80.0, 91.74])
    assert "cannot tell which" in nb06.race_sentence(both)
    none = RACE.assign(call_us=[52.0, 53.0])
    assert "keeps up with its kernel" in nb06.race_sentence(none)
    assert "call" not in nb06.race_sentence(RACE.drop(columns="call_us")).split("level")[1]
    with pytest.raises(ValueError):
        nb06.race_sentence(RACE.iloc[:1])
    with pytest.raises(TypeError):
        nb06.race_sentence([1, 2])  # type: ignore[arg-type]


TRAINING = pd.DataFrame(
    {
        "variant": ["eager", "compile", "liger", "course-fused-save"],
        "status": ["ok", "ok", "unavailable", "ok"],
        "step_us": [836.3, 646.6, float("nan"), 838.4],
        "step_wall_us": [828.7, 695.4, float("nan"), 906.1],
        "peak_mb": [319.3, 218.6, float("nan"), 190.3],
        "dx_rel_err": [0.0044, 0.0031, float("nan"), 0.0044],
        "reason": [None, None, "liger-kernel is not importable (ModuleNotFoundError: No module named 'liger_kernel')",
                   None],
    }
)  # fmt: skip


def test_a_variant_that_did_not_run_leaves_the_table_with_one_sentence():
    recorded = TRAINING.assign(status="ok")
    shown, note = nb06.available_rows(TRAINING, recorded)
    assert list(shown["variant"]) == ["eager", "compile", "course-fused-save"]
    assert note == "*Not in this table:* liger is not installed here. The recorded run has liger."
    assert "ModuleNotFoundError" not in note
    other = TRAINING.assign(status=["ok", "ok", "error", "ok"], reason=[None, None, "CUDA error", None])
    assert nb06.available_rows(other)[1] == "*Not in this table:* liger did not run here (error)."
    assert nb06.available_rows(TRAINING.assign(status="ok"))[1] == ""
    assert nb06.available_rows(TRAINING.drop(columns="status"))[1] == ""
    with pytest.raises(ValueError):
        nb06.available_rows(TRAINING.drop(columns="variant"))


def test_the_training_view_keeps_the_gradient_error_readable():
    view = nb06.training_view(nb06.available_rows(TRAINING)[0])
    assert list(view["dx_rel_err"]) == ["4.40e-03", "3.10e-03", "4.40e-03"]
    assert "status" not in view.columns and "reason" not in view.columns
    assert view.loc["eager", "step_us"] == 836.3
    with pytest.raises(TypeError):
        nb06.training_view("table")  # type: ignore[arg-type]


def test_right_answers_show_bytes_as_mb_and_ratios_with_two_decimals():
    nb06.reset()
    fb = nb06.check("bytes_saved", 213909504, expected=213909504, details={"tensor_mb": 50.3})
    assert fb.message.startswith("the computation agrees: 214 MB.")
    fb = nb06.check("predicted_speedup", 1.2331, expected=1.2331, details={"geglu_us": 32.5})
    assert fb.message.startswith("the computation agrees: 1.23x.")
    nb06.reset()


def test_large_integers_read_with_thousands_separators_and_show_must_be_callable():
    from helpers.lessons.answers import show_value
    from helpers.lessons.exercises import Exercise, Exercises

    assert show_value(213909504) == "213,909,504" and show_value(12) == "12" and show_value(1.2331) == "1.233"
    book = Exercises("99", n=Exercise("a count"))
    assert book.check("n", 1024, expected=1024).message == "the measurement agrees: 1,024."
    with pytest.raises(TypeError, match="show"):
        Exercise("x", show="MB")  # type: ignore[arg-type]


def test_an_empty_table_passes_through():
    empty = pd.DataFrame()
    shown, note = nb06.available_rows(empty)
    assert shown.empty and note == ""


def test_a_variant_the_live_run_never_ran_is_named_with_its_reason():
    # H100 run J: the live table holds six variants (liger not installed), the H200 recording all seven
    live = pd.DataFrame(
        {
            "variant": ["eager", "compile", "liger", "course-geglu", "course-geglu-cat", "course-fused"],
            "status": ["ok", "ok", "unavailable", "ok", "ok", "ok"],
            "kernel_us": [255.68, 233.01, float("nan"), 220.68, 215.58, 178.72],
            "reason": [None, None, "liger-kernel is not importable (ModuleNotFoundError)", None, None, None],
        }
    )
    recorded = pd.DataFrame(
        {
            "variant": ["eager", "compile", "compile-max-autotune", "liger", "course-geglu", "course-geglu-cat",
                        "course-fused"],
            "status": ["ok"] * 7,
        }
    )  # fmt: skip
    shown, note = nb06.available_rows(live, recorded, left_out=nb06.LIVE_LEFT_OUT)
    assert list(shown["variant"]) == ["eager", "compile", "course-geglu", "course-geglu-cat", "course-fused"]
    assert note == (
        "*Not in this table:* liger is not installed here; compile-max-autotune was not run here (its compile takes "
        "minutes). The recorded run has liger, compile-max-autotune."
    )
    # without a reason the variant is still named; a table that has every recorded variant says nothing
    assert "compile-max-autotune was not run here." in nb06.available_rows(live, recorded)[1]
    assert nb06.available_rows(recorded, recorded)[1] == ""
    assert nb06.available_rows(live.drop(columns="status"), recorded)[1] == (
        "*Not in this table:* compile-max-autotune was not run here. The recorded run has compile-max-autotune."
    )
    # the live run leaves out exactly the variants it gives a reason for
    from helpers.lessons.mlp_results import LIVE_BENCHMARK
    from helpers.mlp.variants import VARIANT_NAMES

    ran = LIVE_BENCHMARK[LIVE_BENCHMARK.index("--variants") + 1].split(",")
    assert set(ran) == set(VARIANT_NAMES) - set(nb06.LIVE_LEFT_OUT) and "compile-max-autotune" not in ran
