"""From a profiled bound to an unprofiled saving: the profiler's cost per operator, taken out of each finding."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers.diagnose.findings import Context
from helpers.diagnose.predict import overhead_per_operator, unprofiled_saving
from tests.diagnose.synthetic import Kineto


def test_overhead_per_operator():
    assert overhead_per_operator(7000.0, 3000.0, 2000) == pytest.approx(2.0)
    assert overhead_per_operator(3000.0, 3100.0, 2000) == 0.0  # a noisy unprofiled round: no negative cost
    with pytest.raises(ValueError, match="profiled_step_us"):
        overhead_per_operator(0.0, 3000.0, 10)
    with pytest.raises(ValueError, match="ops_per_step"):
        overhead_per_operator(7000.0, 3000.0, 0)


def test_unprofiled_saving_takes_out_each_findings_own_operators():
    found = pd.DataFrame(
        {
            "saving_upper_bound_us": [1000.0, 1000.0, 500.0, 80.0],
            "time_us": [2000.0, 1000.0, 500.0, 100.0],
            "ops_per_step": [500.0, 100.0, 0.0, 90.0],
        }
    )
    got = unprofiled_saving(found, overhead_us=2.0).tolist()
    # many tiny operators shrink most; device work (no operators) keeps its bound; never below zero
    assert got == pytest.approx([1000 * (1 - 1000 / 2000), 1000 * (1 - 200 / 1000), 500.0, 0.0])
    with pytest.raises(TypeError):
        unprofiled_saving(found.drop(columns="ops_per_step"), 1.0)
    with pytest.raises(ValueError):
        unprofiled_saving(found, -1.0)


def test_operators_under_counts_nested_operators(tmp_path):
    k = Kineto()
    k.step(1, 0, 100)
    outer = k.cpu("aten::linear", 0, 50)
    k.cpu("aten::t", 1, 5)
    k.cpu("aten::addmm", 10, 30)
    k.cpu("aten::copy_", 12, 5)
    k.cpu("aten::relu", 60, 10)
    ctx = Context(k.load(tmp_path))
    names = ctx.ev["name"].tolist()
    row = next(i for i, n in enumerate(names) if n == outer["name"])
    assert ctx.operators_under([row]) == 4
    assert ctx.operators_under([]) == 0


def test_a_fused_optimizer_still_costs_one_pass_per_parameter_on_a_cpu(tmp_path):
    from helpers.diagnose import rules_gpu

    k = Kineto()
    k.step(1, 0, 200)
    k.x("Optimizer.step#Adam.step", "user_annotation", 0, 130)
    for p in range(4):  # three per-parameter operators of 10 us each, back to back
        for j, name in enumerate(("aten::mul_", "aten::add_", "aten::addcmul_")):
            k.cpu(name, 30 * p + 10 * j, 10)
    [f] = rules_gpu.unfused_optimizer(Context(k.load(tmp_path)))
    # the step's 130 us on the path, less 4 parameters x one 10 us operator that a fused step still runs
    assert f["saving_upper_bound_us"] == pytest.approx(130 - 40)
    assert f["ops_per_step"] == 12
