"""The MLP variants (helpers/mlp/variants.py), their measurement (helpers/mlp/bench*.py), the benchmark's
command line (benchmarks/mlp_variants.py) and the kernel exercise checker (helpers/lessons/kernel_exercises.py).

On a CPU-only machine the Triton kernels run in the interpreter on tiny shapes. One test runs the
command line's ``--quick`` mode end to end (it compiles the MLP once: ~15-25 s on 2 cores).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest
import torch
import triton
import triton.language as tl
from common import variants_table
from support import data_file, load_benchmark

import helpers
from helpers.lessons import kernel_exercises as ke
from helpers.lessons.exercises import MISSING, RIGHT, WRONG
from helpers.measure.ceilings import H200_REFERENCE
from helpers.mlp import bench as mlp_bench
from helpers.mlp import bench_measure, plans, results, variants
from helpers.mlp.bench_shapes import SHAPES
from helpers.mlp.model import BLOG_SHAPE, MLPShape, SimpleGeGLUMLP
from helpers.mlp.plans import geglu_bytes, geglu_mlp_flops
from helpers.mlp.targets import check_targets

ROOT = Path(__file__).resolve().parents[2]
TINY = MLPShape(batch=2, seq=9, dim=48, hidden=80)  # M=18: no multiple of any tile; 80 and 48 no powers of two


def tiny_mlp(shape: MLPShape = TINY) -> tuple[SimpleGeGLUMLP, torch.Tensor]:
    device = ke.kernel_device()
    torch.manual_seed(0)
    mlp = SimpleGeGLUMLP(shape.dim, shape.hidden).to(device).eval()
    x = torch.randn(shape.batch, shape.seq, shape.dim, device=device)
    return mlp, x


# ------------------------------------------------------------------------------------- builders


def test_registry_names_and_plans() -> None:
    assert variants.VARIANT_NAMES == (
        "eager",
        "compile",
        "compile-max-autotune",
        "liger",
        "course-geglu",
        "course-geglu-cat",
        "course-fused",
    )
    for spec in variants.VARIANTS.values():
        assert spec.plan is None or spec.plan in plans.PLANS
    assert variants.VARIANTS["compile-max-autotune"].plan is None  # read from its kernels
    with pytest.raises(ValueError, match="unknown variant"):
        variants.build_variant("nope", tiny_mlp()[0])
    with pytest.raises(TypeError, match="SimpleGeGLUMLP"):
        variants.build_variant("eager", torch.nn.Linear(2, 2))


@pytest.mark.parametrize("name", ["eager", "course-geglu", "course-geglu-cat", "course-fused"])
def test_uncompiled_variants_match_fp32_reference(name: str) -> None:
    mlp, x = tiny_mlp()
    variant = variants.build_variant(name, mlp)
    with torch.no_grad():
        out = variant(x)
    assert out.shape == x.shape
    assert helpers.relative_error(out, helpers.reference_forward(mlp, x)) < 1e-4


def test_course_geglu_copies_weights_and_cat_packs_them() -> None:
    mlp, _ = tiny_mlp()
    plain = helpers.CourseGeGLUMLP.from_module(mlp)
    assert torch.equal(plain.gate_proj.weight, mlp.gate_proj.weight)
    assert plain.gate_proj.weight.data_ptr() != mlp.gate_proj.weight.data_ptr()  # a layer of its own
    cat = helpers.CourseGeGLUMLP.from_module(mlp, concat=True)
    assert torch.equal(cat.gate_up_proj.weight, torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]))
    with pytest.raises(variants.VariantUnavailable, match="bias-free"):
        variants.build_variant("course-geglu", SimpleGeGLUMLP(8, 16, bias=True))


def test_liger_is_unavailable_or_carries_the_same_weights() -> None:
    mlp, _ = tiny_mlp()
    if importlib.util.find_spec("liger_kernel") is None:
        with pytest.raises(variants.VariantUnavailable, match="liger-kernel"):
            variants.build_variant("liger", mlp)
        return
    model = variants.build_variant("liger", mlp).fn
    for key, value in mlp.state_dict().items():
        assert torch.equal(model.state_dict()[key], value)


def test_build_variants_reports_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    mlp, _ = tiny_mlp()

    def unavailable(_mlp):
        raise variants.VariantUnavailable("not here")

    spec = variants.VARIANTS["liger"]
    monkeypatch.setitem(
        variants.VARIANTS,
        "liger",
        variants.VariantSpec(spec.name, spec.label, spec.plan, spec.description, unavailable),
    )
    built, missing = variants.build_variants(mlp, ["eager", "liger"])
    assert list(built) == ["eager"] and missing == {"liger": "not here"}


# ------------------------------------------------------------------------------------- plans


def test_plan_bytes_differ_by_the_intermediates() -> None:
    s, M, D, H = 2, BLOG_SHAPE.tokens, BLOG_SHAPE.dim, BLOG_SHAPE.hidden
    act = M * H * s
    b = {p: plans.plan_bytes(p, BLOG_SHAPE, torch.bfloat16) for p in plans.PLANS}
    assert b["unfused"] - b["pointwise-fused"] == 2 * act  # gelu(gate) written and read
    assert b["pointwise-fused"] - b["gemm-fused-geglu"] == 2 * act  # h written and read
    assert b["pointwise-fused"] - b["gemm-epilogue"] == 4 * act + M * D * s  # gate, up; x read once
    assert b["pointwise-fused"] - b["concat-gemm"] == M * D * s  # x read once instead of twice
    geglu = plans.plan_kernels("pointwise-fused", BLOG_SHAPE)
    assert geglu.loc[geglu["role"] == "pointwise", "bytes"].item() == geglu_bytes(M, H, torch.bfloat16)
    for plan in plans.PLANS:
        assert plans.plan_kernels(plan, BLOG_SHAPE)["flops"].sum() == geglu_mlp_flops(M, D, H)
    assert plans.plan_bytes("gemm-epilogue", m=M, dim=D, hidden=H) == b["gemm-epilogue"]
    with pytest.raises(ValueError, match="unknown plan"):
        plans.plan_kernels("magic", BLOG_SHAPE)


def test_plan_floors_on_h200_reference() -> None:
    compute = (
        geglu_mlp_flops(BLOG_SHAPE.tokens, BLOG_SHAPE.dim, BLOG_SHAPE.hidden) / H200_REFERENCE.matmul_flop_per_s * 1e6
    )
    pointwise = (
        geglu_bytes(BLOG_SHAPE.tokens, BLOG_SHAPE.hidden, torch.bfloat16) / H200_REFERENCE.bandwidth_bytes_per_s * 1e6
    )
    assert plans.plan_floor_us("gemm-epilogue", H200_REFERENCE, BLOG_SHAPE) == pytest.approx(compute, rel=1e-9)
    assert plans.plan_floor_us("pointwise-fused", H200_REFERENCE, BLOG_SHAPE) == pytest.approx(
        compute + pointwise, rel=1e-9
    )
    # h200_ceilings.json: 139.3 us at 832.5 TFLOP/s, 32.5 us at the 4.65 TB/s memory roof; the ranges
    # hold for any re-measurement of the H200 ceilings within several percent (benchmarks/ceilings.py)
    assert 130 < compute < 150 and 31 < pointwise < 37
    floors = plans.plans_frame(BLOG_SHAPE, torch.bfloat16, H200_REFERENCE).set_index("plan")["floor_us"]
    assert floors["gemm-epilogue"] == pytest.approx(floors.min(), rel=1e-12)
    assert floors["unfused"] == floors.max()


def test_infer_plan_from_kernel_names() -> None:
    import helpers

    for name, plan in (("h200_mlp_eager.json.gz", "unfused"), ("h200_mlp_compiled.json.gz", "pointwise-fused")):
        kernels = helpers.load_trace(data_file(name)).kernels()
        names = kernels.loc[kernels["step"] == kernels["step"].min(), "name"]
        assert plans.infer_plan(names) == plan
    assert (
        plans.infer_plan(
            [
                "triton_tem_fused_mm_t_view_0",
                "triton_tem_fused__unsafe_view_gelu_mm_mul_t_view_2",
                "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT",
            ]
        )
        == "gemm-fused-geglu"
    )
    assert (
        plans.infer_plan(["_gate_up_geglu_tma_kernel", "nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_TNT"])
        == "gemm-epilogue"
    )
    nvjet = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"
    assert plans.infer_plan([nvjet, nvjet, "_geglu_kernel", nvjet]) == "pointwise-fused"
    assert plans.infer_plan([nvjet, "_geglu_kernel", nvjet]) == "concat-gemm"
    assert plans.infer_plan(["something_else"]) is None
    max_autotune = helpers.load_trace(helpers.reference_trace_path("h200_mlp_compiled_max_autotune")).kernels()
    # its down GEMM's name lists gelu and mul, but a separate pointwise kernel computes them
    assert (
        plans.infer_plan(max_autotune.loc[max_autotune["step"] == max_autotune["step"].min(), "name"])
        == "pointwise-fused"
    )
    assert plans.kernel_role("_gate_up_geglu_tma_kernel") == "gemm"
    assert plans.kernel_role("_geglu_kernel") == "geglu"
    assert plans.kernel_role("Memset (Device)") == "memset"


# ------------------------------------------------------------------------------------- measuring


@pytest.fixture(scope="module")
def quick_result() -> dict:
    """Three uncompiled variants, two training variants and a two-size sweep at a tiny shape (seconds).

    On the device where the Triton kernels run here: the CPU (interpreter, float32) or the GPU (bf16).
    """
    return mlp_bench.run(
        ke.kernel_device(),
        shapes=["tiny"],
        shape=MLPShape(batch=1, seq=16, dim=32, hidden=64),
        variants=["eager", "course-geglu", "course-fused"],
        training=["eager", "course-fused-save", "course-fused-recompute"],
        sweep_m=[16, 32],
        sweep_seq=16,
        steps=2,
        warmup=1,
        e2e_iters=2,
        train_steps=2,
        sweep_steps=2,
        command="pytest",
    )


def test_run_measures_every_variant(quick_result: dict) -> None:
    r = quick_result
    on_gpu = ke.kernel_device().type == "cuda"
    assert r["schema"] == mlp_bench.SCHEMA and r["complete"]
    assert r["provenance"]["device_type"] == ke.kernel_device().type and r["provenance"]["command"] == "pytest"
    shape = r["shapes"]["tiny"]
    for name in ("eager", "course-geglu", "course-fused"):
        v = shape["variants"][name]
        assert v["status"] == "ok", v.get("reason")
        assert v["rel_err"] < (1e-2 if on_gpu else 1e-4)
        if on_gpu:
            assert v["kernel_us"] > 0 and v["rate_basis"] == "kernel_us"
            assert v["host_overhead_us"] == pytest.approx(v["e2e_sync_us"] - v["kernel_us"])
            assert v["graphed_us"] > 0 and v["graph_max_abs_diff"] == 0
        else:  # no device kernels on a CPU: rates use the wall time, and say so; no graphs
            assert v["kernel_us"] is None and v["rate_basis"] == "e2e_nosync_us"
            assert v["graphed_us"] is None and "CUDA" in v["graph_note"]
        assert v["e2e_nosync_us"] > 0 and v["e2e_sync_us"] > 0 and v["enqueue_us"] > 0
        assert v["flops"] == geglu_mlp_flops(16, 32, 64)
        assert 0 < v["pct_of_mlp_floor"] and v["plan"] == variants.VARIANTS[name].plan
    act = 16 * 64 * 4  # one [M, hidden] fp32 tensor, in bytes
    for name, kept in (("eager", 4), ("course-fused-save", 3), ("course-fused-recompute", 0)):
        t = shape["training"][name]
        assert t["status"] == "ok", t.get("reason")
        assert t["dx_rel_err"] < (1e-2 if on_gpu else 1e-4) and t["step_us"] > 0
        assert t["saved_mb"] * 1e6 == pytest.approx(kept * act), name
        assert (t.get("peak_mb") is not None) == on_gpu
    assert r["sweep"]["m"] == [16, 32]
    assert {(row["variant"], row["m"]) for row in r["sweep"]["rows"]} == {
        (n, m) for n in ("eager", "course-geglu", "course-fused") for m in (16, 32)
    }
    assert all(row["status"] == "ok" and row["e2e_sync_us"] > 0 for row in r["sweep"]["rows"])
    assert {p["kernel"] for p in r["gate_up_plans"]} >= {"gate_up_forward", "geglu_backward_gemm"}


def test_run_rejects_bad_requests() -> None:
    with pytest.raises(ValueError, match="unknown shape preset"):
        mlp_bench.run("cpu", shapes=["huge"])
    with pytest.raises(ValueError, match="unknown training variant"):
        mlp_bench.run("cpu", training=["eager", "fastest"])
    with pytest.raises(ValueError, match="multiples of sweep_seq"):
        mlp_bench.run("cpu", sweep_m=[100])
    assert mlp_bench.check_shapes(["blog", "decode"])[1:] == [n for n, p in SHAPES.items() if "decode" in p.tags]


def test_results_round_trip_and_views(quick_result: dict, tmp_path: Path) -> None:
    path = mlp_bench.save_results(quick_result, tmp_path / "r.json")
    loaded = results.load_results(path)
    assert loaded.data == json.loads(json.dumps(quick_result, default=str))
    assert loaded.ceilings.source == "reference"  # read from a file: a recorded reference, not measured here
    assert results.BenchResults.from_run(quick_result).ceilings.source == "measured"
    assert "recorded results" in loaded.label and loaded.provenance["device"] in loaded.label
    table = loaded.table()
    assert list(table["variant"]) == ["eager", "course-geglu", "course-fused"]
    assert set(loaded.card()["item"]) >= {"device", "torch", "triton", "date", "command", "shape tiny"}
    times = loaded.times(relative_to="eager")
    assert list(times.columns[:7]) == ["variant", *results.TIME_COLUMNS]
    assert (times.loc[times["variant"] == "eager", "e2e_sync_vs_eager"] == 1.0).all()
    training = loaded.training()
    assert list(training["variant"]) == ["eager", "course-fused-save", "course-fused-recompute"]
    assert set(loaded.shapes_table(("eager", "course-fused"))["shape"]) == {"tiny"}
    frame = loaded.roofline_frame()
    assert len(frame) == 3 and frame["arithmetic_intensity"].notna().all()
    fig = loaded.roofline_figure()
    assert loaded.provenance["device"] in fig.layout.title.text
    assert len(loaded.sweep()) == 6
    winners = loaded.sweep_winners()
    assert list(winners["m"]) == [16, 32] and set(winners["fastest"]) <= {"eager", "course-geglu", "course-fused"}
    by_sync = loaded.sweep_winners("e2e_sync_us")
    assert by_sync.attrs["metric"] == "e2e_sync_us" and "fastest_e2e_sync_us" in by_sync
    with pytest.raises(ValueError, match="metric must be one of"):
        loaded.sweep_winners("speed")
    assert len(loaded.sweep_figure().data) == 4  # three variants and the floor
    assert "synchronised" in loaded.sweep_figure(metric="e2e_sync_us").layout.title.text
    rel = loaded.sweep_figure(relative_to="eager")
    assert list(rel.data[0].y) == [1.0, 1.0]
    with pytest.raises(ValueError, match="not in the sweep"):
        loaded.sweep_figure(relative_to="liger")
    with pytest.raises(KeyError, match="present"):
        loaded.variant("liger")
    with pytest.raises(KeyError, match="shape 'blog' is not in these results"):
        loaded.table("blog")
    assert "plan" in table.columns and variants_table(quick_result).count("\n") > 5


def test_load_results_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(FileNotFoundError, match="benchmarks/mlp_variants.py"):
        results.load_results(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ValueError, match="schema"):
        results.load_results(bad)
    monkeypatch.setenv(mlp_bench.RESULTS_ENV, str(tmp_path / "elsewhere.json"))
    with pytest.raises(FileNotFoundError, match="elsewhere.json"):
        results.load_results()


def test_committed_h200_results(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(mlp_bench.RESULTS_ENV, raising=False)
    if not mlp_bench.RESULTS_PATH.exists():
        pytest.skip(
            f"{mlp_bench.RESULTS_PATH} is recorded on an H200 by benchmarks/mlp_variants.py and not yet committed"
        )
    r = results.load_results()
    assert "H200" in r.provenance["device"] and r.complete
    assert r.data["config"]["device"] == "cuda" and r.shape == BLOG_SHAPE and r.main == "blog"
    for name in r.measured():
        v = r.variant(name)
        assert v["rel_err"] < 1e-2 and v["rate_basis"] == "kernel_us"
        assert v["e2e_sync_us"] >= v["kernel_us"], "a synchronised call cannot beat its own kernels"
        assert v["host_overhead_us"] == pytest.approx(v["e2e_sync_us"] - v["kernel_us"])
    assert r.variant("eager")["kernels_per_forward"] == 5
    assert r.variant("course-fused")["kernels_per_forward"] == 2
    for name in r.shape_names():
        for t in r.data["shapes"][name].get("training", {}).values():
            assert t["status"] != "ok" or t["dx_rel_err"] < 2e-2


def test_targets_on_a_made_up_result(quick_result: dict) -> None:
    data = json.loads(json.dumps(quick_result, default=str))
    data["config"]["device"] = "cuda"
    blog = data["shapes"]["tiny"]
    for name, (kernel, sync) in {
        "eager": (236.0, 264.0),
        "compile": (207.0, 306.0),
        "course-fused": (178.0, 200.0),
    }.items():
        blog["variants"][name] = {"status": "ok", "kernel_us": kernel, "e2e_sync_us": sync, "e2e_nosync_us": kernel,
                                  "host_overhead_us": sync - kernel, "rel_err": 2e-3}  # fmt: skip
    blog["training"] = {
        "eager": {"status": "ok", "step_us": 720.0, "peak_mb": 279.0, "dx_rel_err": 3e-3},
        "liger": {"status": "ok", "step_us": 850.0, "peak_mb": 183.0, "dx_rel_err": 3e-3},
        "course-fused-save": {"status": "ok", "step_us": 600.0, "peak_mb": 170.0, "dx_rel_err": 3e-3},
        "course-fused-recompute": {"status": "ok", "step_us": 700.0, "peak_mb": 190.0, "dx_rel_err": 3e-3},
    }
    t = check_targets(results.BenchResults(data, source="live")).set_index("target")
    assert (
        t.loc["kernel time / compile's", "value"] == pytest.approx(178 / 207)
        and t.loc["kernel time / compile's", "met"]
    )
    assert t.loc["host overhead - eager's (us)", "value"] == pytest.approx(22 - 28)
    assert t.loc["save-mode step / fastest of eager, compile, Liger", "value"] == pytest.approx(600 / 720)
    assert not t.loc["recompute-mode peak memory / Liger's", "met"]  # 190 > 183
    with pytest.raises(TypeError, match="BenchResults"):
        check_targets(data)


def test_schema_1_results_still_load(tmp_path: Path) -> None:
    old = {
        "schema": "course-mlp-variants/1", "complete": True, "provenance": {"device": "NVIDIA H200", "torch": "2.11",
        "triton": "3.6.0", "date": "2026-11-29"}, "ceilings": json.loads(json.dumps(H200_REFERENCE.as_dict())),
        "config": {"device": "cuda", "dtype": "bfloat16", "shape": {"batch": 64, "seq": 128, "dim": 768, "hidden": 3072,
        "tokens": 8192}}, "variants": {"eager": {"status": "ok", "kernel_us": 230.0, "e2e_sync_us": 260.0,
        "e2e_nosync_us": 240.0}}, "sweep": {"m": [], "rows": [], "skipped": {}},
    }  # fmt: skip
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    r = results.load_results(path)
    assert r.main == "blog" and r.measured() == ["eager"] and r.training().empty
    assert r.variant("eager")["host_overhead_us"] == 30.0
    assert pd.isna(r.times().loc[0, "graphed_us"]) and "course-mlp-variants/1" in set(r.card()["value"])


# ------------------------------------------------------------------------------------- command line


def test_cli_refuses_to_write_cpu_numbers_as_h200(tmp_path: Path) -> None:
    cli = load_benchmark("mlp_variants")
    assert cli.main(["--device", "cpu", "--quick"]) == 2  # no --out: the default is for H200 results
    assert cli.main(["--device", "cpu", "--quick", "--out", str(tmp_path / "h200_x.json")]) == 2
    assert not (tmp_path / "h200_x.json").exists()


@pytest.mark.slow
def test_cli_quick_cpu_run(tmp_path: Path) -> None:
    cli = load_benchmark("mlp_variants")
    out = tmp_path / "cpu.json"
    assert cli.main(["--device", "cpu", "--quick", "--out", str(out)]) == 0
    r = results.load_results(out)
    assert r.complete and r.data["config"]["device"] == "cpu" and r.shape_names() == ["tiny"]
    assert "compile-max-autotune" not in r.data["shapes"]["tiny"]["variants"]  # --quick leaves it out
    compiled = r.variant("compile")
    assert compiled["status"] == "ok" and compiled["rel_err"] < 1e-4
    assert compiled["kernels_per_forward"] >= 1  # Inductor's generated C++ kernel(s)
    assert r.variant("liger")["status"] in ("unavailable", "failed")  # no Liger kernel runs on a CPU
    assert "compile" in r.data["sweep"]["skipped"]
    assert r.data["sweep"]["m"] == [16, 32]
    assert set(r.training()["variant"]) >= {"eager", "course-fused-save", "course-fused-recompute"}


# ------------------------------------------------------------------------------------- the exercise


@triton.jit
def _right_kernel(gate_ptr, up_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    g = tl.load(gate_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(up_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    h = g * tl.sigmoid(1.5957691216057308 * (g + 0.044715 * g * g * g)) * u
    tl.store(out_ptr + offsets, h.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _skeleton_kernel(gate_ptr, up_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements  # noqa: F841 - the learner's copy stops here
    pass


@triton.jit
def _product_kernel(gate_ptr, up_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    g = tl.load(gate_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(up_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offsets, (g * u).to(out_ptr.dtype.element_ty), mask=mask)


def _launcher(kernel, grid_blocks=None):
    def launch(gate, up, out, BLOCK=1024):
        n = gate.numel()
        kernel[(grid_blocks(n, BLOCK) if grid_blocks else triton.cdiv(n, BLOCK),)](gate, up, out, n, BLOCK=BLOCK)

    return launch


def test_check_geglu_kernel_feedback() -> None:
    assert ke.check_geglu_kernel(_launcher(_right_kernel)).status == RIGHT
    assert ke.check_geglu_kernel(None).status == MISSING
    assert ke.check_geglu_kernel(_launcher(_skeleton_kernel)).status == MISSING  # wrote nothing yet
    wrong = ke.check_geglu_kernel(_launcher(_product_kernel))
    assert wrong.status == WRONG and "relative error" in wrong.message
    short = ke.check_geglu_kernel(_launcher(_right_kernel, grid_blocks=lambda n, b: n // b))  # drops the tail
    assert short.status == WRONG and "unwritten" in short.message

    def raises(gate, up, out):
        raise RuntimeError("boom")

    raised = ke.check_geglu_kernel(raises)
    assert raised.status == WRONG and "RuntimeError: boom" in raised.message
    with pytest.raises(TypeError, match="launcher"):
        ke.check_geglu_kernel(42)  # type: ignore[arg-type]


def test_time_geglu_kernel_needs_a_gpu() -> None:
    if ke.kernel_device().type == "cuda":
        table = ke.time_geglu_kernel({"right": _launcher(_right_kernel)}, 1024, 1024)
        assert table["us"].iloc[0] > 0
    else:
        with pytest.raises(ValueError, match="CUDA GPU"):
            ke.time_geglu_kernel({"right": _launcher(_right_kernel)}, 64, 64)


# ------------------------------------------------------------------------------------- the GPU path, on H200 traces


def test_kernel_summary_and_rates_on_h200_traces() -> None:
    """The summary and rates the benchmark derives on a GPU, computed from the committed H200 traces."""
    import helpers

    eager = bench_measure.kernel_summary(helpers.load_trace(data_file("h200_mlp_eager.json.gz")))
    compiled = bench_measure.kernel_summary(helpers.load_trace(data_file("h200_mlp_compiled.json.gz")))
    assert (eager["kernels_per_forward"], eager["device_events_per_forward"]) == (5, 7)  # + 2 memsets
    assert (compiled["kernels_per_forward"], compiled["device_events_per_forward"]) == (4, 6)
    assert eager["steady"] and 225 < eager["kernel_us"] < 240 and 195 < compiled["kernel_us"] < 215
    roles = {k["role"] for k in eager["kernels"]}
    assert roles == {"gemm", "gelu", "mul", "memset"}
    assert sum(k["calls_per_forward"] for k in eager["kernels"] if k["role"] == "gemm") == 3

    eager_rates = bench_measure.derive_rates(eager, "unfused", BLOG_SHAPE, torch.bfloat16, H200_REFERENCE)
    compiled_rates = bench_measure.derive_rates(compiled, None, BLOG_SHAPE, torch.bfloat16, H200_REFERENCE)
    assert compiled_rates["plan"] == "pointwise-fused" and compiled_rates["plan_source"] == "read from kernel names"
    assert eager_rates["rate_basis"] == "kernel_us"
    assert eager_rates["achieved_tflops"] == pytest.approx(geglu_mlp_flops(8192, 768, 3072) / eager["kernel_us"] / 1e6)
    # eager runs near its own plan's floor on the H200 (~233 us against ~205); fusion lowers the floor
    # instead. No floor is beaten (tests/measure/test_ceilings.py: the ceilings are measured one way).
    assert 80 < eager_rates["pct_of_plan_floor"] <= 100
    assert compiled_rates["plan_floor_us"] < eager_rates["plan_floor_us"]
    assert eager_rates["mlp_floor_us"] == pytest.approx(
        geglu_mlp_flops(8192, 768, 3072) / H200_REFERENCE.matmul_flop_per_s * 1e6, rel=1e-9
    )
    # 2*3*M*D*H FLOPs at the recorded matmul roof (832.5 TFLOP/s, h200_ceilings.json): 139.3 us
    assert 135 < eager_rates["mlp_floor_us"] < 145
    # the fused pointwise kernel runs close to the memory roof (87% of the write bandwidth, the best
    # of copy, read and write in h200_ceilings.json), the eager pair far from it
    assert compiled_rates["pointwise_us"] < 40 and eager_rates["pointwise_us"] > 60
    assert 85 < 100 * compiled_rates["pointwise_floor_us"] / compiled_rates["pointwise_us"] <= 100
