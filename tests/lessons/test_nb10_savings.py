"""Lesson 10's sentences over the table of fixes and the critical path, fed the numbers two H200 runs gave (so the
GPU branches are tested on a CPU)."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers.lessons import nb10


def _fixes(rows):
    cols = ["fix", "predicted_us", "profiler_ratio", "measured_us", "measured_q1_us", "measured_q3_us"]
    t = pd.DataFrame(rows, columns=cols)
    held, scaled = [], []
    for r in t.itertuples():
        s = {"median": r.measured_us, "q1": r.measured_q1_us, "q3": r.measured_q3_us}
        held.append(nb10.prediction_held(r.predicted_us, s))
        scaled.append(nb10.prediction_held(r.predicted_us * r.profiler_ratio, s))
    return t.assign(held=held, scaled_held=scaled)


# H200, pass 1 and pass 2: the table of all the fixes
RUN_A = _fixes(
    [
        ("optimizer", 9153, 0.70, 5308, 4918, 7030),
        ("pointwise", 2167, 0.62, 5468, 4746, 6350),
        ("item", 805, 0.81, 222, 80, 253),
        ("copies", 251, 0.92, 430, 286, 1252),
        ("fp32", 0, 1.09, -2710, -3039, -2492),
    ]
)
RUN_B = _fixes(
    [
        ("optimizer", 9197, 0.72, 5409, 5273, 5929),
        ("pointwise", 1228, 0.94, 4524, 4071, 5089),
        ("item", 2266, 0.75, 246, -462, 293),
        ("copies", 255, 0.67, 274, 14, 391),
        ("fp32", 0, 0.98, -2173, -2528, -1969),
    ]
)


def test_scaling_that_turned_a_verdict_says_so():
    assert RUN_A["scaled_held"].sum() == 1 and RUN_A["held"].sum() == 0
    a = nb10.scaling_verdict(RUN_A)
    assert "1 of the 4" in a and "against 0 unscaled" in a
    assert "changed no verdict" not in a and "would have turned the `optimizer` prediction from missed to held" in a
    b = nb10.scaling_verdict(RUN_B)
    assert (
        "2 of the 4" in b
        and "against 1 unscaled" in b
        and "would have turned the `optimizer` prediction from missed to held" in b
    )
    assert "changed no verdict" not in b


def test_scaling_that_lost_a_verdict_and_one_that_changed_none():
    lost = RUN_A.assign(held=[True] + [False] * 4, scaled_held=[False] * 5)
    assert "would have turned the `optimizer` prediction from held to missed" in nb10.scaling_verdict(lost)
    two = RUN_A.assign(held=[True, True] + [False] * 3, scaled_held=[False] * 5)
    names = " and ".join(f"`{f}`" for f in two["fix"].iloc[:2])
    assert f"would have turned the {names} predictions from held to missed" in nb10.scaling_verdict(two)
    same = RUN_A.assign(scaled_held=RUN_A["held"])
    assert "changed no verdict" in nb10.scaling_verdict(same)
    assert nb10.scaling_verdict(RUN_A.assign(predicted_us=0.0)) == ""
    with pytest.raises(ValueError, match="scaled_held"):
        nb10.scaling_verdict(RUN_A.drop(columns="scaled_held"))


def test_the_first_fixs_scaling_note_on_the_h200():
    s = {"median": 5441.0, "q1": 3890.0, "q3": 6612.0, "step": 19513.0}
    note = nb10.scaling_note(9153.0, 0.70, s)
    assert "6,407 us" in note and "held where the bound missed" in note
    assert "held where" not in nb10.scaling_note(5441.0, 0.5, s)
    with pytest.raises(ValueError, match="positive"):
        nb10.scaling_note(9153.0, 0.0, s)


def test_a_fix_that_made_the_step_slower_is_explained_as_such():
    launch_bound = {"fp32": True}
    text = nb10.missed_reasons(RUN_A, launch_bound)
    assert "Slower (fp32)" in text and "2,710 us per step" in text and "2,492 to 3,039" in text
    assert "cast kernel" in text and "launch-bound" in text
    over = text.split("Over (")[1].split(")")[0]
    assert "fp32" not in over and "optimizer" in over and "item" in over
    assert "Under (pointwise, copies)" in text
    b = nb10.missed_reasons(RUN_B, launch_bound)
    assert "2,173 us per step" in b
    assert "cast kernel" not in nb10.missed_reasons(RUN_A, {})  # no launch-bound evidence: no launch story


def test_the_path_sentence_follows_the_device_share():
    # H200, pass 1: the launch-bound step's path by kind
    h200 = pd.DataFrame(
        {
            "kind": ["cpu", "cpu gap", "memcpy", "sync wait", "launch delay"],
            "pct": [99.6, 0.19, 0.17, 0.084, 0.0023],
        }
    )
    text = nb10.path_sentence(h200, on_gpu=True)
    assert "hardly leaves the host" in text and "0.2 %" in text and "passes between" not in text
    busy = pd.DataFrame({"kind": ["kernel", "cpu"], "pct": [60.0, 40.0]})
    assert "passes between the host and the device" in nb10.path_sentence(busy, on_gpu=True)
    assert "Python thread" in nb10.path_sentence(busy, on_gpu=False)


def test_the_noisy_held_sentence_agrees_with_its_number():
    assert nb10.noisy_held_text([]) == ""
    one = nb10.noisy_held_text(["item"])
    assert one.startswith("Of these, item held only because its rounds spread widely: too noisy") and "their" not in one
    two = nb10.noisy_held_text(["item", "copies", "fp32"])
    assert two.startswith("Of these, item, copies and fp32 held only because their rounds spread widely")
    with pytest.raises(TypeError, match="list of fix names"):
        nb10.noisy_held_text("item")
