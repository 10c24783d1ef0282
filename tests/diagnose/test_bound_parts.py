"""What a finding's bound counts: the operators its evidence holds, and what a fused optimizer still runs."""

from __future__ import annotations

import pytest

from helpers.diagnose.findings import Context
from tests.diagnose.synthetic import Kineto


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
    # the step's 130 us on the path, less its own 10 us of Python (a fused step runs it too) and 4 parameters x
    # one 10 us operator that a fused step still runs
    assert f["saving_upper_bound_us"] == pytest.approx(130 - 10 - 40)
    assert f["ops_per_step"] == 12
