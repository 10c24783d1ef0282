"""The training (forward + backward) variants the MLP benchmark measures, and its name check."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import nn

from helpers.kernels.modules import FusedGeGLUMLP, projections
from helpers.mlp.variants import VARIANT_NAMES, VARIANTS, build_variant

__all__ = ["TRAINING_VARIANTS", "TrainingSpec", "build_training", "check_names"]


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


def _inference_variant(name: str) -> Callable[[nn.Module], nn.Module]:
    return lambda mlp: build_variant(name, mlp).fn.train()


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
            _inference_variant("liger"),
        ),
        TrainingSpec(
            "course-geglu-cat",
            "course GeGLU kernel, one gate/up GEMM",
            "one cuBLAS GEMM on [Wg; Wu], the course's GeGLU kernel and its backward kernel, down GEMM",
            _inference_variant("course-geglu-cat"),
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

    Raises :class:`helpers.mlp.variants.VariantUnavailable` when it cannot be built here, ValueError
    for an unknown name.
    """
    if name not in TRAINING_VARIANTS:
        raise ValueError(f"unknown training variant {name!r}; choose from {', '.join(TRAINING_VARIANTS)}")
    projections(mlp)
    spec = TRAINING_VARIANTS[name]
    return spec, spec.build(mlp)


def check_names(names: Iterable[str]) -> list[str]:
    """Validate variant names; returns them as a list (ValueError naming unknown ones)."""
    names = list(names)
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variants {unknown}; choose from {', '.join(VARIANT_NAMES)}")
    return names
