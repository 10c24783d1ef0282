"""Lesson 07's race verdicts, RoPE's summary line and the wall-versus-kernel gap of a many-kernel call, fed
synthetic numbers for each branch."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers.lessons import nb07_readings as r


def test_a_race_whose_rounds_all_overlap_names_no_winner():
    # a shared GPU: every kernel's middle half spans about 2x
    wide = {
        "your kernel": [0.24, 0.25, 0.25, 0.2555, 0.56, 0.56, 0.57],
        "nb07.flash_attention": [0.35, 0.36, 0.36, 0.37, 0.53, 0.54, 0.55],
        "SDPA flash": [0.34, 0.35, 0.35, 0.36, 0.51, 0.51, 0.65],
    }
    text = r.ranking_sentence(wide)
    assert text.startswith("Too close to call here: no variant wins.")
    assert "Fastest" not in text and "`your kernel`, 0.26 ms" in text  # the table's rounding
    # one ties, one is beyond: the lowest is not called the fastest
    mixed = {"a": [1.0, 0.9, 1.1, 1.0], "b": [1.05, 0.95, 1.15, 1.05], "c": [2.0, 2.0, 2.1, 2.0]}
    text = r.ranking_sentence(mixed)
    assert text.startswith("Lowest median: `a`") and "`b` (1.05 ms) ties" in text and "`c` is slower" in text


def test_ropes_share_is_said_of_the_gpu_that_ran():
    assert r.rope_share_sentence(0.47, "NVIDIA H100 80GB HBM3", live=True) == (
        "Here, on NVIDIA H100 80GB HBM3, in this run's profile, RoPE's small kernels took 47% of the block's kernel "
        "time: a share of one run, on a GPU other work may share."
    )
    assert r.rope_share_sentence(0.5, "NVIDIA H200", live=False).startswith("On the H200's reference trace,")
    assert r.rope_share_sentence(None, "cpu", live=False) == ""
    with pytest.raises(ValueError):
        r.rope_share_sentence(1.5, "x", live=True)


def test_a_many_kernel_call_slower_than_its_kernels_names_the_launch_gaps():
    times = pd.DataFrame(
        {"variant": ["sdpa-math"], "kernels_per_call": [24], "kernel_us": [28821.6], "time_us": [34316.2]}
    )
    text = r.wall_kernel_sentence(times)
    assert "in its 24 kernels (1.19x): between its 24 kernels the GPU waits for the host" in text
    assert "shared with other work adds to it" in text
    faster = times.assign(time_us=[26000.0])  # the clock under the kernel sum: no gap to explain
    assert r.wall_kernel_sentence(faster).endswith("(0.90x).")
