"""How the course checks numbers: relative error against a higher-precision reference."""

from __future__ import annotations

import torch


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """``||out - ref|| / ||ref||`` in float64 (0.0 when both are zero; inf for NaN in `out`): float32 lands far
    under 1e-3, tf32 near 3e-4, bf16 operands between 1e-3 and 1e-2."""
    if not isinstance(out, torch.Tensor) or not isinstance(ref, torch.Tensor):
        raise TypeError(f"relative_error compares two tensors, got {type(out).__name__} and {type(ref).__name__}")
    if out.shape != ref.shape:
        raise ValueError(f"shapes differ: output {tuple(out.shape)} vs reference {tuple(ref.shape)}")
    o, r = out.detach().double().cpu(), ref.detach().double().cpu()
    if not torch.isfinite(o).all():
        return float("inf")
    diff = (o - r).norm().item()
    norm = r.norm().item()
    return diff / norm if norm else diff
