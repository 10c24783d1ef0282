"""Lesson 09's exposed communication and profiler cost read rank by rank, fed the numbers of an H100 machine's run:
rank 0 had about 5 ms of communication exposed per step and rank 1 about 0.5 ms, so one median over both ranks
(2.8 ms) described neither; the profiled step (69 and 71 ms) likewise."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers.lessons import nb09

# 09 cell 25 (communication_per_step of the CPU run ddp_bucket25, us)
PER_STEP = pd.DataFrame(
    {
        "rank": [0, 0, 0, 1, 1, 1],
        "step": [1, 2, 3, 1, 2, 3],
        "step_us": [17800.33, 18612.38, 21055.25, 17882.35, 18529.19, 20836.05],
        "exposed_communication_us": [5057.54, 5071.75, 7050.28, 487.47, 522.07, 588.95],
    }
)


def test_exposed_communication_is_given_per_rank():
    text = nb09.exposed_per_rank_text(PER_STEP)
    assert text == (
        "5.1 ms per step is exposed, out of 18.6 ms on rank 0, 0.5 ms out of 18.5 ms on rank 1 (each rank's median step)"
    )
    assert "2.8 ms" not in text  # the median over both ranks' steps
    with pytest.raises(ValueError, match="exposed_communication_us"):
        nb09.exposed_per_rank_text(PER_STEP.drop(columns="exposed_communication_us"))


# 09 cell 34 (per_rank of the H200 recording ddp_bucket25)
RANKS = pd.DataFrame(
    {
        "rank": [0, 1],
        "profiled_step_ms": [68.65, 71.29],
        "unprofiled_step_ms": [46.38, 46.40],
        "gpu_waits_for_cpu_ms": [23.26, 1.31],
        "waited_least": [True, False],
    }
)


def test_the_profilers_cost_is_read_on_the_rank_that_waited_least():
    text = nb09.profiler_cost_text(RANKS)
    assert text.startswith("On rank 0, the rank that waited least, a profiled step took **69 ms**")
    assert "without the profiler **46 ms** (1.48x)" in text and "waiting for its CPU 23 ms" in text
    assert "**70 ms**" not in text  # the median over both ranks
    # the profiler runs on both ranks: the other rank's small wait is shown, and the cause left open
    assert "Beside it, the GPU waited for its CPU 1 ms on rank 1:" in text and "not in these traces" in text
    with pytest.raises(ValueError, match="waited_least"):
        nb09.profiler_cost_text(RANKS.assign(waited_least=False))
