"""The layer the course's local kernel repository exposes: a drop-in for Liger's ``LigerGEGLUMLP``.

``local_kernels/course-geglu`` is a kernel repository in the layout of the ``kernels`` library
(``build/<variant>/metadata.json`` and a Python package per variant). Its variants do not copy
any kernel code: each one re-exports :class:`CourseGeGLUMLP` from here, and that layer calls the
course's Triton GeGLU kernel in :mod:`helpers.fused` (compiled on a CUDA GPU, run by Triton's
interpreter on a CPU).

:class:`CourseGeGLUMLP` has the constructor and the parameters of Liger's ``LigerGEGLUMLP``
version 1: ``CourseGeGLUMLP(config)`` reads ``config.hidden_size`` and ``config.intermediate_size``
and holds bias-free ``gate_proj``, ``up_proj``, ``down_proj`` Linears, so a ``SimpleGeGLUMLP``'s
``state_dict`` loads into either one unchanged.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .fused import GeGLUFunction, triton_mode


def config_sizes(config: Any) -> tuple[int, int]:
    """``(hidden_size, intermediate_size)`` of a config object, checked.

    Accepts anything with those two attributes (a ``transformers`` config,
    :class:`helpers.hub_kernels.MLPConfig`, a ``SimpleNamespace``).
    """
    missing = [a for a in ("hidden_size", "intermediate_size") if not hasattr(config, a)]
    if missing:
        raise TypeError(
            f"config needs attributes hidden_size and intermediate_size (like a transformers config); "
            f"{type(config).__name__} lacks {missing}. Use helpers.hub_kernels.MLPConfig(hidden_size=..., "
            "intermediate_size=...)"
        )
    sizes = (config.hidden_size, config.intermediate_size)
    for name, value in zip(("hidden_size", "intermediate_size"), sizes):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"config.{name} must be a positive int, got {value!r}")
    return sizes


class CourseGeGLUMLP(nn.Module):
    """``down_proj(gelu_tanh(gate_proj(x)) * up_proj(x))`` with the course's Triton GeGLU kernel.

    Three GEMMs (cuBLAS on a GPU) and one Triton kernel for the GeLU and the product, the same
    structure as Liger's ``LigerGEGLUMLP``. Always the tanh GeLU, no biases (as Liger).
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        hidden, intermediate = config_sizes(config)
        self.config = config
        self.hidden_size = hidden
        self.intermediate_size = intermediate
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(GeGLUFunction.apply(self.gate_proj(x), self.up_proj(x)))

    def extra_repr(self) -> str:
        return (f"hidden_size={self.hidden_size}, intermediate_size={self.intermediate_size}, "
                f"geglu=course Triton kernel ({triton_mode()})")
