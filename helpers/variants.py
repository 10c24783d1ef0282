"""The GeGLU MLP in seven implementations, defined once for the benchmark and notebook 06.

Every variant computes the same function as the blog's ``SimpleGeGLUMLP`` with the same weights:

========================  ===================================================================
``eager``                 the module as written: 3 GEMMs, GeLU, mul (5 kernels on a GPU)
``compile``               ``torch.compile`` (default mode, static shapes): GeLU and mul fused
``compile-max-autotune``  ``torch.compile(mode="max-autotune-no-cudagraphs")``: Triton GEMM
                          templates, GeGLU fused into a GEMM
``liger``                 Liger-Kernel's ``LigerGEGLUMLP`` (package ``liger-kernel``)
``course-geglu``          the three projections, then the course's GeGLU kernel
``course-geglu-cat``      one GEMM on the concatenated gate/up weight, then the course's GeGLU
                          kernel on the two strided halves of its output (no copy)
``course-fused``          the course's gate+up GEMM with a GeGLU epilogue, then the down GEMM
========================  ===================================================================

:func:`build_variant` builds one from a ``SimpleGeGLUMLP`` (sharing or packing its weights, never
retraining), or raises :class:`VariantUnavailable` with the reason (a package not installed, a
kernel that cannot run on this device).

Each variant follows a *plan*: which kernels it launches and which tensors each one reads and
writes. :func:`plan_kernels` turns a plan into bytes and FLOPs per kernel (each kernel reads its
inputs from memory once and writes its outputs once: the traffic an ideal kernel of that plan
needs), and :func:`plan_floor_us` into the least time the plan can take on given ceilings.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pandas as pd
import torch
from torch import nn
from torch.nn import functional as F

from .kernel_names import decode_kernel
from .models import MLPShape
from .roofline import Ceilings, dtype_size, gemm_bytes, gemm_flops

__all__ = [
    "VARIANTS", "VARIANT_NAMES", "PLANS", "VariantSpec", "Variant", "VariantUnavailable",
    "CourseGeGLUMLP", "build_variant", "build_variants", "reference_forward", "relative_error",
    "plan_kernels", "plan_bytes", "plan_floor_us", "infer_plan", "kernel_role", "min_mlp_bytes",
    "check_triton_ready", "variant_table", "plans_frame", "check_names",
]


class VariantUnavailable(RuntimeError):
    """A variant cannot be built here (missing package, unsupported device or model)."""


# ---------------------------------------------------------------------------------------------
# the course's GeGLU kernel inside the MLP
# ---------------------------------------------------------------------------------------------

class CourseGeGLUMLP(nn.Module):
    """``SimpleGeGLUMLP``'s projections with the course's Triton GeGLU kernel for ``gelu * mul``.

    ``concat=False``: the gate and up projections stay two GEMMs (shared with `mlp`, not copied).
    ``concat=True``: one GEMM on the weight ``[Wg; Wu]`` (built once here) writes ``[..., 2*hidden]``;
    the kernel reads its two halves as strided views, so no copy is made between the kernels.
    """

    def __init__(self, mlp: nn.Module, concat: bool = False) -> None:
        super().__init__()
        _check_mlp(mlp)
        if mlp.gate_proj.bias is not None or mlp.up_proj.bias is not None:
            raise VariantUnavailable("CourseGeGLUMLP follows SimpleGeGLUMLP's default: bias-free projections")
        self.concat = concat
        self.hidden = mlp.gate_proj.out_features
        if concat:
            with torch.no_grad():
                weight = torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]).contiguous()
            self.gate_up_weight = nn.Parameter(weight, requires_grad=False)
        else:
            self.gate_proj, self.up_proj = mlp.gate_proj, mlp.up_proj
        self.down_proj = mlp.down_proj

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from .fused import geglu

        if self.concat:
            gate, up = F.linear(x, self.gate_up_weight).split(self.hidden, dim=-1)
        else:
            gate, up = self.gate_proj(x), self.up_proj(x)
        return self.down_proj(geglu(gate, up))

    def extra_repr(self) -> str:
        return f"hidden={self.hidden}, concat={self.concat}, geglu=helpers.fused.geglu (Triton)"


def _check_mlp(mlp: Any) -> None:
    for name in ("gate_proj", "up_proj", "down_proj"):
        if not isinstance(getattr(mlp, name, None), nn.Linear):
            raise TypeError(f"variants are built from a SimpleGeGLUMLP (nn.Linear gate_proj, up_proj, down_proj); "
                            f"{type(mlp).__name__} has no Linear {name!r}")


def check_triton_ready() -> None:
    """Raise a clear RuntimeError when Triton cannot run the course's kernels in this process.

    On a CPU the kernels run in Triton's interpreter, which ``helpers.fused`` switches on. Triton
    defines its own library functions (``tl.cdiv``, ``tl.sigmoid``, ...) when it is first imported,
    so if ``triton`` was imported *before* ``helpers.fused``, those are compiled-mode functions and
    every interpreted kernel that calls one fails with "Cannot call @triton.jit'd outside of the
    scope of a kernel".
    """
    from .fused import triton_mode

    if triton_mode() != "interpreter":
        return
    import triton.language.standard as std
    from triton.runtime.jit import JITFunction

    if type(std.cdiv) is JITFunction:  # the interpreter's functions are InterpretedFunction
        raise RuntimeError(
            "Triton was imported before helpers.fused switched on its CPU interpreter, so Triton's own "
            "functions (tl.cdiv, tl.sigmoid, ...) cannot run in interpreted kernels. Restart the Python "
            "kernel and import helpers.fused (or helpers.kernel_exercises) before importing triton.")


# ---------------------------------------------------------------------------------------------
# builders
# ---------------------------------------------------------------------------------------------

def _eager(mlp: nn.Module) -> Callable:
    return mlp


def _compile(mlp: nn.Module) -> Callable:
    # dynamic=False: one static graph per input shape, the best case for Inductor (the sweep over
    # M recompiles once per size instead of falling back to a dynamic-shape graph).
    return torch.compile(mlp, dynamic=False)


def _compile_max_autotune(mlp: nn.Module) -> Callable:
    return torch.compile(mlp, mode="max-autotune-no-cudagraphs", dynamic=False)


def _liger(mlp: nn.Module) -> Callable:
    try:
        from liger_kernel.transformers import LigerGEGLUMLP  # type: ignore[import-not-found]
    except Exception as err:  # noqa: BLE001 - any import failure means "not available here"
        raise VariantUnavailable(
            f"liger-kernel is not importable ({type(err).__name__}: {err}); install it with "
            "`pip install liger-kernel==0.8.5` (on a CUDA machine)") from None
    if any(getattr(mlp, n).bias is not None for n in ("gate_proj", "up_proj", "down_proj")):
        raise VariantUnavailable("LigerGEGLUMLP has bias-free projections; this MLP has biases")
    weight = mlp.gate_proj.weight
    config = SimpleNamespace(hidden_size=mlp.gate_proj.in_features, intermediate_size=mlp.gate_proj.out_features)
    model = LigerGEGLUMLP(config).to(device=weight.device, dtype=weight.dtype)
    model.load_state_dict(mlp.state_dict())  # same parameter names: gate_proj, up_proj, down_proj
    return model.eval()


def _course_geglu(mlp: nn.Module) -> Callable:
    return CourseGeGLUMLP(mlp, concat=False).eval()


def _course_geglu_cat(mlp: nn.Module) -> Callable:
    return CourseGeGLUMLP(mlp, concat=True).eval()


def _course_fused(mlp: nn.Module) -> Callable:
    from .fused import FusedGeGLUMLP

    return FusedGeGLUMLP.from_module(mlp).eval()


@dataclass(frozen=True)
class VariantSpec:
    """What a variant is: its key, a label for tables, its plan (None: read from its kernels)."""

    name: str
    label: str
    plan: str | None
    description: str
    build: Callable[[nn.Module], Callable]
    compiles: bool = False  # first call per input shape compiles (slow): the sweep may skip it


VARIANTS: dict[str, VariantSpec] = {s.name: s for s in (
    VariantSpec("eager", "eager PyTorch", "unfused",
                "SimpleGeGLUMLP as written: gate GEMM, up GEMM, GeLU, mul, down GEMM", _eager),
    VariantSpec("compile", "torch.compile (default)", "pointwise-fused",
                "torch.compile(mlp, dynamic=False): Inductor fuses GeLU and mul; GEMMs stay cuBLAS", _compile,
                compiles=True),
    VariantSpec("compile-max-autotune", "torch.compile max-autotune", None,
                "torch.compile(mlp, mode='max-autotune-no-cudagraphs', dynamic=False): Triton GEMM templates "
                "autotuned against cuBLAS, pointwise work fused into GEMMs where it pays", _compile_max_autotune,
                compiles=True),
    VariantSpec("liger", "Liger GEGLU MLP", "pointwise-fused",
                "liger_kernel.transformers.LigerGEGLUMLP: cuBLAS GEMMs and Liger's Triton GeGLU kernel", _liger),
    VariantSpec("course-geglu", "course GeGLU kernel", "pointwise-fused",
                "three cuBLAS GEMMs and the course's Triton GeGLU kernel (helpers.fused.geglu)", _course_geglu),
    VariantSpec("course-geglu-cat", "course GeGLU kernel, one gate/up GEMM", "concat-gemm",
                "one cuBLAS GEMM on [Wg; Wu], the course's GeGLU kernel on the two strided halves, down GEMM",
                _course_geglu_cat),
    VariantSpec("course-fused", "course fused gate+up GEMM", "gemm-epilogue",
                "helpers.fused.FusedGeGLUMLP: one Triton GEMM computes gate and up with the GeGLU in its "
                "epilogue, then the cuBLAS down GEMM", _course_fused),
)}
VARIANT_NAMES: tuple[str, ...] = tuple(VARIANTS)


@dataclass
class Variant:
    """A built variant: call ``variant.fn(x)``."""

    spec: VariantSpec
    fn: Callable[[torch.Tensor], torch.Tensor]
    build_s: float

    @property
    def name(self) -> str:
        return self.spec.name

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)


def build_variant(name: str, mlp: nn.Module) -> Variant:
    """Build variant `name` (a key of :data:`VARIANTS`) from `mlp`, on `mlp`'s device and dtype.

    Compiled variants compile lazily, on their first call. Raises :class:`VariantUnavailable` when
    the variant cannot be built here, ValueError for an unknown name.
    """
    if name not in VARIANTS:
        raise ValueError(f"unknown variant {name!r}; choose from {', '.join(VARIANT_NAMES)}")
    _check_mlp(mlp)
    spec = VARIANTS[name]
    start = time.perf_counter()
    fn = spec.build(mlp)
    return Variant(spec, fn, time.perf_counter() - start)


def build_variants(mlp: nn.Module, names: Iterable[str] = VARIANT_NAMES) -> tuple[dict[str, Variant], dict[str, str]]:
    """Build several variants; returns ``(built, unavailable)`` where `unavailable` maps name -> reason."""
    built: dict[str, Variant] = {}
    unavailable: dict[str, str] = {}
    for name in names:
        try:
            built[name] = build_variant(name, mlp)
        except VariantUnavailable as err:
            unavailable[name] = str(err)
    return built, unavailable


# ---------------------------------------------------------------------------------------------
# numerics
# ---------------------------------------------------------------------------------------------

def reference_forward(mlp: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The MLP computed in float32 from `mlp`'s weights (the numerics reference for every variant)."""
    _check_mlp(mlp)
    with torch.no_grad():
        xf = x.float()

        def lin(layer: nn.Linear, t: torch.Tensor) -> torch.Tensor:
            return F.linear(t, layer.weight.float(), None if layer.bias is None else layer.bias.float())

        h = F.gelu(lin(mlp.gate_proj, xf), approximate="tanh") * lin(mlp.up_proj, xf)
        return lin(mlp.down_proj, h)


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """``||out - ref|| / ||ref||`` in float64 (0.0 when both are zero)."""
    if out.shape != ref.shape:
        raise ValueError(f"shapes differ: output {tuple(out.shape)} vs reference {tuple(ref.shape)}")
    diff = (out.double() - ref.double()).norm().item()
    norm = ref.double().norm().item()
    return diff / norm if norm else diff


