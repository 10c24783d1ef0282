"""The MLP variants (helpers/mlp/variants.py), their plans (helpers/mlp/plans.py) and the kernel exercise
checker (helpers/lessons/kernel_exercises.py). On a CPU-only machine the Triton kernels run in the
interpreter on tiny shapes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl
from support import H200_REFERENCE, data_file
from taught_geglu import launcher, taught_kernel

import helpers
import helpers.kernels.modules
import helpers.lessons.exercises
import helpers.mlp.model
from helpers.lessons import kernel_exercises as ke
from helpers.lessons.exercises import MISSING, RIGHT, WRONG
from helpers.mlp import plans, variants
from helpers.mlp.model import BLOG_SHAPE, MLPShape, SimpleGeGLUMLP
from helpers.mlp.plans import geglu_bytes, geglu_mlp_flops

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
    assert helpers.relative_error(out, helpers.mlp.model.reference_forward(mlp, x)) < 1e-4


def test_course_geglu_copies_weights_and_cat_packs_them() -> None:
    mlp, _ = tiny_mlp()
    plain = helpers.kernels.modules.CourseGeGLUMLP.from_module(mlp)
    assert torch.equal(plain.gate_proj.weight, mlp.gate_proj.weight)
    assert plain.gate_proj.weight.data_ptr() != mlp.gate_proj.weight.data_ptr()  # a layer of its own
    cat = helpers.kernels.modules.CourseGeGLUMLP.from_module(mlp, concat=True)
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


# ------------------------------------------------------------------------------------- the exercise


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


def test_check_geglu_kernel_feedback() -> None:
    assert ke.check_geglu_kernel(launcher(taught_kernel)).status == RIGHT
    assert ke.check_geglu_kernel(None).status == MISSING
    assert ke.check_geglu_kernel(launcher(_skeleton_kernel)).status == MISSING  # wrote nothing yet
    wrong = ke.check_geglu_kernel(launcher(_product_kernel))
    assert wrong.status == WRONG and "relative error" in wrong.message
    short = ke.check_geglu_kernel(launcher(taught_kernel, grid_blocks=lambda n, b: n // b))  # drops the tail
    assert short.status == WRONG and "unwritten" in short.message

    def raises(gate, up, out):
        raise RuntimeError("boom")

    raised = ke.check_geglu_kernel(raises)
    assert raised.status == WRONG and "RuntimeError: boom" in raised.message
    with pytest.raises(TypeError, match="launcher"):
        ke.check_geglu_kernel(42)  # type: ignore[arg-type]


def test_time_geglu_kernel_needs_a_gpu() -> None:
    if ke.kernel_device().type == "cuda":
        table = ke.time_geglu_kernel({"right": launcher(taught_kernel)}, 1024, 1024)
        assert table["kernel_us"].iloc[0] > 0 and table["call_us"].iloc[0] > 0
    else:
        with pytest.raises(ValueError, match="CUDA GPU"):
            ke.time_geglu_kernel({"right": launcher(taught_kernel)}, 64, 64)


# ------------------------------------------------------------------------------------- the GPU path, on H200 traces
