"""Lesson 06 over the shared H100 of review 2: times that contradict each other name no host cause, a lead that
shrinks says by how much, and a training step whose two clocks disagree ranks nothing."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers import nb06

COLS = ["variant", "kernel_us", "graphed_us", "e2e_nosync_us", "e2e_sync_us", "host_overhead_us", "enqueue_us"]
SHARED = pd.DataFrame(
    [
        ("eager", 253.7, 256.5, 261.5, 284.0, 30.3, 88.3),
        ("compile", 231.0, 229.5, 233.0, 296.4, 65.4, 124.5),
        ("course-geglu", 221.8, 495.8, 493.6, 328.4, 106.6, 482.2),
        ("course-geglu-cat", 214.4, 214.3, 485.3, 284.0, 69.6, 482.7),
        ("course-fused", 178.1, 175.3, 178.3, 261.6, 83.4, 128.2),
    ],
    columns=COLS,
)


def _row(**kw: float) -> pd.DataFrame:
    base = {"variant": "v", "kernel_us": 200.0, "graphed_us": 200.0, "e2e_nosync_us": 300.0, "e2e_sync_us": 350.0}
    return pd.DataFrame([{**base, "enqueue_us": 250.0, **kw}])


def test_issue_longer_than_a_synchronised_call_is_disturbed_not_a_host_cause():
    text = nb06.hiding_sentence(SHARED)
    assert "took longer to issue a call" not in text
    assert (
        "course-geglu (482 us to issue a call against 328 us synchronised, 494 us back to back against 328 us" in text
    )
    assert "disturbed them" in text and "hid behind the GPU's for eager, compile, course-fused" in text


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"enqueue_us": 400.0}, "400 us to issue a call against 350 us synchronised"),
        ({"e2e_nosync_us": 400.0}, "400 us back to back against 350 us synchronised"),
        ({"graphed_us": 340.0}, "340 us replayed from a graph against 300 us back to back"),
    ],
)
def test_each_contradiction_is_named(change, reason):
    assert nb06.disturbed_times(_row(**change)) == {"v": [reason]}
    text = nb06.hiding_sentence(_row(**change))
    assert reason in text and "It did not" not in text


def test_a_consistent_slow_host_keeps_its_cause():
    # issuing (250 us) longer than the kernels (200 us) yet shorter than synchronised: the host set the pace
    assert nb06.disturbed_times(_row()) == {}
    assert "its host took longer to issue a call" in nb06.hiding_sentence(_row())


def test_a_lead_that_loses_a_third_says_by_how_much():
    text = nb06.host_lead_sentence(SHARED)
    assert "lead of 53 us comes out at 35 us synchronised" in text
    assert "differ by 18 us. These are single numbers" in text and "level within the noise" not in text


def _training(eager, cat, save, recompute) -> pd.DataFrame:
    rows = [("eager", *eager, 319.3), ("course-geglu-cat", *cat, 269.0), ("course-fused-save", *save, 190.3),
            ("course-fused-recompute", *recompute, 168.3)]  # fmt: skip
    return pd.DataFrame(rows, columns=["variant", "step_us", "step_wall_us", "peak_mb"])


def test_training_clocks_that_disagree_rank_nothing():
    live = _training((820.6, 2272.9), (697.1, 2341.9), (734.0, 764.6), (1200.0, 1133.4))
    assert nb06.clocks_disagree(live) == ["eager", "course-geglu-cat"]
    text = nb06.training_sentence(live)
    assert "CUDA events recorded around each step" in text and "wall clock" in text
    assert "eager (821 against 2273 us)" in text and "ranks no step time" in text
    assert "Fastest" not in text and "eager's step time" not in text
    assert "`course-fused-save`: 190 MB peak against eager's 319 MB." in text


def test_training_clocks_that_agree_rank_on_events():
    calm = _training((820.0, 850.0), (700.0, 720.0), (734.0, 760.0), (1200.0, 1150.0))
    assert nb06.clocks_disagree(calm) == []
    text = nb06.training_sentence(calm)
    assert "Fastest step here: **course-geglu-cat**" in text and "ranks no" not in text
    one_clock = calm.drop(columns="step_wall_us")
    assert nb06.clocks_disagree(one_clock) == [] and "wall clock" not in nb06.training_sentence(one_clock)