# ---------------------------------------------------------------------------------------------
# plans: kernels, bytes, FLOPs, floors
# ---------------------------------------------------------------------------------------------

PLANS: dict[str, str] = {
    "unfused": "gate GEMM, up GEMM, GeLU, mul, down GEMM: gate, up, gelu(gate) and h all go through memory",
    "pointwise-fused": "gate GEMM, up GEMM, one GeGLU kernel, down GEMM: gate and up go through memory",
    "concat-gemm": "one GEMM on [Wg; Wu] writes [M, 2*hidden], one GeGLU kernel reads its halves, down GEMM",
    "gemm-fused-geglu": ("GeGLU fused into one of the Inductor GEMM templates (prologue or epilogue): two "
                         "[M, hidden] tensors written and read once, no separate pointwise pass"),
    "gemm-epilogue": "one GEMM computes gate and up with the GeGLU in its epilogue, then the down GEMM: only h goes through memory",
}


def _shape_args(shape: MLPShape | None, m: int | None, dim: int | None, hidden: int | None) -> tuple[int, int, int]:
    if shape is not None:
        if not isinstance(shape, MLPShape):
            raise TypeError(f"shape must be a helpers.MLPShape, got {type(shape).__name__}")
        return shape.tokens, shape.dim, shape.hidden
    if m is None or dim is None or hidden is None:
        raise ValueError("give shape=MLPShape(...) or all of m, dim, hidden")
    return m, dim, hidden


