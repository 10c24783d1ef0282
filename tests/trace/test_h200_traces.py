"""The CUDA parsing path, tested on real traces recorded on an NVIDIA H200 (torch 2.11) and committed
in tests/data/ (see traces/h200_provenance.json for how they were recorded)."""

from __future__ import annotations

import pytest
from support import data_file

import helpers


@pytest.fixture(scope="module")
def eager():
    return helpers.load_trace(data_file("h200_mlp_eager.json.gz"))


@pytest.fixture(scope="module")
def compiled():
    return helpers.load_trace(data_file("h200_mlp_compiled.json.gz"))


@pytest.fixture(scope="module")
def linear():
    return helpers.load_trace(data_file("h200_linear_bias.json.gz"))


def test_provenance_is_read_back(eager):
    assert eager.info.device == "NVIDIA H200"
    assert eager.info.torch_version.startswith("2.11")
    import gzip
    import json

    stored = json.loads(gzip.open(eager.info.path).read())["course_provenance"]
    assert eager.info.recorded_on == stored["recorded_on"] and len(eager.info.recorded_on) == 10
    assert "NVIDIA H200" in repr(eager) and "torch 2.11" in repr(eager)


def test_eager_mlp_kernels_per_step(eager):
    k = eager.kernels()
    assert eager.steps == [1, 2, 3]
    compute = k[k["kind"] == "kernel"]
    assert compute.groupby("step").size().to_dict() == {1: 5, 2: 5, 3: 5}  # 3 GEMMs + gelu + mul
    assert k[k["kind"] == "memset"].groupby("step").size().to_dict() == {1: 2, 2: 2, 3: 2}
    assert k["launched_by"].notna().all() and k["launch_call"].notna().all()
    gemms = compute[compute["name"].str.startswith("nvjet_sm90")]
    assert gemms.groupby("step").size().to_dict() == {1: 3, 2: 3, 3: 3}
    assert set(gemms["launched_by"]) == {"aten::mm"}
    # two GEMM shapes pick two tiles
    assert gemms["name"].nunique() == 2
    # torch 2.11 launches cuBLAS kernels through the driver API, elementwise ones through the runtime
    assert set(gemms["launch_call"]) == {"cuLaunchKernelEx"}
    assert set(compute.loc[~compute.index.isin(gemms.index), "launched_by"]) == {"aten::gelu", "aten::mul"}


def test_eager_mlp_ops_device_time(eager):
    ops = eager.ops().set_index("name")
    k = eager.kernels()
    assert ops.loc["aten::mm", "calls"] == 9
    # every kernel's time is accounted to exactly one op
    assert ops["self_device_us"].sum() == pytest.approx(k["duration_us"].sum())
    # views and reshapes launch nothing
    for view_op in ("aten::t", "aten::view", "aten::reshape"):
        if view_op in ops.index:
            assert ops.loc[view_op, "device_total_us"] == 0
    assert ops.loc["aten::linear", "device_total_us"] == pytest.approx(
        k[k["launched_by"] == "aten::mm"]["duration_us"].sum()
    )


def test_compiled_mlp_fuses_gelu_and_mul(eager, compiled):
    ek, ck = eager.kernels(), compiled.kernels()
    fused = ck[ck["name"].str.startswith("triton_poi_fused")]
    assert list(fused["name"].unique()) == ["triton_poi_fused__unsafe_view_gelu_mul_0"]
    assert fused.groupby("step").size().to_dict() == {1: 1, 2: 1, 3: 1}

    # the three GEMMs are byte-for-byte the same kernels as eager
    def gemms(k):
        return sorted(k.loc[k["name"].str.startswith("nvjet") & (k["step"] == 1), "name"])

    assert len(gemms(ek)) == 3 and gemms(ek) == gemms(ck)
    assert not ck["name"].str.contains("GeluCUDAKernelImpl").any()


def test_linear_bias_kernel_and_chain(linear):
    k = linear.kernels()
    assert k.groupby("step").size().to_dict() == {1: 1, 2: 1, 3: 1}
    assert k["name"].str.contains("_bias_").all() and set(k["launched_by"]) == {"aten::addmm"}
    chain = linear.chain("aten::linear")
    assert list(chain["path"]) == [
        "aten::linear",
        "aten::linear -> aten::t",
        "aten::linear -> aten::t -> aten::transpose",
        "aten::linear -> aten::t -> aten::transpose -> aten::as_strided",
        "aten::linear -> aten::addmm",
        f"aten::linear -> aten::addmm -> {k['name'].iloc[0]}",
    ]
    assert "aten::add" not in set(linear.ops()["name"])


def test_timeline_lanes_on_gpu_trace(eager):
    fig = eager.timeline()
    lanes = fig.layout.meta["lanes"]
    assert len([lane for lane in lanes if lane.startswith("GPU")]) == 1
    assert len([lane for lane in lanes if lane.startswith("CPU")]) == 1
    hover = " ".join(" ".join(map(str, t.hovertext)) for t in fig.data if t.hovertext is not None)
    assert "launched by aten::mm" in hover
    assert "NVIDIA H200" in fig.layout.title.text


def test_save_roundtrip_keeps_provenance(eager, tmp_path):
    again = helpers.load_trace(eager.save(tmp_path / "copy.json.gz"))
    assert again.info.device == "NVIDIA H200" and again.info.torch_version == eager.info.torch_version
    assert len(again.kernels()) == len(eager.kernels())
