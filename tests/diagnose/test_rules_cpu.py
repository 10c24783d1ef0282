"""The CPU-only rules, on live CPU profiles of the planted loop: every planted problem the CPU can
show is in the top 3 of its trace, and a fixed problem no longer is."""

from __future__ import annotations

import statistics

import torch

import helpers
from helpers.diagnose import diagnose, rules_cpu
from helpers.diagnose.findings import Context
from helpers.lessons.nb10 import profiled_step_us
from helpers.lessons.planted import build_loop
from tests.diagnose.synthetic import Kineto
from tests.support import data_file


def _found(fixed=()):
    torch.set_num_threads(1)
    loop = build_loop(fixed, device="cpu")
    trace = helpers.profile(loop.step, steps=3, warmup=1, grad=True, label="planted")
    found = diagnose(trace)
    # the typical step: one step stalled by another program on a busy machine must not stand for all three
    found.attrs["median_step_us"] = statistics.median(profiled_step_us(trace))
    return found


def test_each_planted_problem_is_in_the_top_3_of_its_trace():
    only_pointwise = _found({"optimizer"})
    assert only_pointwise["rule"].iloc[0] == "host_pointwise_chains"
    top = only_pointwise.iloc[0]
    assert top["events"] > 0 and "chains per step" in top["evidence"] and "tanh" in top["evidence"].lower()
    only_optimizer = _found({"pointwise"})
    assert only_optimizer["rule"].iloc[0] == "unfused_optimizer"
    opt = only_optimizer.iloc[0]
    assert opt["events"] > 0 and "operators" in opt["finding"]  # evidence from the host operators on a CPU
    # a real part of the step, not its size: other programs stalling the rest of the step shrink the share
    assert opt["saving_upper_bound_us"] > 0.05 * only_optimizer.attrs["median_step_us"]


def test_no_false_finding_once_both_are_fixed():
    found = _found({"optimizer", "pointwise"})
    step = found.attrs["step_us"]
    # what is left (the loss's own small backward chain, say) is real but small
    assert (found["saving_upper_bound_us"].head(3) < 0.05 * step).all()
    assert "unfused_optimizer" not in set(found["rule"])


def test_the_cpu_rule_is_silent_on_traces_with_device_work_and_runs_on_a_cpu_only_one():
    gpu = helpers.load_trace(helpers.reference_trace_path("h200_mlp_eager"))
    assert rules_cpu.host_pointwise_chains(Context(gpu)) == []
    cpu_only = diagnose(data_file("hta__cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"))
    assert not cpu_only.attrs["skipped"]
    assert (cpu_only["saving_upper_bound_us"] <= cpu_only.attrs["step_us"] + 1e-6).all()


def test_a_chain_shorter_than_three_is_not_a_chain():
    torch.set_num_threads(1)
    x = torch.randn(8, 8)

    def two_ops():
        return (x * 2.0).relu() @ x  # two elementwise operators, then a product

    found = diagnose(helpers.profile(two_ops, steps=2, warmup=1, label="short"))
    assert "host_pointwise_chains" not in set(found["rule"])


def _cpu_steps(k: Kineto, stall_us: float) -> None:
    """Three CPU-only steps, each a 1 ms matrix product and a 3-operator elementwise chain of 10 us operators;
    in the second step one chain operator is stalled by `stall_us` (the machine, not the code)."""
    for n in range(3):
        t = 5000.0 * n
        k.step(n + 1, t, 1070 + (stall_us if n == 1 else 0))
        k.cpu("aten::mm", t + 10, 1000)
        at = t + 1020
        for i, name in enumerate(("aten::mul", "aten::add", "aten::tanh")):
            dur = 10 + (stall_us if n == 1 and i == 1 else 0)
            k.cpu(name, at, dur)
            at += dur + 5


def test_one_stalled_operator_does_not_make_a_small_chain_a_finding(tmp_path):
    calm, stalled = Kineto(), Kineto()
    _cpu_steps(calm, 0.0)
    _cpu_steps(stalled, 3000.0)
    for k in (calm, stalled):
        found = diagnose(k.load(tmp_path))
        chains = found[found["rule"] == "host_pointwise_chains"]
        # the chain costs about 4 % of the step in every step; one stall must not make it look like a third
        assert len(chains) == 1 and chains["saving_upper_bound_us"].iloc[0] < 0.1 * found.attrs["step_us"]
