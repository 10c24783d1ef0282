"""The sentences of lesson 04's sections 5 and 6b follow the numbers, including those of a shared H100 (review 57,
passes A and B) where the numbers contradict each other and no verdict may be printed."""

import pytest

from helpers import nb04
from helpers.lessons.exercises import Tie

# Pass A on a shared H100: compiled back to back above synchronised, its median far above its fastest round.
A = {
    "compiled": dict(
        kernel=233.4, b2b=[236.0, 237.0, 313.0, 467.0, 470.0], sync=[300.0, 304.0, 304.0, 304.0, 308.0], cpu=313.1
    ),
    "eager": dict(
        kernel=254.5, b2b=[263.0, 283.0, 285.0, 304.0, 429.0], sync=[289.0, 289.0, 289.0, 290.0, 293.0], cpu=189.6
    ),
}
# Pass B: every round 1.6-3.4x the kernels, the host's profiled work well below the unprofiled pace.
B = {
    "compiled": dict(
        kernel=233.3, b2b=[375.0, 376.0, 396.0, 412.0, 416.0], sync=[783.0, 792.0, 803.0, 806.0, 812.0], cpu=251.6
    ),
    "eager": dict(
        kernel=254.3, b2b=[441.0, 441.0, 457.0, 463.0, 491.0], sync=[820.0, 823.0, 839.0, 858.0, 868.0], cpu=182.3
    ),
}


def _read(p):
    return {k: nb04.read_bound(v["kernel"], v["b2b"], v["sync"], v["cpu"]) for k, v in p.items()}


def test_a_clean_gpu_bound_and_a_clean_cpu_bound_call():
    gpu = nb04.read_bound(233.0, [236.0, 238.0, 240.0, 237.0, 300.0], [290.0, 291.0, 292.0], 313.0)
    assert gpu == nb04.Reading("GPU")
    # CPU bound: every round above the kernels, and the host's profiled work longer than the fastest round
    cpu = nb04.read_bound(100.0, [180.0, 182.0, 185.0], [260.0, 262.0, 265.0], 240.0)
    assert cpu == nb04.Reading("CPU")
    text = nb04.profiler_sentence(cpu, 100.0, 240.0, 180.0)
    assert "60 us more than its fastest unprofiled round" in text and "profiler's own cost" in text


def test_pass_a_back_to_back_above_synchronised_is_noise_not_a_verdict():
    r = _read(A)
    assert r["compiled"].bound == "unclear" and r["compiled"].sync_disturbed
    assert any("more than synchronised" in n for n in r["compiled"].notes)
    assert any("median (313 us) is 34% above" in n for n in r["compiled"].notes)
    assert r["eager"].bound == "unclear"  # fastest 263 us at the kernels, median 285 us 12% above
    why = nb04.end_to_end_why(r)
    assert "too unsteady to tell" in why and "busy all the time" not in why and "waited for the CPU" not in why
    sentence = nb04.synchronised_sentence({"compiled": 313.0, "eager": 285.0}, {"compiled": 304.0, "eager": 289.0})
    assert "on top" not in sentence and "compiled took longer than that (313 us)" in sentence


def test_pass_b_profiled_cpu_below_unprofiled_gives_no_verdict_and_no_negative_cost():
    r = _read(B)
    for k in ("compiled", "eager"):
        assert r[k].bound == "unclear" and r[k].sync_disturbed
        assert any("less than the fastest unprofiled round" in n for n in r[k].notes)
        assert any("kernels one after the other" in n for n in r[k].notes)
    text = nb04.profiler_sentence(r["compiled"], 233.3, 251.6, 375.0)
    assert "no profiler cost" in text and "-" not in text.split(":")[1]
    # the rounds are apart, yet they measure the machine: accepted either way, as too unsteady to tell (not a spread tie)
    apart = nb04.first_is_faster({"compiled": B["compiled"]["b2b"], "eager": B["eager"]["b2b"]})
    assert apart is True
    expected = nb04.end_to_end_expected(apart, r)
    assert isinstance(expected, Tie) and "slowed by something else on the machine" in expected.why
    for answer in (True, False):
        assert (
            nb04.check("compiled_faster_end_to_end", answer, expected, details={"why": "x"}).status
            == "too unsteady to tell"
        )
    # no pay-back from synchronised rounds that other work slowed
    from helpers.measure.compile_costs import FirstCall

    first = FirstCall(first_s=0.86, later_s=0.000315, fx_cache={})
    sync = {"eager": B["eager"]["sync"], "compiled": B["compiled"]["sync"]}
    disturbed = [k for k in ("eager", "compiled") if r[k].sync_disturbed]
    text = nb04.payback(first, sync, disturbed)
    assert "no pay-back can be computed" in text and "pays back after" not in text
    assert "pays back after about 24,000 calls (860,000 if" in nb04.payback(first, sync)


