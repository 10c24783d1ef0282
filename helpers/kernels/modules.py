"""The course's kernels as drop-in ``nn.Module`` layers, built from a trained ``SimpleGeGLUMLP`` with
``.from_module(mlp)``; :class:`CourseGeGLUMLP` has Liger's ``LigerGEGLUMLP`` constructor."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from ..triton_env import triton_mode
from .gate_up import gate_up_geglu, pack_gate_up
from .geglu_pointwise import GeGLUFunction
from .layout import projections
from .mlp_function import GeGLUMLPFunction, check_mode

__all__ = ["GeGLU", "CourseGeGLUMLP", "FusedGeGLUMLP", "config_sizes", "projections"]


class GeGLU(nn.Module):
    """``gelu_tanh(gate) * up`` as a module: ``GeGLU()(gate, up)``, or ``GeGLU()(x)`` split into two views of ``x``."""

    def forward(self, gate: torch.Tensor, up: torch.Tensor | None = None) -> torch.Tensor:
        if up is None:
            if not isinstance(gate, torch.Tensor):
                raise TypeError(f"input must be a torch.Tensor, got {type(gate).__name__}")
            if gate.dim() == 0 or gate.shape[-1] % 2:
                raise ValueError(
                    f"a single input must hold [gate | up] in an even last dimension, got shape {tuple(gate.shape)}"
                )
            gate, up = gate.chunk(2, dim=-1)
        return GeGLUFunction.apply(gate, up)


def config_sizes(config: Any) -> tuple[int, int]:
    """``(hidden_size, intermediate_size)`` of any config object with those attributes, checked."""
    missing = [a for a in ("hidden_size", "intermediate_size") if not hasattr(config, a)]
    if missing:
        raise TypeError(
            f"config needs attributes hidden_size and intermediate_size (like a transformers config); "
            f"{type(config).__name__} lacks {missing}. Use helpers.MLPConfig(hidden_size=..., intermediate_size=...)"
        )
    sizes = (config.hidden_size, config.intermediate_size)
    for name, value in zip(("hidden_size", "intermediate_size"), sizes):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"config.{name} must be a positive int, got {value!r}")
    return sizes


class CourseGeGLUMLP(nn.Module):
    """``down_proj(gelu_tanh(gate_proj(x)) * up_proj(x))`` with the course's Triton GeGLU, parameters named as
    Liger's; ``concat=True`` runs one GEMM on ``[Wg; Wu]`` whose halves the kernel reads as strided views."""

    def __init__(self, config: Any, concat: bool = False) -> None:
        super().__init__()
        hidden, intermediate = config_sizes(config)
        self.config = config
        self.hidden_size = hidden
        self.intermediate_size = intermediate
        self.concat = bool(concat)
        if self.concat:
            self.gate_up_proj = nn.Linear(hidden, 2 * intermediate, bias=False)
        else:
            self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
            self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    @classmethod
    def from_module(cls, mlp: nn.Module, concat: bool = False) -> CourseGeGLUMLP:
        """A ``CourseGeGLUMLP`` with the weights of `mlp` (a bias-free ``SimpleGeGLUMLP``), on its device and dtype."""
        g, u, d = projections(mlp)
        if any(layer.bias is not None for layer in (g, u, d)):
            raise ValueError(
                "CourseGeGLUMLP has bias-free projections, like Liger's LigerGEGLUMLP; this MLP has biases"
            )
        config = SimpleNamespace(hidden_size=g.in_features, intermediate_size=g.out_features)
        new = cls(config, concat=concat).to(device=g.weight.device, dtype=g.weight.dtype)
        with torch.no_grad():
            if concat:
                new.gate_up_proj.weight.copy_(torch.cat([g.weight, u.weight]))
            else:
                new.gate_proj.weight.copy_(g.weight)
                new.up_proj.weight.copy_(u.weight)
            new.down_proj.weight.copy_(d.weight)
        return new.train(mlp.training)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.concat:
            gate, up = self.gate_up_proj(x).split(self.intermediate_size, dim=-1)
        else:
            gate, up = self.gate_proj(x), self.up_proj(x)
        return self.down_proj(GeGLUFunction.apply(gate, up))

    def extra_repr(self) -> str:
        return (
            f"hidden_size={self.hidden_size}, intermediate_size={self.intermediate_size}, "
            f"concat={self.concat}, geglu=course Triton kernel ({triton_mode()})"
        )


