"""The layout every course kernel expects of a GeGLU MLP: three bias-free-or-not Linears, checked (no Triton here)."""

from __future__ import annotations

from torch import nn


def projections(mlp: nn.Module) -> tuple[nn.Linear, nn.Linear, nn.Linear]:
    """The gate, up and down Linears of a ``SimpleGeGLUMLP``-like module, checked for consistency."""
    layers = []
    for name in ("gate_proj", "up_proj", "down_proj"):
        layer = getattr(mlp, name, None)
        if not isinstance(layer, nn.Linear):
            raise TypeError(
                f"expected a GeGLU MLP with nn.Linear gate_proj, up_proj and down_proj "
                f"(like SimpleGeGLUMLP); {type(mlp).__name__} has no Linear {name!r}"
            )
        layers.append(layer)
    g, u, d = layers
    if g.weight.shape != u.weight.shape or d.in_features != g.out_features or d.out_features != g.in_features:
        raise ValueError(
            f"inconsistent projections: gate {tuple(g.weight.shape)}, up {tuple(u.weight.shape)}, "
            f"down {tuple(d.weight.shape)}"
        )
    return g, u, d
