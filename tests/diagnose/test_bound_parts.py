"""What a finding's bound counts: the operators its evidence holds, and what a fused optimizer still runs."""

from __future__ import annotations

import numpy as np
import pytest

import helpers
from helpers.diagnose.findings import Context
from helpers.trace.overlap import intersection_length, union
from tests.diagnose.synthetic import Kineto
from tests.support import data_file


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


def test_path_time_in_agrees_with_a_sweep_over_the_intervals():
    """The binary-search form of path_time_in gives what intersecting the path's pieces with the intervals gives."""
    ctx = Context(helpers.load_trace(data_file("hta__trace_filter_sampled_rank-1.json.gz")))
    p = ctx.path
    rng = np.random.default_rng(0)
    lo, hi = float(p["start_us"].min()), float(p["end_us"].max())
    for kinds in [("cpu gap",), ("cpu", "launch delay"), ("kernel",)]:
        pieces = p[p["kind"].isin(kinds)]
        a = union(pieces["start_us"].to_numpy(dtype=float), pieces["end_us"].to_numpy(dtype=float))
        for _ in range(50):
            s = rng.uniform(lo, hi, 3)
            e = s + rng.uniform(0, (hi - lo) / 20, 3)
            swept = intersection_length(a, union(s, e)) / ctx.path_steps
            assert ctx.path_time_in(s, e, kinds) == pytest.approx(swept, rel=1e-9, abs=1e-9)


def test_nearest_mark_gives_each_event_its_closest_marked_ancestor(tmp_path):
    k = Kineto()
    k.step(1, 0, 100)
    k.cpu("aten::outer", 0, 90)  # marked 0
    k.cpu("aten::inner", 10, 50)  # marked 1, inside the outer one
    k.cpu("aten::leaf", 20, 10)  # inside the inner one
    k.cpu("aten::side", 70, 10)  # inside the outer one only
    k.cpu("aten::alone", 95, 3)  # under nothing marked
    ctx = Context(k.load(tmp_path))
    names = list(ctx.ev["name"])
    mark = np.full(len(names), -1)
    mark[names.index("aten::outer")], mark[names.index("aten::inner")] = 0, 1
    got = dict(zip(names, ctx.nearest_mark(mark)))
    assert (got["aten::outer"], got["aten::inner"], got["aten::leaf"], got["aten::side"]) == (0, 1, 1, 0)
    assert got["aten::alone"] == -1


def test_the_rules_pass_over_the_events_a_bounded_number_of_times_not_once_per_chain(monkeypatch):
    """The decode trace holds hundreds of elementwise chains: a rule that climbs the host tree once per chain
    takes minutes on a million events (benchmarks/results/cpu_report_scale_decode.log). Count the climbs
    instead of timing them."""
    from helpers.diagnose import diagnose

    calls = {"under": 0, "nearest_mark": 0}
    for name in calls:
        original = getattr(Context, name)

        def counted(self, *args, _original=original, _name=name, **kwargs):
            calls[_name] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(Context, name, counted)
    found = diagnose(helpers.reference_trace_path("h200_decoder_decode"))
    chains = int(found.loc[found["rule"] == "unfused_elementwise", "evidence"].iloc[0].split(" chains")[0].split()[-1])
    assert chains > 100
    assert calls["under"] + calls["nearest_mark"] < 20, calls