class FusedGeGLUMLP(nn.Module):
    """The GeGLU MLP in two kernels, fused gate+up+GeGLU (Triton) then down_proj: ``FusedGeGLUMLP(config)`` or
    ``(dim, hidden, bias=...)``. ``mode`` says what training keeps; without gradients it skips autograd."""

    def __init__(
        self,
        config: Any = None,
        hidden: int | None = None,
        *,
        bias: bool = False,
        mode: str = "save",
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        if isinstance(config, int) and not isinstance(config, bool):
            dim = config
            if not isinstance(hidden, int) or isinstance(hidden, bool) or dim <= 0 or hidden <= 0:
                raise ValueError(f"dim and hidden must be positive integers, got dim={dim!r}, hidden={hidden!r}")
            config = SimpleNamespace(hidden_size=dim, intermediate_size=hidden)
        elif hidden is not None:
            raise TypeError("give FusedGeGLUMLP(config) or FusedGeGLUMLP(dim, hidden), not a config and a hidden size")
        dim, hidden = config_sizes(config)
        self.config = config
        self.mode = mode
        factory = {"device": device, "dtype": dtype}
        # Initialise like two nn.Linear(dim, hidden) and pack, so a fresh module matches the
        # statistics of the one it replaces.
        gate = nn.Linear(dim, hidden, bias=bias, **factory)
        up = nn.Linear(dim, hidden, bias=bias, **factory)
        self.gate_up_weight = nn.Parameter(pack_gate_up(gate.weight.detach(), up.weight.detach()))
        if bias:
            self.gate_up_bias = nn.Parameter(pack_gate_up(gate.bias.detach(), up.bias.detach()))
        else:
            self.register_parameter("gate_up_bias", None)
        self.down_proj = nn.Linear(hidden, dim, bias=bias, **factory)
        self.dim, self.hidden = dim, hidden

    @property
    def mode(self) -> str:
        """What training keeps for the backward: ``"save"`` or ``"recompute"`` (settable)."""
        return self._mode

    @mode.setter
    def mode(self, value: str) -> None:
        self._mode = check_mode(value)

    @classmethod
    def from_module(cls, mlp: nn.Module, mode: str = "save") -> FusedGeGLUMLP:
        """A ``FusedGeGLUMLP`` with the weights of ``mlp``, on its device and dtype."""
        g, u, d = projections(mlp)
        if (g.bias is None) != (u.bias is None):
            raise ValueError("gate_proj and up_proj must both have a bias or both have none")
        new = cls(
            g.in_features,
            g.out_features,
            bias=g.bias is not None,
            mode=mode,
            device=g.weight.device,
            dtype=g.weight.dtype,
        )
        with torch.no_grad():
            new.gate_up_weight.copy_(pack_gate_up(g.weight, u.weight))
            if g.bias is not None:
                new.gate_up_bias.copy_(pack_gate_up(g.bias, u.bias))
            if (d.bias is None) != (new.down_proj.bias is None):  # down's bias need not follow gate's
                new.down_proj = nn.Linear(
                    d.in_features, d.out_features, bias=d.bias is not None, device=d.weight.device, dtype=d.weight.dtype
                )
            new.down_proj.load_state_dict(d.state_dict())
        return new.train(mlp.training)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        down = self.down_proj
        if torch.is_grad_enabled() and (
            x.requires_grad or self.gate_up_weight.requires_grad or down.weight.requires_grad
        ):
            return GeGLUMLPFunction.apply(x, self.gate_up_weight, self.gate_up_bias, down.weight, down.bias, self._mode)
        # Inference: no autograd node, no saved tensors; the launcher's plan does the rest.
        return F.linear(gate_up_geglu(x, self.gate_up_weight, self.gate_up_bias), down.weight, down.bias)

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, hidden={self.hidden}, bias={self.gate_up_bias is not None}, mode={self._mode!r}, "
            "kernels=gate_up_geglu + cuBLAS down"
        )
