"""Lesson 08's sentences over live numbers, fed the numbers an H200 run showed (two passes on a shared GPU)."""

from types import SimpleNamespace

import pytest
import torch

from helpers import nb08

live = nb08.live


def test_the_benchmark_log_hides_the_variant_answer_and_the_target_verdicts():
    hidden = [
        "[  71.3s] exercise variant: prefill 9674 us -> 6922 us with the fix",
        "[NOT met] CUDA-graph decode step predicted from the eager trace within 25%: 0.343 (predicted 2600 us)",
        "[met] CUDA-graph decode step predicted from the eager trace within 25%: 0.147",
        "[not measured] prefill: best course configuration faster than eager, not slower than compile: nan",
        "STAGE:2026-12-07 USDT probe",
    ]
    shown = [
        "[   5.7s] eager                  prefill     27333.3 us       149,854 tokens/s",
        "[  25.4s] graph prediction: eager window 40806 us, kernels 1908 us (721), latency 0.96 us -> predicted 2600 us",
        "eager                        149,854    11686.3     4.2     291.6     43.6",
    ]
    assert not any(live.benchmark_line_shown(line) for line in hidden)
    assert all(live.benchmark_line_shown(line) for line in shown)
    with pytest.raises(TypeError):
        live.benchmark_line_shown(None)


def test_a_scope_keeps_its_cpu_side_row_not_the_gpu_annotation_of_the_same_key():
    cpu, gpu = torch.autograd.DeviceType.CPU, torch.autograd.DeviceType.CUDA
    rows = [
        SimpleNamespace(key="mlp", device_type=cpu, cpu_time_total=9607.0),
        SimpleNamespace(key="mlp", device_type=gpu, cpu_time_total=0.0),
        SimpleNamespace(key="aten::linear", device_type=cpu, cpu_time_total=50.0),
    ]
    averages = live.cpu_side_averages(rows)
    assert averages["mlp"].cpu_time_total == 9607.0 and set(averages) == {"mlp", "aten::linear"}


def test_the_prefill_sentence_follows_the_idle_share_shown():
    # live H200 passes: idle 40.2 % (38.6 CPU-bound) and 49.4 % (48.7); the reference trace: 6.8 % (2.7)
    for idle, cpu_bound in ((0.402, 0.386), (0.494, 0.487)):
        text = live.prefill_idle_text(idle, cpu_bound)
        assert "does not keep ahead" in text and "far ahead" not in text and f"{idle:.1%}" in text
    assert "queues kernels ahead" in live.prefill_idle_text(0.068, 0.027)
    with pytest.raises(ValueError):
        live.prefill_idle_text(float("nan"), 0.1)


def test_optimizer_times_are_ranked_with_ties_when_the_rounds_overlap():
    # pass 1 medians: for-loop 7,223 us, foreach 7,030 us (a tie), fused 1,992 us
    text = live.ranked_with_ties(
        {"for-loop": [7100, 7223, 7400], "foreach": [6900, 7030, 7300], "fused": [1950, 1992, 2100]}
    )
    assert "For-loop and foreach are too close to call here" in text
    assert "fused is faster than for-loop" in text and "fused is faster than foreach" in text
    assert "foreach is faster" not in text
    # pass 2: foreach 4,944 against the for-loop's 6,692, rounds apart
    assert "Foreach is faster than for-loop" in live.ranked_with_ties(
        {"for-loop": [6600, 6692, 6800], "foreach": [4900, 4944, 5000]}
    )
    with pytest.raises(ValueError):
        live.ranked_with_ties({"fused": [1.0]})
    with pytest.raises(ValueError):
        live.ranked_with_ties({"a": [], "b": [1.0]})


def test_a_profiled_step_shorter_than_the_unprofiled_one_is_called_noise():
    # inside the rounds' middle-half spread: too close to call (the course's one rule)
    assert "too close to call" in live.profiler_cost_text(35.5, [34.0, 36.0, 37.0])
    # pass 2: at the fastest round, beyond the middle half: shorter, which only the machine's noise can make
    assert "shorter" in live.profiler_cost_text(34.0, [34.0, 36.0, 37.0])
    text = live.profiler_cost_text(33.0, [34.5, 36.0, 37.0])
    assert "shorter" in text and "-" not in text.split("shorter")[0]
    assert live.profiler_cost_text(35.0, [33.0, 33.1, 33.9]) == "the profiler added 6%."


def test_profiled_rounds_taken_in_turns_are_judged_against_the_unprofiled_rounds():
    # the H100 review: profiled 39 ms against a disturbed 41 ms (36-41); in turns, both rounds carry the noise
    assert "too close to call" in live.profiler_cost_text([38.0, 39.0, 40.0], [36.0, 39.5, 41.0])
    assert live.profiler_cost_text([38.0, 39.0, 39.5], [25.0, 25.4, 25.6]) == "the profiler added 54%."
    with pytest.raises(ValueError):
        live.profiler_cost_text([], [25.0, 25.4, 25.6])


def test_the_regime_names_this_run_and_its_threshold():
    # H100 pass A: 10.3% of the prefill waited for the CPU; pass B: 2.3%
    assert "on this run, profiled, the CPU does not keep ahead" in live.prefill_idle_text(0.153, 0.103)
    text = live.prefill_idle_text(0.064, 0.023)
    assert "on this run the CPU queues kernels ahead" in text and "under 10%" in text


def test_replayed_windows_far_from_their_unprofiled_steps_are_not_called_the_profilers():
    # pass A: 2454 and 1419 us profiled against 2383 and 1412; pass B: 4580 against 2391
    assert "within 3.0%" in live.replay_window_text([2454.0, 1419.4], [2383.4, 1411.7])
    text = live.replay_window_text([4580.0, 1419.4], [2391.0, 1411.7])
    assert "differ by up to 91.6%" in text and "little to slow down" not in text and "cannot check" in text
    with pytest.raises(ValueError):
        live.replay_window_text([1.0, 2.0], [1.0])


def test_two_readings_of_one_step_are_flagged_past_a_fifth_apart():
    # pass A: the eager decode step 13,694 us in section 2 and 23,241 us in the benchmark
    note = live.two_readings_note("the eager decode step", 13694.0, "in section 2", 23240.6, "in the benchmark")
    assert "13,694 us in section 2 against 23,241 us" in note and "(1.7x)" in note and "range" in note
    assert live.two_readings_note("x", 100.0, "a", 115.0, "b") == ""
    assert "26 ms in section 5 against 42 ms here" in live.two_readings_note("t", 26.0, "in section 5", 42.2, "here", unit="ms")  # fmt: skip
    with pytest.raises(ValueError):
        live.two_readings_note("x", 0.0, "a", 1.0, "b")


def test_a_ratio_is_shown_to_two_significant_figures():
    assert live.two_figures(2179.4) == 2200.0 and live.two_figures(10.46) == 10.0 and live.two_figures(0.0) == 0.0
    assert f"{live.two_figures(2619.0):,.0f}" == "2,600"


def test_two_readings_note_names_a_load_change_not_a_sharing_it_cannot_see():
    """From a learner probe: two unprofiled readings that disagree said "the machine was shared with other work",
    a cause the lesson never checks; the note says the machine's load changed between them."""
    note = live.two_readings_note("an eager training step", 26.0, "in section 5", 42.2, "here", unit="ms")
    assert "the machine's load (GPU or CPU) changed between the two readings" in note
    assert "shared with other work" not in note
