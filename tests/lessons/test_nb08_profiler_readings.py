"""Lesson 08's verdicts where two readings of one step meet, fed the numbers of the H100 review (run 15: four lessons
sharing one GPU) and of earlier H200 passes."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers import nb08

readings = nb08.readings

# H100, run 15: the profiled prefill 27,797 us, unprofiled 25,328 us, 705 kernels, 652 us (2.3%) CPU-bound idle
H100 = {"profiled_us": 27797.44, "unprofiled_us": 25327.87, "cpu_bound": 652.0 / 27797.44}


def test_one_prefill_gets_one_verdict_in_both_sections():
    cause = readings.profiler_gap_cause(**H100)
    assert "not explained by CPU-bound idle" in cause and "CPU bound" not in cause
    assert "2.47 ms" in cause and "0.65 ms" in cause and "shared GPU" in cause and "stayed ahead" in cause
    section2 = readings.prefill_profiler_text(H100["profiled_us"], H100["unprofiled_us"], 705, 0.98, H100["cpu_bound"])
    section6 = readings.prefill_against_unprofiled_text(**H100)
    assert "3.50 us per kernel longer, 3.6x the queue latency" in section2
    assert cause in section2 and cause in section6  # the same sentence, from the same numbers
    assert "CPU bound" not in section2 and "barely shows" not in section6
    assert "9.8% longer (below about 10% the profiler's cost is hard to tell from noise)" in section6
    # the idle breakdown beside it says the CPU was ahead: the two sections agree with it
    assert "queues kernels ahead" in nb08.live.prefill_idle_text(0.064, H100["cpu_bound"])


def test_a_prefill_that_waited_on_the_cpu_is_called_cpu_bound():
    # H100 pass A: 30,744 us profiled against 26,159 us, 10.3% of the step CPU-bound idle
    cause = readings.profiler_gap_cause(30744.0, 26159.0, 0.103)
    assert cause.startswith("the profiled prefill is CPU bound") and "3.17 ms" in cause
    # CPU-bound idle above the threshold but under half the gap: the rest is inside the kernels
    mixed = readings.profiler_gap_cause(40000.0, 26000.0, 0.1)
    assert "not explained by CPU-bound idle" in mixed and "less than half" in mixed
    assert "noise" in readings.profiler_gap_cause(20000.0, 25700.0, 0.02)
    assert "almost nothing per kernel" in readings.prefill_profiler_text(25700.0, 25700.0, 700, 0.96, 0.02)
    assert "comparable to the queue latency" in readings.prefill_profiler_text(26050.0, 25700.0, 700, 0.96, 0.02)
    with pytest.raises(ValueError, match="fraction"):
        readings.profiler_gap_cause(2.0, 1.0, 2.3)
    with pytest.raises(ValueError, match="positive"):
        readings.prefill_against_unprofiled_text(1.0, 0.0, 0.1)


def test_the_cpu_bound_share_is_read_from_the_breakdown():
    parts = pd.DataFrame({"part": ["mlp", "idle: CPU-bound", "idle: waiting"], "share": [0.9, 0.023, 0.04]})
    assert readings.cpu_bound_share(parts) == pytest.approx(0.023)
    assert readings.cpu_bound_share(parts.iloc[[0]]) == 0.0
    with pytest.raises(TypeError, match="part_breakdown"):
        readings.cpu_bound_share(pd.DataFrame({"part": ["mlp"]}))


def test_a_later_reading_that_disagrees_restates_the_profiler_cost():
    # section 5: profiled 39 ms against an unprofiled 41 ms; section 6 times the same step at 25 ms
    text = readings.profiler_cost_restated(39.0, 41.0, 25.4)
    assert "cannot stand" in text and "0.95x" in text and "1.54x" in text
    with pytest.raises(ValueError):
        readings.profiler_cost_restated(39.0, 0.0, 25.0)


def test_no_gap_is_read_from_an_unprofiled_step_within_the_kernel_sums_movement():
    # replayed step 2,121 us unprofiled; kernel sums 2,100 us (replay) and 2,201 us (the eager trace): 720 gaps
    text = readings.replay_gap_text(2120.6, [2100.0], [2201.0], 720)
    assert "no gap can be read" in text and "at most" not in text and "101 us" in text
    # beyond the movement, a bound per gap is stated
    assert "at most 1.00 us per gap" in readings.replay_gap_text(2820.0, [2100.0], [2110.0], 720)
    # one profile alone gives no movement: the bound stays, with what it holds
    assert "at most" in readings.replay_gap_text(2121.0, [2100.0], [], 720)
    assert "cannot beat its kernels" in readings.replay_gap_text(1800.0, [2100.0], [2110.0], 720)
    with pytest.raises(ValueError):
        readings.replay_gap_text(2121.0, [], [2201.0], 720)
    with pytest.raises(TypeError):
        readings.replay_gap_text(2121.0, "2100", [2201.0], 720)


def test_the_gpu_memory_allocated_before_the_trace_is_explained():
    # H100: 14,834 MB before the trace, 81% of the peak; the categories' parameters and AdamW state
    text = readings.gpu_memory_before_text(14834.21, 14834.21 / 0.81, 3000.0)
    assert "14,834 MB, 81% of this" in text and "11,834 MB more" in text and "1B model" in text
    assert "no more than" in readings.gpu_memory_before_text(2000.0, 5000.0, 3000.0)
    assert "nothing was allocated" in readings.gpu_memory_before_text(0.0, 5000.0, 3000.0)
    with pytest.raises(ValueError):
        readings.gpu_memory_before_text(-1.0, 5000.0, 0.0)


def test_a_quiet_program_run_says_how_long_and_where_relative_to_the_repository(capsys):
    from helpers.paths import LOCAL_TRACES_DIR, REPO_ROOT

    out = LOCAL_TRACES_DIR / "decoder_live.json"
    line = readings.ran_text("python -m benchmarks decoder", 47.2, out)
    assert str(REPO_ROOT) not in line or not out.is_relative_to(REPO_ROOT)
    assert line.startswith("python -m benchmarks decoder ran in 47 s, written to ")
    calls = []
    readings.run_quietly(lambda: calls.append(1), "prog", out, 150)
    printed = capsys.readouterr().out.splitlines()
    assert calls == [1] and len(printed) == 2 and "up to about 150 s" in printed[0] and "prog ran in" in printed[1]
    with pytest.raises(TypeError):
        readings.run_quietly(None, "prog", out, 150)
