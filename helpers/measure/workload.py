"""A workload ready to profile or time (a callable, its inputs, what they are): one shape for every subject."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .device import resolve_device


@dataclass(frozen=True)
class Built:
    """A ready-to-profile workload: call ``fn(*inputs)``. ``shape`` is the subject's shape object, if any."""

    name: str
    fn: Callable
    inputs: tuple
    device: torch.device
    dtype: torch.dtype
    shape: Any
    details: dict[str, Any]


def workload_device(device: str | torch.device | None) -> torch.device:
    """The device a workload is built on: CUDA when present (None), with its index; a bare CPU otherwise."""
    dev = resolve_device(device)
    return torch.device(dev.type) if dev.type == "cpu" else dev


def default_dtype(device: torch.device) -> torch.dtype:
    """bf16 on a GPU (as in the blog), float32 on a CPU (fast and exact there)."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32
