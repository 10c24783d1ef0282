"""How the gate+up launchers choose, once per problem shape: path (TMA on Hopper, else pointer),
configurations best first, grid, and a first launch that falls back when a configuration cannot run here.
"""

from __future__ import annotations

import functools

import torch
import triton

from ..triton_env import portable_kernels, triton_mode
from . import gate_up_tuning as T
from .launch_plans import LaunchPlan, TensorDescriptor, remember

KERNELS = ("auto", "tma", "pointer")


@functools.cache
def num_sms(device_index: int) -> int:
    """Multiprocessors of a CUDA device (132 on an H200): persistent kernels start one program each."""
    return torch.cuda.get_device_properties(device_index).multi_processor_count


@functools.cache
def capability(device_index: int) -> tuple[int, int]:
    """Compute capability of a CUDA device, e.g. (9, 0) for Hopper."""
    return torch.cuda.get_device_capability(device_index)


def device_index(t: torch.Tensor) -> int:
    """The CUDA device index of a tensor (the current device for a bare ``cuda``)."""
    return t.device.index if t.device.index is not None else torch.cuda.current_device()


def tma_aligned(t: torch.Tensor) -> bool:
    """Can this row-major 2-D tensor be described for TMA (16-byte base and row stride)?"""
    return t.stride(-1) == 1 and t.data_ptr() % 16 == 0 and (t.stride(0) * t.element_size()) % 16 == 0


def padded_cols(cols: int, itemsize: int) -> int:
    """``cols`` rounded up so that a row is a multiple of 16 bytes (a TMA-describable row stride)."""
    per = 16 // itemsize
    return -(-cols // per) * per


def choose_path(kernel: str, inputs: tuple[torch.Tensor, ...], device_tensor: torch.Tensor) -> str:
    """``"tma"`` or ``"pointer"`` for these input tensors (outputs are allocated TMA-ready)."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    aligned = TensorDescriptor is not None and all(tma_aligned(t) for t in inputs)
    if kernel == "tma" and not aligned:
        raise ValueError(
            "kernel='tma' needs 16-byte aligned bases and row strides (dim a multiple of 8 for bf16/fp16, "
            "of 4 for fp32): use kernel='auto' or 'pointer'"
        )
    if kernel != "auto":
        return kernel
    if not aligned or portable_kernels():
        return "pointer"
    if triton_mode() == "interpreter":
        return "tma"
    # Tensor-memory-accelerator loads exist from Hopper (compute capability 9.0) on.
    return "tma" if capability(device_index(device_tensor))[0] >= 9 else "pointer"


def configs_for(
    kind: str, path: str, m: int, n: int, k: int, dtype: torch.dtype, device: torch.device, config: triton.Config | None
) -> tuple[list[triton.Config], str]:
    """The configurations to try, best first, and where the first came from."""
    if config is not None:
        return [config], "caller"
    if triton_mode() == "interpreter":
        return [T.INTERPRETER_CONFIG], "interpreter"
    if dtype == torch.float32:
        return [T.FP32_CONFIG], "fp32 (IEEE dots)"
    index = device.index if device.index is not None else torch.cuda.current_device()
    sms = num_sms(index)
    if path == "tma":
        major, minor = capability(index)
        hit = T.table_config(kind, m, n, k, dtype, f"{major}.{minor}")
        if hit is not None:
            return T.fallback_chain(kind, path, m, n, sms, hit[0]), "table"
    return T.fallback_chain(kind, path, m, n, sms, T.default_config(kind, path, m, n, sms)), "default"


def programs(path: str, tiles: int, device: torch.device) -> int:
    """Grid size: one program per tile (pointer path), or at most one per SM (persistent TMA path)."""
    if path == "pointer":
        return tiles
    if triton_mode() == "interpreter":
        return min(tiles, T.INTERPRETER_PROGRAMS)
    index = device.index if device.index is not None else torch.cuda.current_device()
    return min(tiles, num_sms(index))  # persistent: one program per SM at most


def launch_first(
    build, configs: list[triton.Config], source: str, key: tuple, tensors: tuple[torch.Tensor, ...]
) -> LaunchPlan:
    """Build and launch the first plan that runs here (a configuration may not compile or fit); remember it
    under `key`. Never during a CUDA graph capture: the first call per shape must come before it."""
    if triton_mode() == "cuda" and torch.cuda.is_current_stream_capturing():
        raise RuntimeError(
            "a course kernel met a new problem shape during a CUDA graph capture: its first call per shape "
            "compiles and loads the kernel, which cannot be captured. Call it once with this shape, then capture."
        )
    first_error: Exception | None = None
    for i, cfg in enumerate(configs):
        plan = build(cfg, source if i == 0 else f"fallback after {source}")
        try:
            plan.launch(*tensors)
        except Exception as err:  # noqa: BLE001 - try the next configuration, then re-raise the first error
            if i == len(configs) - 1 or triton_mode() == "interpreter":
                raise (first_error or err) from None
            first_error = first_error or err
            continue
        return remember(key, plan)
    raise AssertionError("unreachable: configs is never empty")
