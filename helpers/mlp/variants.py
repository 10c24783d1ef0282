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

Each variant follows a *plan* (:mod:`helpers.mlp.plans`): which kernels it launches and which
tensors each one reads and writes.

Training (forward + backward) has its own list, :data:`TRAINING_VARIANTS`: eager, torch.compile,
Liger (its ``LigerGEGLUMLP`` has a Triton backward), the course's GeGLU kernel after one
concatenated GEMM, and the course's fused MLP in its two modes, ``save`` and ``recompute``
(:mod:`helpers.kernels.mlp_function`). :func:`build_training` builds one, in train mode, on its own
copy of the weights.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pandas as pd
import torch
from torch import nn

from ..kernels.modules import CourseGeGLUMLP, FusedGeGLUMLP, projections
from .model import liger_style_layer

__all__ = [
    "TRAINING_VARIANTS",
    "TrainingSpec",
    "build_training",
    "VARIANTS",
    "VARIANT_NAMES",
    "VariantSpec",
    "Variant",
    "VariantUnavailable",
    "build_variant",
    "build_variants",
    "variant_table",
    "check_names",
]


class VariantUnavailable(RuntimeError):
    """A variant cannot be built here (missing package, unsupported device or model)."""


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
    """Build variant `name` (a key of :data:`VARIANTS`) from `mlp`, on `mlp`'s device and dtype.

    Compiled variants compile lazily, on their first call. Raises :class:`VariantUnavailable` when
    the variant cannot be built here, ValueError for an unknown name.
    """
    if name not in VARIANTS:
        raise ValueError(f"unknown variant {name!r}; choose from {', '.join(VARIANT_NAMES)}")
    projections(mlp)
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


def check_names(names: Iterable[str]) -> list[str]:
    """Validate variant names; returns them as a list (ValueError naming unknown ones)."""
    names = list(names)
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variants {unknown}; choose from {', '.join(VARIANT_NAMES)}")
    return names


# ---------------------------------------------------------------------------------------------
# training
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainingSpec:
    """A training variant: its key, a label, what it is, and how to build it (train mode)."""

    name: str
    label: str
    description: str
    build: Callable[[nn.Module], nn.Module]
    compiles: bool = False


def _train_copy(mlp: nn.Module) -> nn.Module:
    return copy.deepcopy(mlp).train()


def _fused(mode: str) -> Callable[[nn.Module], nn.Module]:
    return lambda mlp: FusedGeGLUMLP.from_module(mlp, mode=mode).train()


TRAINING_VARIANTS: dict[str, TrainingSpec] = {
    s.name: s
    for s in (
        TrainingSpec("eager", "eager PyTorch", "SimpleGeGLUMLP as written; autograd's own backward", _train_copy),
        TrainingSpec(
            "compile",
            "torch.compile (default)",
            "torch.compile(mlp, dynamic=False): forward and backward graphs from AOTAutograd, Inductor kernels",
            lambda mlp: torch.compile(_train_copy(mlp), dynamic=False),
            compiles=True,
        ),
        TrainingSpec(
            "liger",
            "Liger GEGLU MLP",
            "liger_kernel.transformers.LigerGEGLUMLP: cuBLAS GEMMs, Liger's Triton GeGLU forward and backward",
            lambda mlp: _liger(mlp).train(),
        ),
        TrainingSpec(
            "course-geglu-cat",
            "course GeGLU kernel, one gate/up GEMM",
            "one cuBLAS GEMM on [Wg; Wu], the course's GeGLU kernel and its backward kernel, down GEMM",
            lambda mlp: _course_geglu_cat(mlp).train(),
        ),
        TrainingSpec(
            "course-fused-save",
            "course fused MLP, mode='save'",
            "FusedGeGLUMLP(mode='save'): the forward also stores gate/up; the backward's dh GEMM applies the "
            "GeGLU backward in its epilogue, in place",
            _fused("save"),
        ),
        TrainingSpec(
            "course-fused-recompute",
            "course fused MLP, mode='recompute'",
            "FusedGeGLUMLP(mode='recompute'): keeps only x; the backward recomputes gate/up with one cuBLAS GEMM",
            _fused("recompute"),
        ),
    )
}


def build_training(name: str, mlp: nn.Module) -> tuple[TrainingSpec, nn.Module]:
    """Training variant `name` built from `mlp` (its own copy of the weights, train mode).

    Raises :class:`VariantUnavailable` when it cannot be built here, ValueError for an unknown name.
    """
    if name not in TRAINING_VARIANTS:
        raise ValueError(f"unknown training variant {name!r}; choose from {', '.join(TRAINING_VARIANTS)}")
    projections(mlp)
    spec = TRAINING_VARIANTS[name]
    return spec, spec.build(mlp)
