"""Bytes, time and bandwidth of the GeGLU, eager pair vs fused kernel (helpers/mlp/fusion.py)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from support import H200_REFERENCE, data_file

import helpers
from helpers.mlp import fusion, plans


@pytest.fixture(scope="module")
def h200():
    return {name: helpers.load_trace(data_file(f"h200_mlp_{name}.json.gz")) for name in ("eager", "compiled")}


def test_sizes_from_provenance_and_from_recorded_shapes(h200):
    sizes = fusion.geglu_sizes(h200["eager"])
    assert (sizes.tokens, sizes.hidden, sizes.dtype, sizes.source) == (8192, 3072, "bfloat16", "provenance")
    bare = helpers.load_trace(data_file("h200_mlp_compiled.json.gz"))
    bare.info = dataclasses.replace(bare.info, extra={})
    from_mm = fusion.geglu_sizes(bare)
    assert (from_mm.tokens, from_mm.hidden, from_mm.dtype) == (8192, 3072, "bfloat16")
    assert from_mm.source == "shapes of the first aten::mm"


def test_eager_pair_moves_five_tensors_fused_kernel_three(h200):
    table = fusion.geglu_table(h200).set_index("variant")
    one = 8192 * 3072 * 2
    assert table.loc["eager", "launches"] == 2 and table.loc["eager", "tensors moved"] == 5
    assert table.loc["compiled", "launches"] == 1 and table.loc["compiled", "tensors moved"] == 3
    assert table.loc["eager", "MB moved"] == pytest.approx(5 * one / 1e6)
    assert table.loc["compiled", "MB moved"] == pytest.approx(plans.geglu_bytes(8192, 3072, "bf16") / 1e6)
    assert table.loc["compiled", "computed by"] == "triton_poi_fused__unsafe_view_gelu_mul_0"
    # fewer bytes at a higher share of the bandwidth: the fused kernel is faster
    assert table.loc["compiled", "time_us"] < table.loc["eager", "time_us"]
    assert table.loc["compiled", "pct_of_bandwidth"] > table.loc["eager", "pct_of_bandwidth"]
    assert "recorded reference" in table.loc["eager", "ceilings"]


def test_work_rows_per_step(h200):
    work = fusion.geglu_work(h200["eager"])
    assert sorted(work["role"].unique()) == ["gelu", "mul"] and work["step"].nunique() == 3
    assert (work["where"] == "device kernel").all()


def test_cpu_eager_trace_uses_the_operators(mlp_trace):
    work = fusion.geglu_work(mlp_trace)
    assert set(work["name"]) == {"aten::gelu", "aten::mul"} and (work["where"] == "CPU operator").all()
    row = fusion.geglu_row("eager", mlp_trace, ceilings=H200_REFERENCE)
    assert row["tensors moved"] == 5 and row["shape"] == "[32, 128] float32"


def test_cpu_compiled_trace_uses_the_generated_kernel():
    import torch._inductor.config as inductor_config

    built = helpers.workloads.geglu_mlp("cpu", shape=helpers.MLPShape(batch=2, seq=8, dim=32, hidden=64))
    torch._dynamo.reset()
    with inductor_config.patch({"cpp.enable_kernel_profile": True}):
        trace = helpers.profile(torch.compile(built.fn), *built.inputs, steps=2, warmup=1, label="compiled")
    torch._dynamo.reset()
    work = fusion.geglu_work(trace)
    assert list(work["role"]) == ["geglu", "geglu"] and (work["where"] == "CPU kernel").all()
    row = fusion.geglu_row("compiled", trace)  # a live profile: ceilings measured here
    assert row["tensors moved"] == 3 and "measured here" in row["ceilings"]


def test_errors(linear_trace, h200):
    with pytest.raises(TypeError, match="a Trace"):
        fusion.geglu_work("trace")
    with pytest.raises(ValueError, match="no GeGLU work"):
        fusion.geglu_work(linear_trace)
    with pytest.raises(TypeError, match="non-empty dict"):
        fusion.geglu_table([])
    other = helpers.load_trace(data_file("h200_mlp_eager.json.gz"))
    other.info = dataclasses.replace(other.info, source="file", device="Some GPU")
    with pytest.raises(ValueError, match="pass ceilings"):
        fusion.default_ceilings(other)


@pytest.mark.parametrize(
    "name, role",
    [
        ("triton_poi_fused__unsafe_view_gelu_mul_0", "geglu"),
        ("graph_0_cpp_fused__unsafe_view_gelu_mul_0", "geglu"),
        ("_geglu_tanh_forward_kernel", "geglu"),  # Liger
        ("_geglu_kernel", "geglu"),  # the course's kernel
        ("triton_tem_fused__unsafe_view_gelu_mm_mul_t_view_2", "gemm"),  # a GEMM template: its name lists gelu
        ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", "gemm"),
        ("Memset (Device)", "memset"),
    ],
)
def test_which_kernels_compute_the_geglu(name, role):
    assert plans.kernel_role(name) == role
