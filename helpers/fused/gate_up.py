"""Gate+up GEMM with a GeGLU epilogue in Triton, and the two-kernel MLP built on it.

The eager MLP runs ``gate = x @ Wg.T`` and ``up = x @ Wu.T`` as two GEMMs, writes both
``[M, hidden]`` products to memory, then reads them back for ``gelu_tanh(gate) * up``. Here one
kernel computes both products tile by tile and applies the GeGLU in its epilogue, so only
``h = gelu_tanh(gate) * up`` reaches memory; ``down_proj`` stays a cuBLAS GEMM (``F.linear``).

Layers, as in ``geglu_pointwise.py``:

1. Kernels (``gate_up_kernels.py``): ``_gate_up_geglu_tma_kernel`` (Hopper path: tensor
   descriptors (TMA), persistent programs, loops flattened so the next tile's loads overlap this
   tile's epilogue) and ``_gate_up_geglu_kernel`` (portable pointer path: any CUDA GPU, unaligned
   shapes); their tile configurations and autotuning in ``gate_up_tuning.py``.
2. ``gate_up_geglu(x, w_packed, b_packed=None)`` (here): the launcher (checks, path choice, tuned config).
3. ``GateUpGeGLUFunction``: autograd Function (Triton forward; backward with cuBLAS GEMMs and
   the pointwise backward kernel of ``geglu_pointwise.py``).
4. ``FusedGeGLUMLP`` (in ``modules.py``): the module, ``FusedGeGLUMLP.from_module(SimpleGeGLUMLP)``.

The weight layout that makes one accumulator enough: ``pack_gate_up`` interleaves the rows of the
two weights, row ``2j`` = gate row ``j`` and row ``2j+1`` = up row ``j``. A tile of ``BLOCK_N``
columns of ``x @ W_packed.T`` then holds ``BLOCK_N/2`` gate columns and the matching up columns
side by side, and the epilogue separates them with ``tl.reshape(acc, [BM, BN/2, 2])`` +
``tl.split``. In the wgmma accumulator layout each thread owns pairs of adjacent columns, so this
split needs no layout conversion (the compiled TTGIR has no ``convert_layout`` there). The packing is done
once, when the module is built, never per call.

Measured on an H200 (torch 2.11, triton 3.6, M=8192, dim 768, hidden 3072, bf16, profiler
kernel time, one run of benchmarks/geglu_kernels.py): the fused gate+up kernel 120.6 us (641
TFLOP/s) against 108.7 us for cuBLAS on the concatenated weight *without* the GeGLU; the whole
forward 172.2 us of kernels against 200.9 us for torch.compile (0.86x) and 231.8 us eager.
"""

from __future__ import annotations

import torch
import triton
from torch.nn import functional as F

from ..triton_env import check_device, triton_mode
from .gate_up_kernels import _gate_up_geglu_kernel, _gate_up_geglu_tma_kernel
from .gate_up_tuning import (
    _TUNED,
    FP32_CONFIG,
    INTERPRETER_CONFIG,
    INTERPRETER_PROGRAMS,
    _capability_major,
    _cdiv,
    _device_index,
    _num_sms,
    _pointer_autotuned,
    _tma_autotuned,
)
from .geglu_pointwise import SUPPORTED_DTYPES, geglu_backward

try:  # host-side TMA descriptors: triton >= 3.4 (the H200 image has 3.6)
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - older triton: the pointer path is used
    TensorDescriptor = None  # type: ignore[assignment,misc]

__all__ = [
    "pack_gate_up",
    "unpack_gate_up",
    "gate_up_geglu",
    "GateUpGeGLUFunction",
]

KERNELS = ("auto", "tma", "pointer")


# ----------------------------------------------------------------------------------------------
# Launcher
# ----------------------------------------------------------------------------------------------


