"""Sentences of lessons 00, 04 and 06 that a reviewer found contradicting their own numbers, fed synthetic numbers
for each branch; and the labels (CPU threads, a recorded command) the lessons show."""

from __future__ import annotations

import pytest

from helpers.lessons import nb00
from helpers.lessons.results import lesson_command
from helpers.measure.device import cpu_label


def test_slowest_call_uses_one_rule_in_both_branches():
    # 2.9x the median is over the rule's 2x: it stands out, and no branch may also say that none does
    loud = nb00.slowest_call_sentence("aten::linear", 20, 29.3, 85.3, 0.13)
    assert "2.9 times the median" in loud and "stands out" in loud and "No call" not in loud
    calm = nb00.slowest_call_sentence("aten::linear", 20, 29.3, 55.0, 0.07)
    assert "No call stands out" in calm and "none took more than 2 times the median" in calm
    edge = nb00.slowest_call_sentence("aten::linear", 20, 10.0, 20.0, 0.07)  # exactly 2x: not over the rule
    assert "No call stands out" in edge


@pytest.mark.parametrize(
    ("unprofiled", "profiled", "says"),
    [
        (40.0, 60.0, "The profiler adds about 20.0 us per call (1.5x)."),
        (61.7, 41.9, "ran too unsteadily to measure the profiler's cost"),
        (50.0, 52.0, "within 10% of each other"),
        (52.0, 50.0, "within 10% of each other"),
    ],
)
def test_profiler_cost_branches(unprofiled, profiled, says):
    text = nb00.profiler_cost_sentence(unprofiled, profiled)
    assert says in text
    if profiled < unprofiled * 0.9:
        assert "came out faster" in text and "agree" not in text


def test_profiler_cost_rejects_bad_times():
    with pytest.raises(ValueError):
        nb00.profiler_cost_sentence(0.0, 10.0)
    with pytest.raises(ValueError):
        nb00.profiler_cost_sentence(10.0, 10.0, share=1.5)


def test_cpu_label_plural():
    assert cpu_label(1).endswith("(1 thread)")
    assert cpu_label(8).endswith("(8 threads)")
    with pytest.raises(ValueError):
        cpu_label(0)


def test_lesson_command_cuts_absolute_paths():
    cmd = "python benchmarks/mlp_variants.py --budget-s 265 --out /root/out/r/h200_mlp_variants.json"
    assert lesson_command(cmd) == "python benchmarks/mlp_variants.py --budget-s 265 --out h200_mlp_variants.json"
    assert lesson_command("run --out=/a/b/x.json /c/d.txt rel/e.json") == "run --out=x.json d.txt rel/e.json"
    with pytest.raises(TypeError):
        lesson_command(None)  # type: ignore[arg-type]