def plan_kernels(plan: str, shape: MLPShape | None = None, dtype: torch.dtype | str = torch.bfloat16, *,
                 m: int | None = None, dim: int | None = None, hidden: int | None = None) -> pd.DataFrame:
    """The kernels of `plan` at a shape: ``kernel``, ``role`` (gemm / pointwise), ``bytes``, ``flops``.

    Bytes: what the kernel must read and write once (``gemm_bytes`` for a GEMM: A, B and C once;
    a pointwise kernel: its inputs and output). FLOPs: ``2*m*n*k`` per GEMM, 0 for pointwise work
    (a few per element, under 1% of the GEMMs). Give `shape` or ``m``, ``dim``, ``hidden``.
    """
    if plan not in PLANS:
        raise ValueError(f"unknown plan {plan!r}; plans are {', '.join(PLANS)}")
    M, D, H = _shape_args(shape, m, dim, hidden)
    s = dtype_size(dtype)
    act = M * H * s  # one [M, hidden] tensor
    gate = ("gate GEMM x @ Wg.T", "gemm", gemm_bytes(M, H, D, dtype), gemm_flops(M, H, D))
    up = ("up GEMM x @ Wu.T", "gemm", gemm_bytes(M, H, D, dtype), gemm_flops(M, H, D))
    down = ("down GEMM h @ Wd.T", "gemm", gemm_bytes(M, D, H, dtype), gemm_flops(M, D, H))
    geglu = ("GeGLU gelu(gate) * up", "pointwise", 3 * act, 0)
    rows: list[tuple[str, str, int, int]]
    if plan == "unfused":
        rows = [gate, up, ("GeLU gelu(gate)", "pointwise", 2 * act, 0), ("mul gelu(gate) * up", "pointwise", 3 * act, 0), down]
    elif plan == "pointwise-fused":
        rows = [gate, up, geglu, down]
    elif plan == "concat-gemm":
        rows = [("gate+up GEMM x @ [Wg; Wu].T", "gemm", gemm_bytes(M, 2 * H, D, dtype), gemm_flops(M, 2 * H, D)),
                geglu, down]
    elif plan == "gemm-fused-geglu":
        # Drawn as GeGLU in the down GEMM's prologue; an epilogue on the up GEMM moves the same bytes.
        rows = [gate, up, ("down GEMM with GeGLU prologue", "gemm", 2 * act + (H * D + M * D) * s, gemm_flops(M, D, H))]
    else:  # gemm-epilogue
        rows = [("gate+up GEMM with GeGLU epilogue", "gemm", (M * D + 2 * H * D) * s + act, gemm_flops(M, 2 * H, D)),
                down]
    return pd.DataFrame(rows, columns=["kernel", "role", "bytes", "flops"])


