"""Lesson 07's wall times on an H100 (torch 2.11) where every backend's call took its kernel plus about the same
90 us: the host's dispatch and synchronise, not other programs; and the sweep's SDPA time, which grew 9x for 64x
the work, read as a per-call cost at the short lengths."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers.lessons import nb07_readings as r
from helpers.lessons.display import reference_trace

# 07 cell 31 (ms per call, 5 rounds; medians and ranges as on screen) and one profiled call's kernel time each
ROUNDS_MS = {
    "math": [7.25, 7.26, 7.26, 7.28, 7.31],
    "flash": [0.35, 0.36, 0.36, 0.36, 0.37],
    "efficient": [0.55, 0.56, 0.56, 0.56, 0.57],
    "cudnn": [0.232, 0.236, 0.236, 0.238, 0.240],
}
KERNEL_US = {"math": 7145.19, "flash": 271.30, "efficient": 481.95, "cudnn": 147.39}
# cell 10: aten::scaled_dot_product_attention, 438.88 us of CPU over 3 calls
HOST_US = {n: 438.88 / 3 for n in KERNEL_US}


def test_a_per_call_cost_shared_by_every_backend_is_the_hosts_not_other_work():
    text = r.backend_times_sentence(ROUNDS_MS, KERNEL_US, HOST_US)
    assert "slowed" not in text and "other programs' work." in text  # named only to be ruled out
    assert "cudnn +89 us" in text and "flash +89 us" in text and "efficient +78 us" in text and "math +115 us" in text
    assert "SDPA's dispatch on the CPU (146 us of CPU a call" in text
    assert "cudnn took 1.6x its kernel on the clock" in text
    # without the CPU time the shared excess is still not put down to other programs, and its cause is left open
    bare = r.backend_times_sentence(ROUNDS_MS, KERNEL_US)
    assert "slowed" not in bare and "no CPU time was profiled here to tell which" in bare


def test_rounds_are_called_slowed_only_on_evidence():
    # one backend's excess far above the others' and the host's time
    cudnn_hit = {**ROUNDS_MS, "cudnn": [0.60, 0.61, 0.61, 0.62, 0.60]}
    text = r.backend_times_sentence(cudnn_hit, KERNEL_US)
    assert (
        text.startswith("**Rounds slowed by something else on this GPU")
        and "cudnn 610 us a call against 147 us" in text
    )
    assert "Not flagged: math +115 us over its kernel (1.02x), flash +89 us" in text
    # rounds that disagree among themselves, though their median is close to the kernel
    spread = {**ROUNDS_MS, "flash": [0.30, 0.36, 0.36, 0.36, 0.52]}
    text = r.backend_times_sentence(spread, KERNEL_US, HOST_US)
    assert "flash 360 us a call against 271 us in its kernel" in text and "rounds from 300 to 520 us" in text


def test_wall_rounds_disturbed_allows_the_hosts_time_per_call():
    cudnn_us = [1e3 * x for x in ROUNDS_MS["cudnn"]]
    assert r.wall_rounds_disturbed(cudnn_us, None, KERNEL_US["cudnn"])  # 1.6x the kernel: the ratio alone
    assert not r.wall_rounds_disturbed(cudnn_us, None, KERNEL_US["cudnn"], host_us=HOST_US["cudnn"])
    assert r.wall_rounds_disturbed([600.0] * 3, None, KERNEL_US["cudnn"], host_us=HOST_US["cudnn"])
    # cell 52: SDPA flash's rounds against section 3's 361 us and its 278 us kernel still agree
    assert not r.wall_rounds_disturbed([321.0, 325.0, 329.0, 340.0, 363.0], 361.0, 278.0)
    with pytest.raises(ValueError, match="host_us"):
        r.wall_rounds_disturbed(cudnn_us, None, 147.0, host_us=-1.0)


def test_host_us_per_call_reads_the_ops_cpu_time_per_call():
    trace = reference_trace("h200_attention_sdpa_flash")
    row = trace.ops().set_index("name").loc["aten::scaled_dot_product_attention"]
    assert r.host_us_per_call(trace) == pytest.approx(row["cpu_total_us"] / row["calls"])
    assert 0 < r.host_us_per_call(trace) < row["cpu_total_us"] or row["calls"] == 1
    assert r.host_us_per_call(trace, "aten::no_such_op") is None


# 07 cell 23 on the H100 (torch 2.11): SDPA grew 9x for 64x the work
SWEEP = pd.DataFrame(
    {
        "seq": [1024, 2048, 4096, 8192],
        "gflop": [4.30, 17.19, 68.74, 274.91],
        "manual_ms": [0.22, 0.74, 3.00, 12.58],
        "sdpa_ms": [0.06, 0.09, 0.20, 0.53],
    }
)


def test_a_time_that_grew_far_less_than_its_work_names_its_short_lengths():
    text = r.sweep_growth_sentence(SWEEP)
    assert "of SDPA 8.8x" in text and "Each time grew with its work" not in text
    assert "The time of SDPA did not follow the work (SDPA took 0.06 and 0.09 ms at seq 1024 and 2048" in text
    assert "7.2x and 2.7x its time at seq 8192 scaled down by the work" in text
    assert "hand-written version did not" not in text  # 57x for 64x the work


def test_a_time_that_grew_somewhat_less_than_its_work_says_part_of_it_is_per_call():
    # 07 cell 23 on this course's CPU: SDPA 0.46 to 15.35 ms (33.5x for 64x the work), the hand-written 61x
    cpu = SWEEP.assign(seq=[128, 256, 512, 1024], gflop=[8.45e-3, 3.37e-2, 1.34e-1, 5.37e-1])
    cpu = cpu.assign(manual_ms=[0.82, 2.77, 11.60, 49.89], sdpa_ms=[0.46, 1.49, 5.54, 15.35])
    text = r.sweep_growth_sentence(cpu)
    assert "Each time grew with its work" in text and "order of magnitude" not in text
    assert text.endswith(
        "SDPA grew less than the work: part of its time at seq 128 is a per-call cost, not arithmetic."
    )
    assert "hand-written version grew less" not in text
