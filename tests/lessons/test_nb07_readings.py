"""Lesson 07's computed sentences, fed the numbers two H200 runs gave (so the GPU branches are tested on a CPU)."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers.lessons import nb07_readings as r


def test_a_ranking_inside_the_rounds_spread_is_a_tie():
    # pass 2: your kernel 0.25 ms, the course's and SDPA flash 0.36 ms each
    rounds = {
        "your kernel": [0.25, 0.24, 0.26, 0.25, 0.27],
        "nb07.flash_attention": [0.36, 0.35, 0.37, 0.36, 0.40],
        "SDPA flash": [0.36, 0.36, 0.35, 0.38, 0.36],
    }
    text = r.ranking_sentence(rounds)
    assert text.startswith("Fastest by the median of its rounds: `your kernel`, 0.25 ms")
    assert "is slower (0.36 ms" in text and "ties" not in text
    # pass 1: 0.62 against 0.50 against 0.44, but with rounds that overlap
    wide = {"your kernel": [0.62, 0.45, 0.70, 0.50, 0.55], "SDPA flash": [0.44, 0.52, 0.60, 0.47, 0.41]}
    assert r.ranking_sentence(wide).startswith("Too close to call here")
    with pytest.raises(ValueError):
        r.ranking_sentence({"one": [1.0, 1.0, 1.0]})


def test_causal_time_above_its_flops_is_said_from_the_numbers():
    table = pd.DataFrame({"seq": [2048, 8192], "time_ratio": [0.70, 0.55], "flops_ratio": [0.5002, 0.5001]})
    text = r.causal_sentence(table)
    assert "at seq 2048 causal takes 0.70" in text and "0.50 of its FLOPs" in text
    assert "computed in full and masked" in text and "at 2048 that leaves" in text  # 8192: within 0.05
    close = table.assign(time_ratio=[0.52, 0.51])
    assert "Nearly all the skipped work is saved" in r.causal_sentence(close)
    with pytest.raises(ValueError, match="time_ratio"):
        r.causal_sentence(table.drop(columns="time_ratio"))


def test_the_sliding_windows_partial_tiles_are_named():
    # H200: causal 231 us, window 108 us; BlockMasks at seq 2048, tiles of 128: (partial, full)
    text = r.flex_tiles_sentence({"causal": 231.07, "sliding_window": 107.9}, {"causal": (16, 120), "sliding_window": (30, 15)})  # fmt: skip
    assert "45 tiles against causal's 136 (33%)" in text and "(47%)" in text
    assert "67% of the window's tiles are partial" in text and "falls less than the tiles" in text
    with pytest.raises(ValueError, match="both masks"):
        r.flex_tiles_sentence({"causal": 1.0}, {"causal": (1, 1)})


def test_the_live_benchmark_shows_no_targets():
    from helpers.lessons.nb07_readings import benchmark_line_shown

    assert benchmark_line_shown("sdpa-flash        128   4096      512.0      530.1    350.2      40.1  1.0e-03")
    assert not benchmark_line_shown("targets: course <= 1.0 x flash, <= 1.2 x the fastest other variant")
    assert not benchmark_line_shown("[  71.3s] targets: course <= 1.0 x flash")
    assert not benchmark_line_shown("  d= 128 seq=  4096 course     512.0 us  vs flash  1.10 (met: False)  vs fastest")
    assert not benchmark_line_shown("STAGE:2026-12-07 USDT profiler_start")
    with pytest.raises(TypeError):
        benchmark_line_shown(3)


def _times(**over):
    rows = {
        "variant": ["sdpa-cudnn", "course", "sdpa-efficient", "sdpa-math"],
        "kernels_per_call": [1, 1, 1, 24],
        "kernel_us": [481.8, 578.1, 1708.6, 28932.6],
        "time_us": [486.6, 575.7, 1708.0, 28771.3],
    }
    rows.update(over)
    return pd.DataFrame(rows)


def test_a_one_kernel_call_far_off_its_kernel_is_put_down_to_a_shared_gpu():
    assert r.wall_kernel_sentence(_times()).startswith("4 of 4 variants take the same time")
    # pass B on an H100: sdpa-efficient 2508 us on the clock for one kernel of 1709 us
    text = r.wall_kernel_sentence(_times(time_us=[486.6, 575.7, 2508.3, 28771.3]))
    assert "3 of 4 variants" in text and "in its 1 kernel (1.47x)" in text and "1 kernels" not in text
    assert "the GPU did not run alike for them" in text and "cannot check" in text
    # the hand-written attention's copy is named, not blamed on the machine
    eager = pd.DataFrame({"variant": ["manual-eager"], "kernels_per_call": [5], "kernel_us": [9147.0], "time_us": [10094.0]})  # fmt: skip
    text = r.wall_kernel_sentence(eager)
    assert "in its 5 kernels (1.10x)" in text and "masked_fill" in text and "did not run alike" not in text
    with pytest.raises(ValueError, match="missing columns"):
        r.wall_kernel_sentence(eager.drop(columns="time_us"))


def test_the_plain_kernel_beating_the_course_is_explained_only_when_it_wins():
    # both H100 passes: your kernel 0.24 ms, the course's 0.29 ms
    rounds = {"your kernel": [0.24, 0.24, 0.25, 0.23, 0.32], "course": [0.29, 0.29, 0.30, 0.28, 0.61]}
    note = r.kernel_race_note(rounds, "your kernel", "course", "NVIDIA H100 80GB HBM3")
    assert "beat the course's by 1.21x on NVIDIA H100" in note and "On the clock" in note and "H200" not in note
    assert r.kernel_race_note({"your kernel": [0.3, 0.31, 0.29], "course": [0.3, 0.29, 0.31]}, "your kernel", "course", "X") == ""  # fmt: skip
    assert r.kernel_race_note({"your kernel": [0.4, 0.41, 0.42], "course": [0.3, 0.29, 0.31]}, "your kernel", "course", "X") == ""  # fmt: skip
    with pytest.raises(ValueError, match="no rounds"):
        r.kernel_race_note(rounds, "yours", "course", "X")


def test_the_lessons_ceilings_go_to_the_benchmark_as_a_file(tmp_path):
    from helpers.measure.ceilings import ceilings_from_dict

    assert r.ceilings_args(None, tmp_path) == []
    ceilings = r.reference_ceilings()
    args = r.ceilings_args(ceilings, tmp_path)
    assert args[0] == "--ceilings"
    import json

    assert ceilings_from_dict(json.loads(open(args[1]).read())) == ceilings
    with pytest.raises(TypeError):
        r.ceilings_args({"matmul": 1}, tmp_path)
