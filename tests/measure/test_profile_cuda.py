"""helpers.profile on a real GPU (skipped on CPU-only machines such as CI, with the reason shown)."""

from __future__ import annotations

import torch
from support import requires_cuda_profile as requires_cuda

import helpers

pytestmark = requires_cuda


def test_linear_bias_is_one_kernel_launched_by_addmm():
    built = helpers.workloads.linear_layer("cuda")
    trace = helpers.profile(built.fn, *built.inputs, steps=3, label="linear")
    k = trace.kernels()
    compute = k[k["kind"] == "kernel"]
    assert compute.groupby("step").size().to_dict() == {1: 1, 2: 1, 3: 1}
    assert set(compute["launched_by"]) == {"aten::addmm"}
    assert "aten::add" not in set(trace.ops()["name"])
    chain = trace.chain("aten::linear")
    leaves = chain[chain["kind"] == "kernel"]
    assert len(leaves) == 1 and leaves.iloc[0]["path"].startswith("aten::linear -> aten::addmm -> ")


def test_matmul_add_is_two_kernels():
    built = helpers.workloads.matmul_then_add("cuda")
    trace = helpers.profile(built.fn, *built.inputs, steps=2, label="matmul_add")
    k = trace.kernels()
    compute = k[k["kind"] == "kernel"]
    assert compute.groupby("step").size().to_dict() == {1: 2, 2: 2}
    assert set(compute["launched_by"]) == {"aten::mm", "aten::add"}


def test_mlp_kernels_every_one_linked_and_steps_equal():
    built = helpers.workloads.geglu_mlp("cuda")
    trace = helpers.profile(built.fn, *built.inputs, steps=3, label="mlp")
    k = trace.kernels()
    assert k["launched_by"].notna().all()
    per_step = k.groupby("step").size()
    assert len(set(per_step)) == 1 and len(per_step) == 3
    compute = k[k["kind"] == "kernel"]
    assert compute.groupby("step").size().iloc[0] == 5  # 3 GEMMs + gelu + mul
    ops = trace.ops().set_index("name")
    assert ops.loc["aten::mm", "device_total_us"] > 0
    assert ops.loc["aten::linear", "device_total_us"] >= ops.loc["aten::mm", "device_total_us"] - 1e-6
    fig = trace.timeline()
    lanes = fig.layout.meta["lanes"]
    assert any(lane.startswith("GPU") for lane in lanes) and any(lane.startswith("CPU") for lane in lanes)


def test_views_launch_no_kernel_but_contiguous_does():
    x = torch.randn(1024, 1024, device="cuda")

    def views(t):
        return t.t()

    trace = helpers.profile(views, x, steps=2, label="views")
    assert trace.kernels(allow_empty=True).empty
    trace = helpers.profile(lambda t: t.t().contiguous(), x, steps=2, label="copy")
    k = trace.kernels()
    assert k.groupby("step").size().to_dict() == {1: 1, 2: 1}
    assert (k["launched_by"] == "aten::copy_").all()


def test_a_closure_without_tensor_arguments_records_its_kernels():
    a = torch.randn(256, 256, device="cuda")
    trace = helpers.profile(lambda: a @ a, steps=2)
    assert len(trace.kernels()) >= 2, "the closure's GEMM kernels must be in the trace"
