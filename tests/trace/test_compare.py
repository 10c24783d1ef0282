"""helpers.trace.compare / compare_kernels on real traces: H200 eager vs compiled (torch 2.11) and CPU
eager vs compiled recorded here (torch 2.13, generated C++ kernels profiled)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from support import data_file

import helpers
import helpers.trace.compare
from helpers.trace.work import work_items


@pytest.fixture(scope="module")
def h200():
    return {
        name: helpers.load_trace(data_file(f"h200_mlp_{name}.json.gz"), label=name) for name in ("eager", "compiled")
    }


@pytest.fixture(scope="module")
def cpu_pair():
    """Eager and compiled GeGLU MLP on this CPU, with the generated C++ kernel in the profile."""
    import torch._inductor.config as inductor_config

    built = helpers.workloads.geglu_mlp("cpu", shape=helpers.MLPShape(batch=2, seq=8, dim=32, hidden=64))
    eager = helpers.profile(built.fn, *built.inputs, steps=2, warmup=1, label="eager")
    torch._dynamo.reset()
    with inductor_config.patch({"cpp.enable_kernel_profile": True}):
        compiled = helpers.profile(torch.compile(built.fn), *built.inputs, steps=2, warmup=1, label="compiled")
    return eager, compiled


# --------------------------------------------------------------------------- H200
def test_family_view_h200(h200):
    table = helpers.trace.compare.compare(h200["eager"], h200["compiled"])
    assert list(table.columns.get_level_values(0).unique()) == ["eager", "compiled"]
    assert table.index[-1] == "total" and table.index.name == "family"
    e, c = table["eager"], table["compiled"]
    # per step: 3 GEMMs in both, the gelu+mul pair replaced by one fused kernel, 2 memsets in both
    assert e.loc["gemm", "kernels"] == c.loc["gemm", "kernels"] == 3
    assert e.loc["elementwise", "kernels"] == 2 and c.loc["elementwise", "kernels"] == 0
    assert e.loc["fused", "kernels"] == 0 and c.loc["fused", "kernels"] == 1
    assert e.loc["memset", "kernels"] == c.loc["memset", "kernels"] == 2
    assert e.loc["total", "kernels"] == 7 and c.loc["total", "kernels"] == 6
    for part in (e, c):  # the groups add up to the total
        groups = part.drop(index="total")
        for metric in ("kernels", "device_us", "launches", "launch_us"):
            assert groups[metric].sum() == pytest.approx(part.loc["total", metric])
    # every kernel is launched by one host call
    assert e.loc["total", "launches"] == 7 and c.loc["total", "launches"] == 6
    # totals agree with the kernels table; fused pointwise is cheaper than gelu + mul
    for name in ("eager", "compiled"):
        k = h200[name].kernels()
        assert table[(name, "device_us")]["total"] == pytest.approx(k["duration_us"].sum() / 3)
    assert 150 < c.loc["total", "device_us"] < e.loc["total", "device_us"] < 300
    assert c.loc["fused", "device_us"] < e.loc["elementwise", "device_us"]
    # host time and idle gaps are defined per step, so only on the total row
    assert np.isnan(e.loc["gemm", "cpu_us"]) and np.isnan(e.loc["gemm", "idle_us"])
    steps = h200["eager"].events
    step_rows = steps[steps["name"].str.startswith("ProfilerStep#")]
    assert e.loc["total", "cpu_us"] == pytest.approx(step_rows["dur"].mean())
    assert 0 <= e.loc["total", "idle_us"] < e.loc["total", "cpu_us"]


def test_step_view_h200(h200):
    table = helpers.trace.compare.compare(h200["eager"], h200["compiled"], by="step")
    assert list(table.index) == [1, 2, 3, "mean"]
    assert table[("eager", "kernels")].tolist() == [7, 7, 7, 7]
    assert table[("compiled", "kernels")].tolist() == [6, 6, 6, 6]
    # idle gaps: device span of the step minus time with a kernel running
    k = h200["eager"].kernels()
    s1 = k[k["step"] == 1]
    span = (s1["start_us"] + s1["duration_us"]).max() - s1["start_us"].min()
    assert table.loc[1, ("eager", "idle_us")] == pytest.approx(span - s1["duration_us"].sum())


def test_op_and_annotation_views_h200(h200):
    by_op = helpers.trace.compare.compare(h200["eager"], h200["compiled"], by="op")
    assert by_op.loc["aten::gelu", ("eager", "kernels")] == 1 and by_op.loc["aten::gelu", ("compiled", "kernels")] == 0
    assert by_op.loc["aten::mm", ("eager", "kernels")] == by_op.loc["aten::mm", ("compiled", "kernels")] == 5
    by_ann = helpers.trace.compare.compare(h200["eager"], h200["compiled"], by="annotation")
    compiled_groups = by_ann.index[by_ann[("compiled", "kernels")] > 0].tolist()
    assert any(g.startswith("## Call CompiledFxGraph") for g in compiled_groups)
    assert by_ann.loc["h200_mlp_eager", ("eager", "kernels")] == 7  # record_function(label) of the recording


def test_per_step_rows_h200(h200):
    table = helpers.trace.compare.compare(h200["eager"], h200["compiled"], per_step=True)
    assert table.index.names == ["step", "group"]
    assert table.loc[(2, "elementwise"), ("eager", "kernels")] == 2
    assert table.loc[(2, "total"), ("compiled", "kernels")] == 6
    assert [g for s, g in table.index if s == 3][-1] == "total"


def test_compare_kernels_h200_what_changed_and_what_stayed(h200):
    diff = helpers.trace.compare_kernels(h200["eager"], h200["compiled"])
    assert diff.attrs["labels"] == {"a": "eager", "b": "compiled"}
    both = diff[diff["status"] == "both"]
    assert sorted(both["family"]) == ["gemm", "gemm", "memset"]
    assert both["name"].str.startswith("nvjet_sm90").sum() == 2
    assert (both["calls_a"] == both["calls_b"]).all()
    only_a = diff[diff["status"] == "only a"]
    assert len(only_a) == 2 and set(only_a["family"]) == {"elementwise"}
    assert only_a["name"].str.contains("Gelu").any() and only_a["name"].str.contains("Mul").any()
    only_b = diff[diff["status"] == "only b"]
    assert only_b["name"].tolist() == ["triton_poi_fused__unsafe_view_gelu_mul_0"]
    assert only_b["family"].tolist() == ["fused"]
    assert list(diff["status"]) == sorted(diff["status"], key=["both", "only a", "only b"].index)
    assert np.isnan(only_b["mean_us_a"]).all() and (only_b["calls_a"] == 0).all()


# --------------------------------------------------------------------------- CPU
def test_cpu_compare_kernels_shows_the_generated_kernel(cpu_pair):
    eager, compiled = cpu_pair
    diff = helpers.trace.compare_kernels(eager, compiled)
    status = dict(zip(diff["name"], diff["status"]))
    # matched without Inductor's graph_<N>_ prefix, whose N depends on what compiled before in the process
    assert status["cpp_fused__unsafe_view_gelu_mul_0"] == "only b"
    assert status["aten::gelu"] == "only a" and status["aten::mul"] == "only a"
    assert status["aten::mm"] == "both"
    # views and metadata ops are not work: nothing but these four names
    assert set(status) == {"cpp_fused__unsafe_view_gelu_mul_0", "aten::gelu", "aten::mul", "aten::mm"}
    mm = diff.set_index("name").loc["aten::mm"]
    assert mm["calls_a"] == mm["calls_b"] == 3


def test_cpu_family_view(cpu_pair):
    table = helpers.trace.compare.compare(*cpu_pair)
    assert table.loc["gemm", ("eager", "kernels")] == table.loc["gemm", ("compiled", "kernels")] == 3
    assert table.loc["elementwise", ("eager", "kernels")] == 2
    assert table.loc["fused", ("compiled", "kernels")] == 1 and table.loc["fused", ("eager", "kernels")] == 0
    assert (table.xs("launches", axis=1, level=1) == 0).all().all()  # nothing is launched on a CPU
    assert np.isnan(table.loc["total", ("eager", "idle_us")])  # no device, no device idle time
    assert table.loc["total", ("compiled", "cpu_us")] > 0


def test_cpu_work_items_of_a_bias_linear(linear_trace):
    items = work_items(linear_trace)
    # aten::addmm is the GEMM; the bias copy (aten::copy_) inside it is part of it, not extra work
    assert set(items["name"]) == {"aten::addmm"} and len(items) == 3
    assert (items["family"] == "gemm").all() and (items["unit"] == "host op").all()


def test_work_items_columns_h200(h200):
    items = work_items(h200["compiled"])
    assert list(items.columns) == [
        "name",
        "family",
        "source",
        "unit",
        "step",
        "start_us",
        "duration_us",
        "op",
        "annotation",
        "launch_call",
        "launch_us",
        "lane",
        "launch_row",
        "graph",
    ]
    assert not items["graph"].any() and (items["launch_row"] >= 0).all()
    fused = items[items["family"] == "fused"]
    assert (fused["source"] == "triton-inductor").all() and (fused["launch_call"] == "cuLaunchKernel").all()
    # Inductor's launcher records a cpu_op named after the kernel around its cuLaunchKernel call
    assert (fused["op"] == "triton_poi_fused__unsafe_view_gelu_mul_0").all()
    assert (items.loc[items["family"] == "gemm", "op"] == "aten::mm").all()
    assert (items["launch_us"] > 0).all() and (items["unit"] == "device kernel").all()


# --------------------------------------------------------------------------- arguments
def test_labels_and_errors(h200, linear_trace):
    same = helpers.trace.compare.compare(h200["eager"], h200["eager"])
    assert list(same.columns.get_level_values(0).unique()) == ["eager", "eager (2)"]
    named = helpers.trace.compare.compare(h200["eager"], linear_trace, labels=["gpu", "cpu"])
    assert list(named.columns.get_level_values(0).unique()) == ["gpu", "cpu"]
    with pytest.raises(ValueError, match="at least one trace"):
        helpers.trace.compare.compare()
    with pytest.raises(TypeError, match="argument 2 must be a Trace"):
        helpers.trace.compare.compare(h200["eager"], "compiled.json.gz")
    with pytest.raises(ValueError, match="by must be one of"):
        helpers.trace.compare.compare(h200["eager"], by="kernel")
    with pytest.raises(ValueError, match="one label per trace"):
        helpers.trace.compare.compare(h200["eager"], h200["compiled"], labels=["x"])
    with pytest.raises(TypeError, match="b must be a Trace"):
        helpers.trace.compare_kernels(h200["eager"], None)


def test_trace_has_no_compare_method(h200):
    """One way to compare: helpers.trace.compare.compare(a, b) (a Trace.compare method made trace <-> compare a circle)."""
    assert not hasattr(h200["eager"], "compare")


def test_eager_compiled_and_hand_tuned_side_by_side():
    """The course's reference traces (H200): eager, torch.compile and Liger's GeGLU kernel."""
    traces = [
        helpers.load_trace(helpers.reference_trace_path(f"h200_mlp_{n}"), label=n)
        for n in ("eager", "compiled", "liger")
    ]
    table = helpers.trace.compare.compare(*traces)
    kernels = table.xs("kernels", axis=1, level=1)
    assert kernels.loc["gemm"].tolist() == [3, 3, 3]
    assert kernels.loc["fused"].tolist() == [0, 1, 1] and kernels.loc["elementwise"].tolist() == [2, 0, 0]
    device = table.xs("device_us", axis=1, level=1)
    # the GEMMs are the same kernels in all three: their time agrees within a few percent
    assert device.loc["gemm"].max() / device.loc["gemm"].min() < 1.05
    diff = helpers.trace.compare_kernels(traces[0], traces[2])
    assert diff.loc[diff["status"] == "only b", "name"].tolist() == ["_geglu_tanh_forward_kernel"]
    assert set(diff.loc[diff["status"] == "both", "family"]) == {"gemm", "memset"}
