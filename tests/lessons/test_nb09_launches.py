"""Lesson 09's sentences over runs launched once each on a CPU, fed per-rank medians like those two H200-host runs
gave (the GPU machine had one GPU, so its ranks ran gloo on 16 cores)."""

from __future__ import annotations

import pytest

from helpers.lessons import nb09


def _summary(*rank_medians, wobble=0.3):
    steps = lambda m: [m - wobble, m, m + wobble, m - 0.5 * wobble, m + 0.5 * wobble]  # noqa: E731
    return {"ranks": [{"rank": r, "step_ms": steps(m)} for r, m in enumerate(rank_medians)]}


def test_each_run_gets_its_own_verdict():
    # pass 2: the ranks' medians moved by -0.2 and -1.4 ms; one run beyond the spread, the other inside it
    base = _summary(9.14, 9.16)
    text = nb09.launches_sentence(
        "the first run", base, {"ddp_bucket200": _summary(8.94, 8.92), "ddp_one_bucket": _summary(7.63, 7.54)}
    )
    assert "ddp_bucket200: the median step changed by -0.2 ms on rank 0 and -0.2 ms on rank 1, within that spread, so these runs cannot say." in text  # fmt: skip
    assert "ddp_one_bucket: the median step changed by -1.5 ms on rank 0 and -1.6 ms on rank 1, more than that spread on every rank: a hint, not a result." in text  # fmt: skip
    # one sentence for the spread and one per run, not one sentence judging them all
    assert text.startswith("Against the first run, the middle half of one rank's timed steps spans up to ")
    assert "; " not in text and text.count(". ") == 4
    # the spread inside one launch is no bar between two: never "beyond the noise"
    assert "one launch" in text and "beyond" not in text and "launch each run again" in text


def test_a_slow_first_launch_is_judged_per_rank_and_called_a_hint():
    # pass 1: the first launch's ranks at 29.6/29.1 ms, the job's step (the slowest rank per step) at 34.7
    base = _summary(29.63, 29.05, wobble=7.0)
    change = nb09.rank_changes(base, _summary(8.89, 8.91))
    assert change["change_ms"] == pytest.approx([-20.74, -20.14]) and not change["within_noise"]
    text = nb09.launches_sentence("the first run", base, {"ddp_bucket200": _summary(8.89, 8.91)})
    assert "-20.7 ms on rank 0 and -20.1 ms on rank 1" in text and "hint, not a result" in text
    assert "cannot say" not in text


def test_a_run_inside_the_spread_on_some_ranks_or_with_ranks_apart_cannot_say():
    base = _summary(10.0, 10.0, 10.0)
    text = nb09.launches_sentence("base", base, {"a": _summary(9.9, 8.0, 7.9), "b": _summary(11.0, 9.0, 10.5)})
    assert "a: the median step changed by -0.1 ms on rank 0, -2.0 ms on rank 1 and -2.1 ms on rank 2, within that spread on rank 0, so" in text  # fmt: skip
    assert "b: the median step changed by +1.0 ms on rank 0, -1.0 ms on rank 1 and +0.5 ms on rank 2, its ranks moved in opposite directions" in text  # fmt: skip
    assert "launch each run again" not in text  # no run called a hint: no caveat about hints


def test_ranks_that_disagree_are_inside_the_noise():
    change = nb09.rank_changes(_summary(10.0, 10.0), _summary(12.0, 8.0))
    assert change["within_noise"]
    with pytest.raises(ValueError, match="summary"):
        nb09.rank_changes({}, _summary(1.0))
    with pytest.raises(ValueError, match="different ranks"):
        nb09.rank_changes(_summary(1.0, 1.0), _summary(1.0))


def test_the_cores_are_counted():
    assert "share 2 cores" in nb09.cores_phrase(2, cores=2)
    many = nb09.cores_phrase(2, cores=16)
    assert "16 cores" in many and "share" not in many
    assert str(__import__("os").cpu_count()) in nb09.cores_phrase(2) or "share" in nb09.cores_phrase(2)
    with pytest.raises(ValueError):
        nb09.cores_phrase(0)


def test_a_thin_margin_is_no_faster_possibly_slower():
    # H100 pass A: +8.1 ms against a spread of 8.0 ms
    text = nb09.no_faster_text({"change_ms": 8.1, "noise_ms": 8.0, "within_noise": False})
    assert "no faster, possibly slower (+8.1 ms against a spread of 8.0 ms" in text and "more than" not in text
    inside = nb09.no_faster_text({"change_ms": 3.0, "noise_ms": 8.0, "within_noise": True})
    assert "less than the spread" in inside
    with pytest.raises(ValueError):
        nb09.no_faster_text({"change_ms": 1.0})


def test_a_bucket_prediction_against_two_launches_is_never_more_than_a_hint():
    # H100 pass: predicted +0.5 ms, measured -0.6 ms beyond a 0.4 ms spread, on a 46 ms step
    beyond = {"change_ms": -0.6, "noise_ms": 0.4, "within_noise": False}
    text = nb09.bucket_prediction_text(0.53, beyond, 46.0)
    assert "hint, not a result" in text and "inconclusive" in text and "1.3% of the step" in text
    assert "opposite" in text and "if another launch showed it again" in text
    assert "the sign the model predicted" in nb09.bucket_prediction_text(-0.3, beyond, 46.0)
    inside = {"change_ms": -0.2, "noise_ms": 0.4, "within_noise": True}
    assert "and so is the prediction" in nb09.bucket_prediction_text(0.3, inside, 46.0)
    assert "cannot confirm it" in nb09.bucket_prediction_text(2.0, inside, 46.0)
    with pytest.raises(ValueError):
        nb09.bucket_prediction_text(0.5, {"change_ms": 1.0}, 46.0)
    with pytest.raises(ValueError):
        nb09.bucket_prediction_text(0.5, beyond, 0.0)


def test_a_change_that_prints_as_zero_moved_in_no_direction():
    # H100 run J: ddp_bucket25 at 5.72/5.73 ms per rank, ddp_bucket200 at 5.72/5.78 ms
    base = _summary(5.724, 5.728, wobble=0.2)
    text = nb09.launches_sentence("the first run", base, {"ddp_bucket200": _summary(5.716, 5.780, wobble=0.2)})
    assert "ddp_bucket200: the median step changed by 0.0 ms on rank 0 and +0.1 ms on rank 1, within that spread, so these runs cannot say." in text  # fmt: skip
    assert "-0.0" not in text and "opposite" not in text
    # a change that prints as zero on every rank is inside any spread, even one that rounds to nothing
    flat = nb09.launches_sentence("base", _summary(5.0, 5.0, wobble=0.0), {"x": _summary(5.01, 4.99, wobble=0.0)})
    assert "changed by 0.0 ms on rank 0 and 0.0 ms on rank 1, within that spread" in flat
