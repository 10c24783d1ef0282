"""What notebooks 00-04 claim, checked here instead of by asserts in the lessons (issue 11).

Each test names the notebook and the claim. Structural facts are checked on the shipped H200
reference traces and on small live CPU profiles; nothing is timed (times are measured by the
lessons and the benchmark scripts, never asserted in unit tests).
"""

from __future__ import annotations

import pytest
import torch
from support import data_file

import helpers
import helpers.lessons.results
import helpers.measure.compile_counts
import helpers.mlp.fusion
import helpers.mlp.plans
from helpers.mlp.plans import geglu_bytes

BLOG_HIDDEN = 3072


@pytest.fixture(scope="module")
def h200() -> dict[str, helpers.trace.Trace]:
    names = (
        "linear_bias",
        "matmul_add",
        "linear_bias_compiled",
        "mlp_eager",
        "mlp_compiled",
        "mlp_compiled_max_autotune",
        "views_copy",
    )
    return {n: helpers.load_trace(data_file(f"h200_{n}.json.gz")) for n in names}


# ------------------------------------------------------------------ 00


def test_00_device_time_sits_under_the_launching_op(h200):
    trace = h200["linear_bias"]
    ops = trace.ops().set_index("name")
    assert set(trace.kernels()["launched_by"]) == {"aten::addmm"}
    assert ops.loc["aten::addmm", "self_device_us"] > 0 and ops.loc["aten::t", "device_total_us"] == 0
    assert ops.loc["aten::linear", "device_total_us"] == pytest.approx(ops.loc["aten::addmm", "device_total_us"])
    calls = helpers.nb00.launch_calls(trace)
    assert not calls["call"].str.contains("Occupancy").any()  # the notebook says: no occupancy query on the H200


def test_00_raw_profiler_schedule_keeps_only_active_steps():
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    layer, x = torch.nn.Linear(8, 4), torch.randn(16, 8)
    with (
        torch.no_grad(),
        profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=1, warmup=2, active=4, repeat=1),
            record_shapes=True,
        ) as prof,
    ):
        for _ in range(7):
            with record_function("my_linear"):
                layer(x)
            prof.step()
    table = helpers.nb00.key_averages_frame(prof).set_index("name")
    assert table.loc["aten::linear", "calls"] == 4 and table.loc["my_linear", "calls"] == 4
    by_shape = helpers.nb00.key_averages_frame(prof, group_by_input_shape=True)
    assert "[[16, 8], [4, 8], [4]]" in set(by_shape.loc[by_shape["name"] == "aten::linear", "input_shapes"])


def test_key_averages_frame_by_shape_needs_recorded_shapes():
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.nn.Linear(8, 4)(torch.randn(2, 8))
    assert not helpers.nb00.key_averages_frame(prof).empty
    with pytest.raises(ValueError, match="record_shapes=True"):
        helpers.nb00.key_averages_frame(prof, group_by_input_shape=True)


# ------------------------------------------------------------------ 01


def test_01_views_allocate_nothing_copies_allocate_and_write():
    built = helpers.workloads.views_and_copies("cpu", rows=64, cols=32)
    trace = helpers.profile(built.fn, *built.inputs, steps=2)
    movers = {"aten::copy_", "aten::empty", "aten::empty_like", "aten::clone"}
    for op in ("aten::t", "aten::transpose", "aten::view", "aten::reshape", "aten::as_strided"):
        assert not set(trace.chain(op)["name"]) & movers, op
    for op in ("aten::contiguous", "aten::flatten"):
        assert {"aten::copy_", "aten::empty_like"} <= set(trace.chain(op)["name"]), op


def test_01_a_transposing_copy_on_the_h200_is_far_below_the_roof(h200):
    # section 6: the views' two copies fit in the L2 cache (no DRAM floor) and still run far below the roof
    floors = helpers.kernel_floors(h200["views_copy"], step="all")
    assert (floors["family"] == "copy").all() and set(floors["launched_by"]) == {"aten::copy_"}
    assert (floors["achieved_tbps"] < 0.25 * helpers.lessons.results.reference_ceilings().bandwidth_tbps).all()
    # ... and at 268 MB (beyond the L2), ATen's transposing copy is far below its floor, the straight
    # copy at it and the compiled, tiled transpose in between
    copies = helpers.kernel_floors(helpers.load_trace(data_file("h200_transpose_copies.json.gz")))
    straight, aten, tiled = copies["pct_of_floor"].tolist()
    assert straight > 90 and aten < 25 and aten < tiled < straight


