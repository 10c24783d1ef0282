"""Lesson 09's two step times without the profiler, fed the per-rank steps of the H200 recording's FSDP2 run with
prefetching (the job's step at 62.22 ms, the ranks' medians at 61.39 and 60.95 ms)."""

from __future__ import annotations

import pytest

from helpers.lessons import nb09

PREFETCH = {
    "step_ms": 62.22,
    "ranks": [
        {"rank": 0, "step_ms": [62.35, 64.05, 62.36, 62.68, 57.05, 64.08, 60.43, 55.47, 56.03, 57.37]},
        {"rank": 1, "step_ms": [59.74, 61.88, 62.93, 62.17, 62.08, 59.52, 60.96, 60.94, 54.85, 58.87]},
    ],
}


def test_the_job_step_is_the_median_of_the_slowest_rank_per_step():
    steps = nb09.job_steps(PREFETCH)
    assert steps[:3] == [62.35, 64.05, 62.93] and len(steps) == 10
    assert sorted(steps)[4:6] == pytest.approx([62.08, 62.35])  # their median: the summary's step_ms
    with pytest.raises(ValueError, match="summary"):
        nb09.job_steps({})
    with pytest.raises(ValueError, match="same number"):
        nb09.job_steps({"ranks": [{"rank": 0, "step_ms": [1.0, 2.0]}, {"rank": 1, "step_ms": [1.0]}]})


def test_a_job_step_above_every_ranks_median_says_why():
    note = nb09.job_step_note("fsdp_prefetch", PREFETCH, "unprofiled_step_ms")
    assert "(62.2 ms for fsdp_prefetch)" in note and "the slowest rank's time" in note
    assert "`unprofiled_step_ms` is each rank's own median (61.4 ms on rank 0, 61.0 ms on rank 1)" in note
    assert "longer than every rank's median, because the ranks were slow at different steps" in note
    # one rank slowest at every step: the job's step is that rank's median
    same = {"ranks": [{"rank": 0, "step_ms": [5.0, 5.2, 5.1]}, {"rank": 1, "step_ms": [4.9, 5.0, 5.0]}]}
    note = nb09.job_step_note("ddp_bucket200", same)
    assert "here the job's step is the slowest rank's own median (rank 0)" in note and "they agree" not in note
    with pytest.raises(TypeError):
        nb09.job_step_note("", same)
