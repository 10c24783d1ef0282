"""The models the course profiles, defined once.

`SimpleGeGLUMLP` is the MLP of the blog post "Profiling in PyTorch (Part 2)": three bias-free
linear layers (gate, up, down) and a tanh-approximated GeLU gate:

    down( gelu_tanh(x @ Wg.T) * (x @ Wu.T) )
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


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