def test_01_transpose_copies_workload_runs_three_copies_on_cpu_when_asked():
    built = helpers.workloads.transpose_copies("cpu", rows=8, cols=4, tiled=False)
    clone, transposed = built.fn(built.inputs[0])
    assert torch.equal(clone, built.inputs[0]) and torch.equal(transposed, built.inputs[0].t())
    assert built.details["tiled"] is False


# ------------------------------------------------------------------ 02


def test_02_addmm_bias_epilogue_on_the_h200_and_copy_first_on_the_cpu(h200, linear_trace):
    gpu = h200["linear_bias"].chain("aten::addmm")
    kernels = gpu[gpu["kind"] == "kernel"]
    assert len(kernels) == 1 and "aten::copy_" not in set(gpu["name"])
    assert helpers.decode_kernel(kernels["name"].iloc[0])["bias"] is True
    cpu_paths = set(linear_trace.chain("aten::linear")["path"])
    assert {"aten::linear -> aten::addmm -> aten::expand", "aten::linear -> aten::addmm -> aten::copy_"} <= cpu_paths
    assert not {"aten::add", "aten::add_"} & set(linear_trace.chain("aten::linear")["name"])


def test_02_ampere_names_do_not_say_bias():
    """Item 7: only assert what holds on every GPU: nvjet says bias, CUTLASS/cuBLAS Ampere names do not."""
    for name in (
        "cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_32x1_tn_align8",
        "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn",
    ):
        decoded = helpers.decode_kernel(name)
        assert decoded["family"] == "gemm" and decoded.get("bias") is None and decoded["layout"][:2].upper() == "TN"


def test_02_the_by_hand_gemm_differs_only_by_its_epilogue_on_the_h200(h200):
    linear = helpers.decode_kernel(helpers.kernel_table(h200["linear_bias"])["name"].iloc[0])
    by_hand = helpers.kernel_table(h200["matmul_add"])
    gemm = helpers.decode_kernel(by_hand.loc[by_hand["family"] == "gemm", "name"].iloc[0])
    assert linear["tile"] == gemm["tile"] and linear["bias"] is True and gemm.get("bias") is None
    assert list(by_hand["family"]) == ["gemm", "elementwise"]


def test_02_compile_of_one_linear_keeps_the_kernel_and_calls_addmm_directly(h200):
    eager, compiled = h200["linear_bias"], h200["linear_bias_compiled"]
    assert list(helpers.kernel_table(eager)["name"]) == list(helpers.kernel_table(compiled)["name"])
    names = set(compiled.ops(include_annotations=True)["name"])
    assert "aten::addmm" in names and not {"aten::linear", "aten::t"} & names
    assert "TorchDynamo Cache Lookup" in names and any(n.startswith("Torch-Compiled Region") for n in names)


# ------------------------------------------------------------------ 03


def test_03_memsets_come_from_inside_the_gemm_calls(h200):
    table = helpers.kernel_table(h200["mlp_eager"])
    memsets = table[table["kind"] == "memset"]
    assert len(memsets) == 2 and set(memsets["launched_by"]) == {"aten::mm"}
    assert (table.loc[memsets.index + 1, "family"] == "gemm").all()
    assert memsets["duration_us"].sum() < 0.05 * table["duration_us"].sum()


