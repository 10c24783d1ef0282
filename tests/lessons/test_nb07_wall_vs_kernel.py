"""Lesson 07's wall times read against kernel times and work, fed the numbers of the shared H100 run (review J):
section 3's rounds carried about 0.45 ms a call that no kernel explains, the sweep's SDPA times hardly grew, and
the race note and the wall-time table named their numbers in an order that read backwards."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers.lessons import nb07_readings as r
from helpers.lessons.display import reference_trace

# 07 cell 31 (ms per call, 5 rounds; median and range as on screen) and cell 37 (kernel us of one profiled call)
BACKEND_ROUNDS = {
    "math": [10.76, 11.41, 11.45, 11.51, 11.30],
    "flash": [0.73, 0.75, 0.75, 0.76, 0.74],
    "efficient": [0.92, 1.01, 1.02, 1.04, 1.00],
    "cudnn": [0.57, 0.58, 0.58, 0.59, 0.58],
}
BACKEND_KERNEL_US = {"math": 10934.34, "flash": 267.91, "efficient": 463.79, "cudnn": 147.11}


def test_backend_rounds_far_above_their_kernels_are_flagged_as_slowed():
    # about 0.45 ms over every kernel, three times the SDPA call's CPU time (146 us a call in a profiled call)
    text = r.backend_times_sentence(BACKEND_ROUNDS, BACKEND_KERNEL_US, {n: 146.3 for n in BACKEND_KERNEL_US})
    assert text.startswith("**Rounds slowed by something else on this GPU (other work, or its clocks):**")
    assert "flash 750 us a call against 268 us in its kernel (2.8x, 482 us more; against 146 us of CPU" in text
    assert "efficient 1,010 us a call against 464 us in its kernel (2.2x" in text
    assert "cudnn 580 us a call against 147 us in its kernel (3.9x" in text
    assert "Not flagged: math +476 us over its kernel (1.04x)" in text and "math 11,410" not in text  # 20 kernels
    calm = {n: [1.1 * us / 1e3] * 3 for n, us in BACKEND_KERNEL_US.items()}  # ms, 1.1x each kernel
    assert r.backend_times_sentence(calm, BACKEND_KERNEL_US).startswith("Every backend's wall time per call is its")
    # the CPU path: no kernels profiled, nothing checked, nothing claimed
    cpu = r.backend_times_sentence({"math": [6.54], "flash": [3.0]}, {"math": None, "flash": None})
    assert cpu.startswith("No kernel time was profiled") and "slowed" not in cpu
    with pytest.raises(ValueError, match="no rounds for 'cudnn'"):
        r.backend_times_sentence({"flash": [0.75]}, {"cudnn": 147.11})


# 07 cell 35: wall rounds in ms; the causal kernel at seq 2048 is cell 37's flash kernel (268 us). The full kernel
# and the seq-8192 kernels were not on screen: the values below are of that size (the full kernel visits about
# twice the causal's tiles; at seq 8192 the rounds sat within 1.5x of their kernels).
CAUSAL_2048 = {"causal": [0.75, 0.75, 0.76, 0.77, 0.76], "full": [0.87, 0.88, 0.90, 0.94, 0.89]}
CAUSAL_8192 = {"causal": [5.15, 5.20, 5.30, 5.18, 5.22], "full": [9.18, 9.30, 9.74, 9.25, 9.40]}


def _causal_table(full_2048_us: float = 505.0) -> pd.DataFrame:
    return pd.DataFrame(
        [
            r.causal_timing_row(2048, CAUSAL_2048, 0.5002, {"causal": 267.91, "full": full_2048_us}),
            r.causal_timing_row(8192, CAUSAL_8192, 0.5001, {"causal": 4480.0, "full": 8600.0}),
        ]
    )


def test_the_causal_ratio_is_read_from_the_kernels_and_the_clocks_dilution_named():
    table = _causal_table()
    assert list(table["wall_disturbed"]) == [True, False]
    assert table.loc[0, "time_ratio"] == pytest.approx(0.75 / 0.87)
    text = r.causal_sentence(table)
    assert "at seq 2048 causal takes 0.53 of the full attention's kernel time (0.86 on the clock)" in text
    # tiles explain the kernels: the 0.86 on the clock is not put down to the diagonal's tiles
    assert "computed in full and masked" not in text and "Nearly all the skipped work is saved" in text
    assert "at seq 2048, 482 us more than the causal kernel and 365 us more than the full one" in text
    assert "per-call overhead, not tiles" in text and "at seq 8192," not in text.split("On the clock")[1]
    # a kernel ratio well above the FLOP ratio is still put down to the diagonal's tiles
    wide = r.causal_sentence(_causal_table(full_2048_us=400.0))
    assert "computed in full and masked" in wide and "at 2048 that leaves the ratio above" in wide
    assert "(the longer the sequence, the smaller the diagonal's share)" in wide  # 0.67 at 2048, 0.52 at 8192


def test_a_causal_row_without_kernel_times_keeps_the_clocks_columns():
    row = r.causal_timing_row(1024, {"causal": [25.99, 42.33], "full": [33.94, 42.31]}, 0.5005)
    assert "kernel_ratio" not in row and row["causal_range"] == "25.99-42.33"
    assert row["time_ratio"] == pytest.approx(25.99 / 33.94)
    with pytest.raises(ValueError, match="'full' missing"):
        r.causal_timing_row(1024, {"causal": [1.0]}, 0.5)


# 07 cell 23 on the shared H100, and the same cell on this course's CPU run
H100_SWEEP = pd.DataFrame(
    {
        "seq": [1024, 2048, 4096, 8192],
        "gflop": [4.30, 17.19, 68.74, 274.91],
        "manual_ms": [0.61, 1.32, 4.70, 19.30],
        "sdpa_ms": [0.41, 0.44, 0.58, 1.02],
    }
)
CPU_SWEEP = pd.DataFrame(
    {
        "seq": [128, 256, 512, 1024],
        "gflop": [8.45e-3, 3.37e-2, 1.34e-1, 5.37e-1],
        "manual_ms": [0.75, 2.85, 12.09, 47.64],
        "sdpa_ms": [0.45, 1.36, 6.14, 15.90],
    }
)


def test_the_sweeps_growth_caveat_follows_the_numbers_not_the_device():
    gpu = r.sweep_growth_sentence(H100_SWEEP)
    assert "the work (causal FLOPs) grew 64x" in gpu and "of SDPA 2.5x" in gpu
    assert "order of magnitude, not for a growth rate" in gpu
    # 31.6x for 64x the work: at seq 1024 half the hand-written version's 0.61 ms is a fixed cost
    assert "The time of the hand-written version and SDPA did not follow the work" in gpu
    assert "the hand-written version took 0.61 ms at seq 1024, 2.0x its time at seq 8192" in gpu
    cpu = r.sweep_growth_sentence(CPU_SWEEP)
    assert "Each time grew with its work" in cpu and "order of magnitude" not in cpu
    noisy = CPU_SWEEP.assign(sdpa_ms=[0.45, 1.36, 0.90, 15.90])  # fell between two lengths
    assert "The time of SDPA did not follow the work" in r.sweep_growth_sentence(noisy)
    with pytest.raises(ValueError, match="missing columns"):
        r.sweep_growth_sentence(H100_SWEEP.drop(columns="gflop"))


# 07 cell 52 (us, 7 rounds): section 3 timed SDPA flash at 750 us, its kernel 268 us
RACE_US = {
    "your kernel": [230.0, 232.0, 232.0, 232.0, 232.0, 232.0, 233.0],
    "nb07.flash_attention": [270.0, 272.0, 272.0, 273.0, 276.0, 276.0, 278.0],
    "SDPA flash": [317.0, 317.0, 318.0, 319.0, 320.0, 320.0, 324.0],
}


def test_section_3s_disturbed_rounds_are_named_when_these_agree_with_the_kernel():
    text = r.wall_table_sentence(RACE_US, "SDPA flash", 750.0, 267.91, race="NOTE")
    assert "`SDPA flash` took 319 us a call here, against 750 us when section 3 timed the same call" in text
    assert "these rounds agree with its kernel time within 1.5x." in text and "section 3's timing within" not in text
    assert "Section 3's rounds of the same call took 2.4x these and 2.8x its kernel" in text
    assert "slowed those rounds" in text and text.endswith("NOTE") and "These rounds were disturbed" not in text
    both = r.wall_table_sentence(RACE_US, "SDPA flash", 330.0, 267.91)
    assert "agree with section 3's timing and with its kernel time within 1.5x." in both and "slowed" not in both


def test_the_race_note_names_whose_kernel_time_is_whose():
    rounds = {n: [x / 1e3 for x in v] for n, v in RACE_US.items()}
    note = r.kernel_race_note(rounds, "your kernel", "nb07.flash_attention", "H100", {"your kernel": 210.0, "nb07.flash_attention": 170.0})  # fmt: skip
    assert "In kernel time the course's is the faster (the course's 170 us against your 210 us" in note
    assert "the course's kernel is 1.24x faster" in note and "210 against 170" not in note


def test_kernel_time_per_call_is_the_median_steps_kernels():
    trace = reference_trace("h200_attention_sdpa_flash")
    per_step = trace.kernels().groupby("step")["duration_us"].sum()
    assert r.kernel_us_per_call(trace) == pytest.approx(float(per_step.median()))
    assert min(per_step) < r.kernel_us_per_call(trace) < max(per_step)


def test_a_cpu_profile_has_no_kernel_time():
    import torch

    import helpers

    x = torch.ones(8, 8)
    assert r.kernel_us_per_call(helpers.profile(lambda a: a @ a, x, steps=1, warmup=0)) is None
