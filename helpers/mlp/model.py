"""The models the course profiles, defined once: `SimpleGeGLUMLP` is the blog's MLP,
``down(gelu_tanh(x @ Wg.T) * (x @ Wu.T))`` with three bias-free linears."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from ..kernels.layout import projections


@dataclass(frozen=True)
class MLPShape:
    """The sizes of one MLP experiment (the blog's defaults)."""

    batch: int = 64
    seq: int = 128
    dim: int = 768
    hidden: int = 3072

    @property
    def tokens(self) -> int:
        """Rows of the activations after flattening batch and sequence (M of the GEMMs)."""
        return self.batch * self.seq


BLOG_SHAPE = MLPShape()
# Small enough that a 2-core laptop profiles an eager forward in milliseconds and compiles it in
# seconds, large enough that the GEMMs still dominate the pointwise work.
CPU_SHAPE = MLPShape(batch=4, seq=64, dim=256, hidden=1024)


class SimpleGeGLUMLP(nn.Module):
    """Gate/up/down MLP with a tanh GeLU gate, as in the blog post (bias-free by default)."""

    def __init__(self, dim: int, hidden: int, bias: bool = False) -> None:
        super().__init__()
        if not (isinstance(dim, int) and isinstance(hidden, int)) or dim <= 0 or hidden <= 0:
            raise ValueError(f"dim and hidden must be positive integers, got dim={dim!r}, hidden={hidden!r}")
        self.gate_proj = nn.Linear(dim, hidden, bias=bias)
        self.up_proj = nn.Linear(dim, hidden, bias=bias)
        self.down_proj = nn.Linear(hidden, dim, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


def geglu_reference(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """`gelu_tanh(gate) * up` computed in float32, returned in the inputs' dtype (the numerics reference)."""
    out = F.gelu(gate.float(), approximate="tanh") * up.float()
    return out.to(gate.dtype)


def reference_forward(mlp: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The MLP computed in float32 from `mlp`'s weights (the numerics reference for every variant)."""
    projections(mlp)
    with torch.no_grad():
        xf = x.float()

        def lin(layer: nn.Linear, t: torch.Tensor) -> torch.Tensor:
            return F.linear(t, layer.weight.float(), None if layer.bias is None else layer.bias.float())

        h = F.gelu(lin(mlp.gate_proj, xf), approximate="tanh") * lin(mlp.up_proj, xf)
        return lin(mlp.down_proj, h)


@dataclass(frozen=True)
class MLPConfig:
    """The two sizes a ``LigerGEGLUMLP(config)`` reads (a stand-in for a transformers config)."""

    hidden_size: int
    intermediate_size: int

    def __post_init__(self) -> None:
        for name in ("hidden_size", "intermediate_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")


def liger_style_layer(layer_class: type, mlp: nn.Module) -> nn.Module:
    """A Liger-style layer (``layer_class(config)``) holding the bias-free `mlp`'s weights, on its device, dtype
    and mode: the one way a hub or package layer becomes a drop-in."""
    gate, _, _ = projections(mlp)
    if any(getattr(mlp, n).bias is not None for n in ("gate_proj", "up_proj", "down_proj")):
        raise ValueError("the hand-tuned GeGLU MLP layers are bias-free; build SimpleGeGLUMLP(dim, hidden, bias=False)")
    new = layer_class(MLPConfig(gate.in_features, gate.out_features))
    new = new.to(device=gate.weight.device, dtype=gate.weight.dtype)
    new.load_state_dict(mlp.state_dict(), strict=True)  # same parameter names: gate_proj, up_proj, down_proj
    return new.train(mlp.training)
