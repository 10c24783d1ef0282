"""The workloads the course profiles, defined once for notebooks, tests and the recording script.

Each workload builds ``(fn, inputs)`` for a device. On a GPU it uses the blog's shapes in bf16;
on a CPU it uses smaller float32 shapes so a 2-core laptop profiles it in well under a second.
The reference traces in ``traces/`` were recorded from these same definitions
(``scripts/record_reference_traces.py``), so a live profile and its reference are comparable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn

from .models import BLOG_SHAPE, CPU_SHAPE, MLPShape, SimpleGeGLUMLP


@dataclass(frozen=True)
class Built:
    """A ready-to-profile workload: call ``fn(*inputs)``."""

    name: str
    fn: Callable
    inputs: tuple
    device: torch.device
    dtype: torch.dtype
    shape: MLPShape | None
    details: dict[str, Any]


def default_device() -> torch.device:
    """CUDA when available, else CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _resolve(device: str | torch.device | None) -> torch.device:
    if device is None:
        return default_device()
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"unknown device {device!r}: use 'cpu' or 'cuda'") from err
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for but no CUDA GPU is available here; use 'cpu'")
    return dev


def default_dtype(device: torch.device) -> torch.dtype:
    """bf16 on a GPU (as in the blog), float32 on a CPU (fast and exact there)."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def default_shape(device: torch.device) -> MLPShape:
    """The blog's shape on a GPU, the small CPU shape elsewhere."""
    return BLOG_SHAPE if device.type == "cuda" else CPU_SHAPE


def linear_layer(device=None, dtype=None, bias: bool = True, in_features: int = 32, out_features: int = 64,
                 rows: int = 1024, seed: int = 0) -> Built:
    """The blog's single ``nn.Linear(32, 64)`` on a [1024, 32] input."""
    dev = _resolve(device)
    dt = dtype or default_dtype(dev)
    torch.manual_seed(seed)
    layer = nn.Linear(in_features, out_features, bias=bias).to(dev, dt)
    x = torch.randn(rows, in_features, device=dev, dtype=dt)
    return Built("linear_bias" if bias else "linear_nobias", layer, (x,), dev, dt, None,
                 {"in_features": in_features, "out_features": out_features, "rows": rows, "bias": bias})


def matmul_then_add(device=None, dtype=None, in_features: int = 32, out_features: int = 64, rows: int = 1024,
                    seed: int = 0) -> Built:
    """``x @ W.T + b`` written by hand: the two-kernel version of a biased Linear."""
    lin = linear_layer(device, dtype, True, in_features, out_features, rows, seed)
    w, b = lin.fn.weight.detach(), lin.fn.bias.detach()

    def matmul_add(x: torch.Tensor) -> torch.Tensor:
        return x @ w.T + b

    return Built("matmul_add", matmul_add, lin.inputs, lin.device, lin.dtype, None, lin.details)


def geglu_mlp(device=None, dtype=None, shape: MLPShape | None = None, seed: int = 0) -> Built:
    """The blog's ``SimpleGeGLUMLP`` with input ``[batch, seq, dim]``."""
    dev = _resolve(device)
    dt = dtype or default_dtype(dev)
    shp = shape or default_shape(dev)
    torch.manual_seed(seed)
    model = SimpleGeGLUMLP(shp.dim, shp.hidden).to(dev, dt).eval()
    x = torch.randn(shp.batch, shp.seq, shp.dim, device=dev, dtype=dt)
    return Built("mlp_eager", model, (x,), dev, dt, shp,
                 {"batch": shp.batch, "seq": shp.seq, "dim": shp.dim, "hidden": shp.hidden})


def compiled(built: Built, mode: str | None = None, dynamic: bool | None = None, name: str | None = None) -> Built:
    """The same workload under ``torch.compile`` (compiles lazily on the first call)."""
    fn = torch.compile(built.fn, mode=mode, dynamic=dynamic)
    return Built(name or f"{built.name}_compiled", fn, built.inputs, built.device, built.dtype, built.shape,
                 {**built.details, "compile_mode": mode or "default", "dynamic": dynamic})
