"""The GeGLU MLP in seven implementations (eager, compiled, Liger, the course's kernels), defined once for
the benchmark and notebook 06; each computes ``SimpleGeGLUMLP`` with the same weights and follows a
plan (:mod:`helpers.mlp.plans`) that says which kernels it launches."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
import torch
from torch import nn

from ..kernels.modules import CourseGeGLUMLP, FusedGeGLUMLP, projections
from .model import liger_style_layer

__all__ = [
    "VARIANTS", "VARIANT_NAMES", "VariantSpec", "Variant", "VariantUnavailable", "build_variant", "variant_table"
]  # fmt: skip


class VariantUnavailable(RuntimeError):
    """A variant cannot be built here (missing package, unsupported device or model)."""


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
            "`pip install liger-kernel==0.8.5` (on a CUDA machine)"
        ) from None
    return _bias_free(lambda m: liger_style_layer(LigerGEGLUMLP, m), mlp)


def _course_geglu(mlp: nn.Module) -> Callable:
    return _bias_free(CourseGeGLUMLP.from_module, mlp)


def _course_geglu_cat(mlp: nn.Module) -> Callable:
    return _bias_free(lambda m: CourseGeGLUMLP.from_module(m, concat=True), mlp)


def _bias_free(build: Callable[[nn.Module], nn.Module], mlp: nn.Module) -> Callable:
    try:
        return build(mlp).eval()
    except ValueError as err:  # biases: the layer follows Liger's bias-free interface
        raise VariantUnavailable(str(err)) from None


def _course_fused(mlp: nn.Module) -> Callable:
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


VARIANTS: dict[str, VariantSpec] = {
    s.name: s
    for s in (
        VariantSpec(
            "eager",
            "eager PyTorch",
            "unfused",
            "SimpleGeGLUMLP as written: gate GEMM, up GEMM, GeLU, mul, down GEMM",
            _eager,
        ),
        VariantSpec(
            "compile",
            "torch.compile (default)",
            "pointwise-fused",
            "torch.compile(mlp, dynamic=False): Inductor fuses GeLU and mul; GEMMs stay cuBLAS",
            _compile,
            compiles=True,
        ),
        VariantSpec(
            "compile-max-autotune",
            "torch.compile max-autotune",
            None,
            "torch.compile(mlp, mode='max-autotune-no-cudagraphs', dynamic=False): Triton GEMM templates "
            "autotuned against cuBLAS, pointwise work fused into GEMMs where it pays",
            _compile_max_autotune,
            compiles=True,
        ),
        VariantSpec(
            "liger",
            "Liger GEGLU MLP",
            "pointwise-fused",
            "liger_kernel.transformers.LigerGEGLUMLP: cuBLAS GEMMs and Liger's Triton GeGLU kernel",
            _liger,
        ),
        VariantSpec(
            "course-geglu",
            "course GeGLU kernel",
            "pointwise-fused",
            "three cuBLAS GEMMs and the course's Triton GeGLU kernel (helpers.kernels.geglu)",
            _course_geglu,
        ),
        VariantSpec(
            "course-geglu-cat",
            "course GeGLU kernel, one gate/up GEMM",
            "concat-gemm",
            "one cuBLAS GEMM on [Wg; Wu], the course's GeGLU kernel on the two strided halves, down GEMM",
            _course_geglu_cat,
        ),
        VariantSpec(
            "course-fused",
            "course fused gate+up GEMM",
            "gemm-epilogue",
            "helpers.kernels.FusedGeGLUMLP: one Triton GEMM computes gate and up with the GeGLU in its "
            "epilogue, then the cuBLAS down GEMM",
            _course_fused,
        ),
    )
}
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
    """Build variant `name` from `mlp` on its device and dtype (compiled ones compile on first call);
    VariantUnavailable when it cannot be built here."""
    if name not in VARIANTS:
        raise ValueError(f"unknown variant {name!r}; choose from {', '.join(VARIANT_NAMES)}")
    projections(mlp)
    spec = VARIANTS[name]
    start = time.perf_counter()
    fn = spec.build(mlp)
    return Variant(spec, fn, time.perf_counter() - start)


def variant_table() -> pd.DataFrame:
    """The variants: name, label, plan, description (a table for the notebook)."""
    return pd.DataFrame(
        [
            {
                "variant": s.name,
                "label": s.label,
                "plan": s.plan or "read from its kernels",
                "description": s.description,
            }
            for s in VARIANTS.values()
        ]
    )
