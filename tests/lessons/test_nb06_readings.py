"""Lesson 06's sentences over a shared H100 (review 57, passes A and B): no cause, ranking or bound that the
numbers on screen contradict."""

import pandas as pd
import pytest

from helpers import nb06
from helpers.lessons.results import load_results

COLS = ["variant", "kernel_us", "graphed_us", "e2e_nosync_us", "e2e_sync_us", "host_overhead_us", "enqueue_us"]
H100_A = pd.DataFrame(
    [
        ("eager", 255.9, 329.6, 289.2, 320.2, 64.3, 95.4),
        ("compile", 233.3, 231.6, 273.8, 316.7, 83.4, 140.5),
        ("course-geglu", 223.1, 224.6, 228.1, 257.2, 34.1, 145.9),
        ("course-geglu-cat", 215.5, 215.4, 218.9, 250.8, 35.3, 141.3),
        ("course-fused", 179.5, 248.1, 180.5, 228.4, 48.9, 69.7),
    ],
    columns=COLS,
)
H100_B = pd.DataFrame(
    [
        ("eager", 255.0, 259.2, 267.9, 290.5, 35.5, 100.1),
        ("compile", 232.5, 232.8, 236.2, 302.8, 70.2, 142.7),
        ("course-geglu", 222.1, 224.9, 228.7, 281.5, 59.4, 222.7),
        ("course-geglu-cat", 215.8, 216.2, 219.7, 248.5, 32.7, 127.1),
        ("course-fused", 180.3, 178.7, 181.8, 249.6, 69.3, 102.5),
    ],
    columns=COLS,
)


def test_back_to_back_above_kernels_is_put_down_to_the_host_only_when_enqueue_says_so():
    a = nb06.hiding_sentence(H100_A)
    # eager's replay (330 us) is slower than its calls back to back (289 us): disturbed, named without a cause
    assert "took longer to issue a call" not in a
    assert "eager (330 us replayed from a graph against 289 us back to back)" in a and "does not explain" in a
    calm_replay = H100_A.copy()
    calm_replay.loc[calm_replay["variant"] == "eager", "graphed_us"] = 270.0
    # eager issued a call in 95 us against 256 us of kernels: the host cannot be the cause
    assert "eager (289 us against 256 us of kernels, 95 us to issue a call)" in nb06.hiding_sentence(calm_replay)
    slow_host = calm_replay.copy()
    slow_host.loc[slow_host["variant"] == "eager", "enqueue_us"] = 300.0
    text = nb06.hiding_sentence(slow_host)
    assert "It did not for eager (289 us against 256 us of kernels, 300 us to issue a call): its host took" in text
    assert "compile (274 us against 233 us of kernels, 140 us to issue a call) took longer" in text
    assert "It did not" not in nb06.hiding_sentence(H100_B)


def test_a_replay_slower_than_back_to_back_is_flagged():
    assert nb06.graph_disturbed(H100_A) == ["eager", "course-fused"]
    text = nb06.graphed_sentence(H100_A)
    assert "eager (330 us against 289 us)" in text and "cannot be slower" in text
    assert nb06.graph_disturbed(H100_B) == [] and nb06.graphed_sentence(H100_B) == ""
    with pytest.raises(ValueError, match="graphed_us"):
        nb06.graph_disturbed(H100_A.drop(columns="graphed_us"))


def test_a_host_lead_inside_the_noise_is_a_tie():
    # pass B: overheads 69.3 and 70.2 us, a 1 us difference, not "smaller host work"
    b = nb06.host_lead_sentence(H100_B)
    assert "lead of 52 us comes out at 53 us synchronised" in b and "smaller host work" not in b
    assert "differ by 1 us. These are single numbers" in b and b.count("single numbers") == 1
    # pass A: 49 against 83 us, beyond 10% of the synchronised times
    assert "smaller host work makes its kernel-time lead of 54 us grow to 88 us" in nb06.host_lead_sentence(H100_A)


def test_the_floor_bound_uses_the_ceilings_of_the_gpu_that_ran():
    h100 = pd.DataFrame(
        {
            "variant": ["compile", "course-fused"],
            "kernel_us": [233.26, 179.52],
            "plan_floor_us": [189.23, 143.12],
            "pct_of_plan_floor": [81.1, 79.7],
        }
    )
    text = nb06.floor_bound_sentence(h100, "NVIDIA H100 80GB HBM3")
    assert "ceilings of NVIDIA H100 80GB HBM3" in text and "1.32x faster" in text and "1.30x in kernel time" in text
    assert text.endswith("1.30x in kernel time, within 10 % of the 1.32x the floors allow.")
    slow = h100.copy()
    slow.loc[0, "kernel_us"] = 190.0  # 1.06x measured against the 1.32x the floors allow
    assert nb06.floor_bound_sentence(slow, "H100").endswith("more than 10 % short of the 1.32x the floors allow.")
    far = h100.copy()
    far.loc[0, ["kernel_us", "pct_of_plan_floor"]] = [300.0, 63.1]
    assert "beyond that: compile ran further from its floor (63% of it)" in nb06.floor_bound_sentence(far, "H100")
    with pytest.raises(ValueError, match="no row"):
        nb06.floor_bound_sentence(h100.iloc[:1], "H100")


def test_the_two_geglu_kernels_level_within_the_share():
    timing = pd.DataFrame(
        {"kernel": ["your kernel (1-D blocks)", "nb06.geglu (2-D tiles)"], "kernel_us": [50.62, 50.55]}
    )
    assert "are level" in nb06.race_sentence(timing) and "cost nothing measurable" in nb06.race_sentence(timing)
    timing.loc[0, "kernel_us"] = 70.0
    assert nb06.race_sentence(timing).startswith("By kernel time, nb06.geglu (2-D tiles) is faster: 51 against 70 us")


def test_the_fastest_training_step_ties_with_those_level_with_it():
    a = pd.DataFrame(
        {
            "variant": ["eager", "compile", "course-geglu-cat", "course-fused-save", "course-fused-recompute"],
            "step_us": [767.2, 662.4, 695.2, 662.1, 982.5],
            "peak_mb": [319.3, 218.6, 269.0, 190.3, 168.3],
        }
    )
    text = nb06.training_sentence(a)
    assert "**course-fused-save** (662 us), level within 10% with compile (662 us), course-geglu-cat (695 us)" in text
    assert "too close to call" in text
    b = a.assign(step_us=[821.7, 1241.9, 1416.3, 664.6, 891.1])
    assert "level within" not in nb06.training_sentence(b).split(".")[0]


def test_the_card_of_a_lesson_hides_the_project_rows():
    recorded = load_results("h200_mlp_variants")
    card = recorded.card(lesson=True)
    assert not {"git_commit_note", "table targets", "file", "command", "git_commit"} & set(card["item"])
    assert {"device", "torch", "date", "table variants"} <= set(card["item"]) and len(recorded.card()) >= len(card)