def test_03_two_gemm_shapes_two_tiles_and_who_is_bound_by_what(h200):
    floors = helpers.kernel_floors(h200["mlp_eager"])
    gemms = floors[floors["family"] == "gemm"]
    assert len(set(gemms["gemm_mnk"])) == 2
    tiles = gemms.groupby("gemm_mnk")["name"].agg(lambda s: {helpers.decode_kernel(n)["tile"] for n in s})
    assert all(len(t) == 1 for t in tiles) and len(set.union(*tiles)) == 2
    assert (gemms["bound_by"] == "compute").all()
    pointwise = floors[floors["family"] == "elementwise"]
    assert (pointwise["bound_by"] == "memory").all()
    families = floors.groupby("family")["duration_us"].sum()
    assert families["gemm"] > 0.5 * families.sum()


# ------------------------------------------------------------------ 04


def test_04_compile_fuses_the_pointwise_pair_and_saves_device_time(h200):
    eager, compiled = h200["mlp_eager"], h200["mlp_compiled"]
    split = {
        name: helpers.call_split(t)["device_us"].median() for name, t in (("eager", eager), ("compiled", compiled))
    }
    assert split["compiled"] < split["eager"]
    traffic = helpers.geglu_table({"eager": eager, "compiled": compiled}).set_index("variant")
    assert list(traffic["tensors moved"]) == [5, 3]


def test_04_max_autotune_is_attributed_kernel_by_kernel(h200):
    tuned = h200["mlp_compiled_max_autotune"]
    roles = helpers.mlp.fusion.kernels_by_role({"default": h200["mlp_compiled"], "max-autotune": tuned})
    mine = roles[roles["variant"] == "max-autotune"].set_index("role")
    assert set(mine.index) == {"gate/up GEMMs", "GeGLU pointwise", "down GEMM"}  # nothing left unattributed
    per_step = tuned.kernels().groupby("step")["duration_us"].sum().median()
    assert mine["us_per_forward"].sum() == pytest.approx(per_step, rel=0.02)
    assert mine.loc["gate/up GEMMs", "launches"] == 2 and mine.loc["GeGLU pointwise", "launches"] == 1
    # the down template's name lists gelu and mul, yet a separate pointwise kernel computes them
    names = helpers.kernel_table(tuned)["name"]
    assert any(n.startswith("triton_tem") and "gelu" in n for n in names)
    assert helpers.mlp.plans.infer_plan(names) == "pointwise-fused"


def test_04_other_strides_recompile_rather_than_fail():
    built = helpers.workloads.geglu_mlp("cpu", shape=helpers.MLPShape(batch=2, seq=8, dim=16, hidden=32))
    x = built.inputs[0]
    transposed = x.transpose(0, 1).contiguous().transpose(0, 1)
    assert transposed.shape == x.shape and transposed.stride() != x.stride()
    sweep = helpers.measure.compile_counts.shape_sweep(built.fn, [x, transposed, x], backend="eager", progress=False)
    assert list(sweep.table["new_graphs"]) == [1, 1, 0]
    assert "stride" in sweep.table["why"].iloc[1]
    assert sweep.notes["torch_frame_count"] == sweep.compiles == 2


# ------------------------------------------------------------------ 06


def test_06_the_pointwise_work_of_each_variant_against_its_floor():
    """Section 1's table (recorded H200 run): eager's GeGLU is two kernels far from the floor, the compiled
    and the course's one kernel each; the course's runs near the floor (87.5% of the memory roof, the write
    bandwidth of h200_ceilings.json); every floor is 3 tensors at the roof."""
    recorded = helpers.load_results("h200_mlp_variants")
    pointwise = recorded.table("pointwise").set_index("variant")
    counts = pointwise["pointwise_kernels"]
    assert counts["eager"] == 2 and counts["compile"] == 1 and counts["course-geglu"] == 1
    setup = recorded.table("setup").iloc[0]
    floor_us = geglu_bytes(setup["tokens"], setup["hidden"], getattr(torch, setup["dtype"]))
    floor_us /= helpers.lessons.results.reference_ceilings().bandwidth_bytes_per_s
    assert pointwise["floor_us"].to_numpy() == pytest.approx(floor_us * 1e6, rel=1e-9)
    assert 85 <= pointwise.loc["course-geglu", "pct_of_floor"] <= 100
    assert pointwise.loc["eager", "pct_of_floor"] < 70  # its two kernels move 5 tensors' worth, not 3