def plan_bytes(plan: str, shape: MLPShape | None = None, dtype: torch.dtype | str = torch.bfloat16, **dims: int) -> int:
    """Total bytes of `plan`'s kernels (see :func:`plan_kernels`)."""
    return int(plan_kernels(plan, shape, dtype, **dims)["bytes"].sum())


def plan_floor_us(plan: str, ceilings: Ceilings, shape: MLPShape | None = None,
                  dtype: torch.dtype | str = torch.bfloat16, **dims: int) -> float:
    """Least time `plan` can take: the sum over its kernels of max(bytes / bandwidth, FLOPs / peak).

    Kernels run one after another, so the floors add up; each kernel is bounded by whichever of
    memory and compute it saturates first.
    """
    if not isinstance(ceilings, Ceilings):
        raise TypeError(f"ceilings must be a helpers.roofline.Ceilings, got {type(ceilings).__name__}")
    k = plan_kernels(plan, shape, dtype, **dims)
    mem = k["bytes"] / ceilings.copy_bytes_per_s
    comp = k["flops"] / ceilings.matmul_flop_per_s
    return float(pd.concat([mem, comp], axis=1).max(axis=1).sum() * 1e6)


def min_mlp_bytes(shape: MLPShape | None = None, dtype: torch.dtype | str = torch.bfloat16, *,
                  m: int | None = None, dim: int | None = None, hidden: int | None = None) -> int:
    """Bytes no implementation can avoid: read x and the three weights once, write y once."""
    M, D, H = _shape_args(shape, m, dim, hidden)
    return (2 * M * D + 3 * H * D) * dtype_size(dtype)