def pack_gate_up(gate: torch.Tensor, up: torch.Tensor, group: int = 1) -> torch.Tensor:
    """Interleave two ``[H, ...]`` tensors in blocks of ``group`` rows: ``group`` rows of gate, then
    ``group`` rows of up, and so on. ``group=1`` (the default): row 2j = gate[j], row 2j+1 = up[j].

    Works for the weights (``[H, dim]`` -> ``[2H, dim]``) and the biases (``[H]`` -> ``[2H]``).
    """
    if gate.shape != up.shape:
        raise ValueError(
            f"gate and up must have the same shape to be packed, got {tuple(gate.shape)} and {tuple(up.shape)}"
        )
    H = gate.shape[0]
    if group < 1 or H % group:
        raise ValueError(f"group must be a positive divisor of the {H} rows, got {group}")
    rest = gate.shape[1:]
    blocks = torch.stack((gate.reshape(H // group, group, *rest), up.reshape(H // group, group, *rest)), dim=1)
    return blocks.reshape(2 * H, *rest).contiguous()


def unpack_gate_up(packed: torch.Tensor, group: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Inverse of :func:`pack_gate_up`: ``(gate, up)``."""
    if packed.shape[0] % (2 * group):
        raise ValueError(f"packed rows ({packed.shape[0]}) must be a multiple of 2 * group ({2 * group})")
    rest = packed.shape[1:]
    blocks = packed.reshape(-1, 2, group, *rest)
    return blocks[:, 0].reshape(-1, *rest), blocks[:, 1].reshape(-1, *rest)


def _tma_ok(*tensors: torch.Tensor) -> bool:
    """Can these 2-D row-major tensors be described for TMA (16-byte base and row strides)?"""
    if TensorDescriptor is None:
        return False
    for t in tensors:
        if t.stride(-1) != 1 or t.data_ptr() % 16 or (t.stride(0) * t.element_size()) % 16:
            return False
    return True


def _choose_kernel(kernel: str, x2: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> str:
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    aligned = _tma_ok(x2, w, out)
    if kernel == "tma" and not aligned:
        raise ValueError(
            "kernel='tma' needs 16-byte aligned bases and row strides (dim and hidden multiples of "
            "8 for bf16/fp16, of 4 for fp32): use kernel='auto' or 'pointer'"
        )
    if kernel != "auto":
        return kernel
    if not aligned:
        return "pointer"
    if triton_mode() == "interpreter":
        return "tma"
    # Tensor-memory-accelerator loads exist from Hopper (compute capability 9.0) on.
    return "tma" if _capability_major(_device_index(x2)) >= 9 else "pointer"


def _check_gate_up_args(x: object, w_packed: object, b_packed: object) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if not isinstance(w_packed, torch.Tensor):
        raise TypeError(f"w_packed must be a torch.Tensor, got {type(w_packed).__name__}")
    if b_packed is not None and not isinstance(b_packed, torch.Tensor):
        raise TypeError(f"b_packed must be a torch.Tensor or None, got {type(b_packed).__name__}")
    assert isinstance(x, torch.Tensor) and isinstance(w_packed, torch.Tensor)
    if w_packed.dim() != 2 or w_packed.shape[0] % 2:
        raise ValueError(f"w_packed must be 2-D [2*hidden, dim] (see pack_gate_up), got shape {tuple(w_packed.shape)}")
    if w_packed.shape[1] == 0:
        raise ValueError("w_packed has dim 0: the projections need at least one input feature")
    if x.dim() == 0 or x.shape[-1] != w_packed.shape[1]:
        raise ValueError(
            f"x's last dimension must equal w_packed's dim ({w_packed.shape[1]}), got x of shape {tuple(x.shape)}"
        )
    if x.dtype != w_packed.dtype:
        raise ValueError(
            f"x and w_packed must have the same dtype, got {x.dtype} and {w_packed.dtype}: cast with .to(dtype)"
        )
    if x.dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"dtype {x.dtype} is not supported; use one of {', '.join(map(str, SUPPORTED_DTYPES))}")
    tensors = [x, w_packed]
    if b_packed is not None:
        if b_packed.shape != (w_packed.shape[0],):
            raise ValueError(f"b_packed must have shape ({w_packed.shape[0]},), got {tuple(b_packed.shape)}")
        tensors.append(b_packed)
    check_device(*tensors, what="x, w_packed" + (" and b_packed" if b_packed is not None else ""))


def gate_up_geglu(
    x: torch.Tensor,
    w_packed: torch.Tensor,
    b_packed: torch.Tensor | None = None,
    *,
    kernel: str = "auto",
    config: triton.Config | None = None,
) -> torch.Tensor:
    """``gelu_tanh(x @ Wg.T + bg) * (x @ Wu.T + bu)`` in one Triton kernel, from the packed weight.

    ``x``: ``[..., dim]``; ``w_packed``: ``[2*hidden, dim]`` from :func:`pack_gate_up`;
    ``b_packed``: ``[2*hidden]`` or None. Returns ``[..., hidden]`` in ``x``'s dtype.
    ``kernel``: ``"auto"`` (TMA on Hopper when aligned, else pointers), ``"tma"`` or ``"pointer"``.
    ``config``: a ``triton.Config`` to use instead of autotuning (benchmarks and sweeps).
    fp32 inputs use IEEE fp32 dots (not tf32), so fp32 results match a float reference closely.
    """
    _check_gate_up_args(x, w_packed, b_packed)
    K = x.shape[-1]
    x2 = x if x.dim() == 2 else x.reshape(-1, K)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    w = w_packed if w_packed.stride(-1) == 1 else w_packed.contiguous()
    M, N2 = x2.shape[0], w.shape[0]
    H = N2 // 2
    out = torch.empty((M, H), dtype=x.dtype, device=x.device)
    if M == 0 or H == 0:
        return out.reshape(*x.shape[:-1], H)
    bias = b_packed if b_packed is not None else w  # any pointer; never read when HAS_BIAS=False
    path = _choose_kernel(kernel, x2, w, out)
    precision = "ieee" if x.dtype == torch.float32 else "tf32"
    interp = triton_mode() == "interpreter"
    if config is None and interp:
        config = INTERPRETER_CONFIG
    elif config is None and x.dtype == torch.float32:
        config = FP32_CONFIG
    tune_key = (path, M, N2, K, x.dtype, b_packed is not None, x.device)
    launch = _launch_tma if path == "tma" else _launch_pointer
    launch(x2, w, bias, out, b_packed is not None, precision, config, tune_key)
    return out if x.dim() == 2 else out.reshape(*x.shape[:-1], H)


def _launch_tma(x2, w, bias, out, has_bias, precision, config, tune_key) -> None:
    M, K = x2.shape
    N2 = w.shape[0]
    if config is None:
        config = _TUNED.get(tune_key)
    if config is not None:
        bm, bn, bk = config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"], config.kwargs["BLOCK_K"]
    else:
        bm, bn, bk = 128, 256, 64  # placeholders: the autotune pre-hook sets the real ones
    x_desc = TensorDescriptor.from_tensor(x2, [bm, bk])
    w_desc = TensorDescriptor.from_tensor(w, [bn, bk])
    out_desc = TensorDescriptor.from_tensor(out, [bm, bn // 2])
    max_programs = INTERPRETER_PROGRAMS if triton_mode() == "interpreter" else _num_sms(_device_index(x2))

    def grid(meta: dict) -> tuple[int]:
        # Persistent: one program per SM (never more than there are tiles).
        return (min(_cdiv(M, meta["BLOCK_M"]) * _cdiv(N2, meta["BLOCK_N"]), max_programs),)

    if config is None:
        _tma_autotuned[grid](x_desc, w_desc, out_desc, bias, M, N2, K, HAS_BIAS=has_bias, DOT_PRECISION=precision)
        _TUNED[tune_key] = _tma_autotuned.best_config
        return
    kw = {"FLATTEN": True, **config.kwargs}
    _gate_up_geglu_tma_kernel[grid(kw)](
        x_desc,
        w_desc,
        out_desc,
        bias,
        M,
        N2,
        K,
        HAS_BIAS=has_bias,
        DOT_PRECISION=precision,
        num_warps=config.num_warps,
        num_stages=config.num_stages,
        **kw,
    )


def _launch_pointer(x2, w, bias, out, has_bias, precision, config, tune_key) -> None:
    M, K = x2.shape
    N2 = w.shape[0]

    def grid(meta: dict) -> tuple[int]:
        return (_cdiv(M, meta["BLOCK_M"]) * _cdiv(N2, meta["BLOCK_N"]),)

    args = (x2, w, bias, out, M, N2, K, x2.stride(0), w.stride(0), out.stride(0))
    if config is None:
        config = _TUNED.get(tune_key)
    if config is None:
        # EVEN_K must hold for every config tried: all POINTER_CONFIGS' BLOCK_K divide 64.
        _pointer_autotuned[grid](*args, HAS_BIAS=has_bias, EVEN_K=K % 64 == 0, DOT_PRECISION=precision)
        _TUNED[tune_key] = _pointer_autotuned.best_config
        return
    # Options that only the persistent TMA kernel has are dropped, so one config serves both paths.
    kw = {k: v for k, v in config.kwargs.items() if k not in ("FLATTEN", "WARP_SPECIALIZE")}
    _gate_up_geglu_kernel[grid(kw)](
        *args,
        HAS_BIAS=has_bias,
        EVEN_K=K % kw["BLOCK_K"] == 0,
        DOT_PRECISION=precision,
        num_warps=config.num_warps,
        num_stages=config.num_stages,
        **kw,
    )


# ----------------------------------------------------------------------------------------------
# Autograd Function
# ----------------------------------------------------------------------------------------------


class GateUpGeGLUFunction(torch.autograd.Function):
    """Differentiable :func:`gate_up_geglu`.

    Forward: the fused Triton kernel. Backward: recompute the two products with one cuBLAS GEMM
    (nothing [M, hidden] was saved), the pointwise backward kernel of ``geglu_pointwise.py``, then the
    usual GEMMs for the input and weight gradients.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, w_packed: torch.Tensor, b_packed: torch.Tensor | None) -> torch.Tensor:  # type: ignore[override]
        ctx.save_for_backward(x, w_packed, b_packed)
        return gate_up_geglu(x, w_packed, b_packed)

    @staticmethod
    def backward(ctx, dh: torch.Tensor):  # type: ignore[override]
        x, w, b = ctx.saved_tensors
        x2 = x.reshape(-1, x.shape[-1])
        gu = F.linear(x2, w, b)  # [M, 2H], columns interleaved (gate, up)
        dgate, dup = geglu_backward(dh.reshape(-1, dh.shape[-1]), gu[:, 0::2].contiguous(), gu[:, 1::2].contiguous())
        dgu = torch.stack((dgate, dup), dim=2).reshape(gu.shape)
        dx = (dgu @ w).reshape(x.shape) if ctx.needs_input_grad[0] else None
        dw = dgu.t() @ x2 if ctx.needs_input_grad[1] else None
        db = dgu.sum(0) if b is not None and ctx.needs_input_grad[2] else None
        return dx, dw, db