def test_cpu_bound_both_yet_compiled_faster_is_not_explained_by_host_work():
    cpu = {"eager": nb04.Reading("CPU"), "compiled": nb04.Reading("CPU")}
    why = nb04.end_to_end_why(cpu, {"eager": 182.0, "compiled": 252.0}, True)
    assert "eager and compiled waited for the CPU" in why and "does not explain" in why
    assert "does not explain" not in nb04.end_to_end_why(cpu, {"eager": 300.0, "compiled": 252.0}, True)
    assert "compiled waited" in nb04.end_to_end_why({"eager": "GPU", "compiled": "CPU"})
    assert "busy all the time" in nb04.end_to_end_why({"eager": "GPU", "compiled": "GPU"})
    assert nb04.end_to_end_expected(True, {"eager": "GPU", "compiled": "CPU"}) is True


def test_reading_errors():
    with pytest.raises(ValueError, match="back_to_back_us"):
        nb04.read_bound(200.0, [], [300.0], 100.0)
    with pytest.raises(ValueError, match="kernel_us"):
        nb04.read_bound(float("nan"), [200.0], [300.0], 100.0)
    with pytest.raises(ValueError, match="'eager' and 'compiled'"):
        nb04.end_to_end_why({"eager": "GPU"})
    with pytest.raises(ValueError, match="'GPU', 'CPU' or 'unclear'"):
        nb04.end_to_end_why({"eager": "GPU", "compiled": "fast"})


def test_about_keeps_two_significant_figures():
    assert nb04.about(23989) == "24,000" and nb04.about(107952) == "110,000" and nb04.about(7331) == "7,300"
    assert nb04.about(2742.4) == "2,700" and nb04.about(3.14159) == "3.1"
    with pytest.raises(ValueError, match="finite"):
        nb04.about(float("inf"))


def test_bytes_sentence_says_near_the_roof_only_when_both_are():
    # both H100 passes: the fused kernel at 75% of the roof against the eager pair's 89%
    far = nb04.bytes_sentence("H100", {"mb": 251.7, "us": 86.3, "pct": 89.0}, {"mb": 151.0, "us": 61.3, "pct": 75.2})
    assert (
        "near the bandwidth" not in far and "fall by 40%, the time by 29%" in far and "fused kernel runs further" in far
    )
    near = nb04.bytes_sentence("H200", {"mb": 251.7, "us": 60.0, "pct": 90.0}, {"mb": 151.0, "us": 37.0, "pct": 87.0})
    assert "both run near the bandwidth, so the saving is the bytes" in near
    # the H200 reference traces: the eager pair at 79%, the fused kernel at 87%
    h200 = nb04.bytes_sentence("H200", {"mb": 251.7, "us": 69.0, "pct": 79.0}, {"mb": 151.0, "us": 37.0, "pct": 87.0})
    assert "eager pair runs further from the roof, so the time falls by more than the bytes" in h200
    assert "falls by less" in far
    with pytest.raises(ValueError, match="positive finite"):
        nb04.bytes_sentence("x", {"mb": 0.0, "us": 1.0, "pct": 1.0}, {"mb": 1.0, "us": 1.0, "pct": 1.0})