@functools.lru_cache(maxsize=1)
def _course_kernel_names() -> dict[str, str]:
    """Kernel names of helpers.fused (their Python function names) -> role."""
    import importlib

    names: dict[str, str] = {}
    geglu_mod = importlib.import_module("helpers.fused.geglu")
    mlp_mod = importlib.import_module("helpers.fused.geglu_mlp")
    for obj, role in ((geglu_mod._geglu_kernel, "pointwise"), (geglu_mod._geglu_backward_kernel, "pointwise"),
                      (mlp_mod._gate_up_geglu_tma_kernel, "gemm"), (mlp_mod._gate_up_geglu_kernel, "gemm")):
        fn = getattr(obj, "fn", obj)
        names[fn.__name__] = role
    return names


def kernel_role(name: str) -> str:
    """``gemm``, ``pointwise``, ``memset``, ``copy`` or ``other`` for a kernel name.

    The course's own kernels are recognised by their function names; every other name goes
    through :func:`helpers.kernel_names.decode_kernel`.
    """
    course = _course_kernel_names()
    if name in course:
        return course[name]
    family = decode_kernel(name).get("family")
    if family == "gemm":
        return "gemm"
    if family in ("elementwise", "fused", "reduction"):
        return "pointwise"
    if family in ("memset", "copy"):
        return str(family)
    return "other"


def infer_plan(kernel_names: Iterable[str]) -> str | None:
    """The plan a set of kernels follows, read from their names (None when the names do not say).

    A GEMM whose name fuses ``gelu`` (an Inductor template) means ``gemm-fused-geglu``; one of the
    course's gate+up kernels means ``gemm-epilogue``; a pointwise kernel fusing gelu and mul means
    ``pointwise-fused``; separate gelu and mul kernels mean ``unfused``.
    """
    names = list(kernel_names)
    course = _course_kernel_names()
    decoded = [(n, decode_kernel(n)) for n in names]
    if any(course.get(n) == "gemm" for n in names):
        return "gemm-epilogue"
    if any(d.get("family") == "gemm" and "gelu" in (d.get("fused_ops") or []) for _, d in decoded):
        return "gemm-fused-geglu"
    if any(course.get(n) == "pointwise" for n in names):
        return "pointwise-fused"
    fused = [set(d.get("fused_ops") or []) for _, d in decoded if d.get("family") == "fused"]
    if any({"gelu", "mul"} <= ops for ops in fused):
        return "pointwise-fused"
    ops = {d.get("op") for _, d in decoded}
    if {"gelu", "mul"} <= ops:
        return "unfused"
    return None


def variant_table() -> pd.DataFrame:
    """The variants: name, label, plan, description (a table for the notebook)."""
    return pd.DataFrame([{"variant": s.name, "label": s.label, "plan": s.plan or "read from its kernels",
                          "description": s.description} for s in VARIANTS.values()])


def check_names(names: Iterable[str]) -> list[str]:
    """Validate variant names; returns them as a list (ValueError naming unknown ones)."""
    names = list(names)
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variants {unknown}; choose from {', '.join(VARIANT_NAMES)}")
    return names


def plans_frame(shape: MLPShape, dtype: torch.dtype | str, ceilings: Ceilings,
                plans: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One row per plan: kernels, bytes (MB), GFLOP, arithmetic intensity, floor (us)."""
    rows = []
    for plan in (plans or PLANS):
        k = plan_kernels(plan, shape, dtype)
        rows.append({"plan": plan, "kernels": len(k), "bytes_mb": k["bytes"].sum() / 1e6,
                     "gflop": k["flops"].sum() / 1e9,
                     "flop_per_byte": k["flops"].sum() / k["bytes"].sum(),
                     "floor_us": plan_floor_us(plan, ceilings, shape, dtype),
                     "what": PLANS[plan]})
    return pd.DataFrame(rows)
