"""The course's flash-attention forward in Triton, in the four layers of the course's kernels.

1. Kernels (``flash_attention_kernels.py``): ``_flash_attn_fwd_kernel`` (pointer loads, any GPU
   and the CPU interpreter) and ``_flash_attn_fwd_tma_kernel`` (Hopper: tensor descriptors); their
   tile configurations and the tuner in ``flash_attention_tuning.py``.
2. :func:`flash_attention` (here): the launcher. Checks its inputs, picks the path and the tile
   configuration, launches one program per (query block, batch x head).
3. :class:`FlashAttentionFunction`: an autograd Function. Forward: the Triton kernel. Backward:
   recomputed with PyTorch's own ``scaled_dot_product_attention`` (the course writes the forward
   only; the gradient is right, not fused).
4. :class:`CourseFlashAttention`: an ``nn.Module`` around the Function, a drop-in for
   ``F.scaled_dot_product_attention(q, k, v, is_causal=...)`` in an attention block.

Shapes: ``q`` is ``[batch, heads, seq_q, head_dim]``, ``k`` and ``v`` are
``[batch, kv_heads, seq_k, head_dim]`` with ``heads`` a multiple of ``kv_heads`` (grouped-query
attention; equal for ordinary multi-head attention). Any strides with a contiguous last dimension
(``x.view(b, s, h, d).transpose(1, 2)`` is read in place). Causal masking aligns the diagonal to
the bottom right (query ``i`` sees keys ``j <= i + seq_k - seq_q``): for ``seq_q == seq_k`` that is
``is_causal=True`` of PyTorch; for one new query against a KV cache it sees the whole cache.
"""

from __future__ import annotations

import math
import warnings

import torch
import torch.nn.functional as F
from torch import nn

from ..triton_env import check_device, triton_mode
from .flash_attention_kernels import LOG2E, _flash_attn_fwd_kernel, _flash_attn_fwd_tma_kernel
from .flash_attention_tuning import FlashConfig, candidates, capability_major, pick_config, seq_bucket

try:  # host-side TMA descriptors: triton >= 3.4 (the H200 image has 3.6)
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - older triton: the pointer path is used
    TensorDescriptor = None  # type: ignore[assignment,misc]

__all__ = ["flash_attention", "FlashAttentionFunction", "CourseFlashAttention", "attention_reference", "KERNELS"]

KERNELS = ("auto", "tma", "pointer")
# Paths that failed for every configuration in this process (by path, head dim, causal, dtype, device), and why.
path_failures: dict[tuple, str] = {}
SUPPORTED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
MAX_HEAD_DIM = 256


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _next_pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def attention_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True, scale: float | None = None
) -> torch.Tensor:
    """Attention computed the plain way in float64 on the CPU, with the kernel's conventions.

    Grouped K/V heads are repeated; causal masking is aligned to the bottom right (see the module
    docstring). Returns float64: compare with ``helpers.relative_error``.
    """
    qd, kd, vd = (t.detach().to("cpu", torch.float64) for t in (q, k, v))
    group = qd.shape[1] // kd.shape[1]
    if group > 1:
        kd, vd = kd.repeat_interleave(group, dim=1), vd.repeat_interleave(group, dim=1)
    scale = 1.0 / math.sqrt(qd.shape[-1]) if scale is None else scale
    scores = qd @ kd.transpose(-2, -1) * scale
    if causal:
        sq, sk = qd.shape[-2], kd.shape[-2]
        visible = torch.ones(sq, sk, dtype=torch.bool).tril(diagonal=sk - sq)
        scores = scores.masked_fill(~visible, float("-inf"))
    return scores.softmax(dim=-1) @ vd


def _check_inputs(q: object, k: object, v: object, causal: bool, scale: float | None) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    assert isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and isinstance(v, torch.Tensor)
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(
            f"q, k and v must be 4-D [batch, heads, seq, head_dim], got {tuple(q.shape)}, {tuple(k.shape)}, "
            f"{tuple(v.shape)}: split the heads first, e.g. x.view(b, s, h, d).transpose(1, 2)"
        )
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    b, h, sq, d = q.shape
    if k.shape[0] != b or k.shape[3] != d:
        raise ValueError(f"k must be [batch={b}, kv_heads, seq_k, head_dim={d}], got {tuple(k.shape)}")
    if k.shape[1] == 0 or h % k.shape[1]:
        raise ValueError(f"the {h} query heads must be a multiple of the {k.shape[1]} key/value heads (GQA)")
    if not 1 <= d <= MAX_HEAD_DIM:
        raise ValueError(f"head_dim must be from 1 to {MAX_HEAD_DIM}, got {d}")
    if q.dtype != k.dtype or q.dtype != v.dtype:
        raise ValueError(f"q, k and v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"dtype {q.dtype} is not supported; use one of {', '.join(map(str, SUPPORTED_DTYPES))}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.shape[-1] > 1 and t.stride(-1) != 1:
            raise ValueError(f"{name} must be contiguous in its last dimension (head_dim), got strides {t.stride()}")
    if causal and sq > k.shape[2]:
        raise ValueError(
            f"causal attention with more queries ({sq}) than keys ({k.shape[2]}) leaves the first queries "
            "without any key (the diagonal is aligned to the bottom right): pass causal=False or more keys"
        )
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0):
        raise ValueError(f"scale must be a positive number or None (1/sqrt(head_dim)), got {scale!r}")
    check_device(q, k, v, what="q, k and v")


def _tma_ok(*tensors: torch.Tensor) -> bool:
    """Can these be described for TMA: 16-byte aligned base and strides (the last one 1)?"""
    if TensorDescriptor is None:
        return False
    for t in tensors:
        if t.data_ptr() % 16 or any((s * t.element_size()) % 16 for s in t.stride()[:-1]) or t.stride(-1) != 1:
            return False
    return True


def _choose_path(kernel: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor) -> str:
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    aligned = _tma_ok(q, k, v, out)
    if kernel == "tma" and not aligned:
        raise ValueError(
            "kernel='tma' needs 16-byte aligned bases and strides (every stride a multiple of 16 bytes: "
            "8 bf16 elements): use kernel='auto' or 'pointer'"
        )
    if kernel != "auto":
        return kernel
    # fp32 is the exact path for checks: pointers; the interpreter runs the kernel the lesson reads.
    if not aligned or q.dtype == torch.float32 or triton_mode() == "interpreter":
        return "pointer"
    device_index = q.device.index if q.device.index is not None else torch.cuda.current_device()
    return "tma" if capability_major(device_index) >= 9 else "pointer"


def flash_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = True,
    scale: float | None = None,
    *,
    kernel: str = "auto",
    config: FlashConfig | None = None,
) -> torch.Tensor:
    """Attention ``softmax(q @ k.T * scale) @ v`` in one Triton kernel, never storing the score matrix.

    ``q``: ``[batch, heads, seq_q, head_dim]``; ``k``, ``v``: ``[batch, kv_heads, seq_k, head_dim]``;
    bf16, fp16 or fp32 (fp32 computes exactly, with IEEE dots). ``scale`` defaults to
    ``1/sqrt(head_dim)``. ``kernel``: ``"auto"`` (TMA on Hopper when aligned, else pointers),
    ``"tma"`` or ``"pointer"``; ``config``: a tile configuration to use instead of the tuned one.
    Returns a new contiguous ``[batch, heads, seq_q, head_dim]`` tensor in ``q``'s dtype.
    """
    _check_inputs(q, k, v, causal, scale)
    if config is not None and not isinstance(config, FlashConfig):
        raise TypeError(f"config must be a helpers FlashConfig or None, got {type(config).__name__}")
    b, h, sq, d = q.shape
    sk = k.shape[2]
    out = torch.empty((b, h, sq, d), dtype=q.dtype, device=q.device)
    if out.numel() == 0:
        return out
    if sk == 0:
        raise ValueError("k and v have no keys (seq_k = 0): attention over nothing is undefined")
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    path = _choose_path(kernel, q, k, v, out)
    try:
        _run(path, q, k, v, out, bool(causal), scale, config)
    except RuntimeError as err:
        if kernel != "auto" or path != "tma" or "no flash-attention configuration ran" not in str(err):
            raise
        # The Hopper path failed to compile or to compute right for every configuration: say so
        # once, and take the portable path (the failure is remembered, so this costs nothing later).
        group = _group("tma", q, causal)
        if group not in path_failures:
            path_failures[group] = str(err)
            warnings.warn(f"the TMA path of flash_attention failed here; using the pointer path. {err}", stacklevel=2)
        _run("pointer", q, k, v, out, bool(causal), scale, config)
    return out


def _group(path: str, q: torch.Tensor, causal: bool) -> tuple:
    return (path, q.shape[-1], bool(causal), q.dtype, q.device)


def _run(path, q, k, v, out, causal: bool, scale: float, config: FlashConfig | None) -> None:
    """Launch `path` on these tensors, with `config` or the tuned configuration for their sizes."""
    launch = _launcher(path, q, k, v, out, causal, scale * LOG2E)
    if config is None:
        sq, sk = q.shape[2], k.shape[2]
        key = (*_group(path, q, causal), seq_bucket(sq), seq_bucket(sk))
        check = _output_check(q, k, v, out, causal, scale)
        config = pick_config(key, candidates(sq, q.shape[-1], q.dtype), launch, check, group=_group(path, q, causal))
    launch(config)


def _output_check(q, k, v, out, causal: bool, scale: float):
    """For the tuner: a function that says why `out` is wrong (None when it agrees with PyTorch's SDPA)."""
    expected: list[torch.Tensor] = []

    def check() -> str | None:
        if not expected:  # computed once, on first use: only when the tuner runs
            expected.append(_sdpa_with_kernel_conventions(q, k, v, causal, scale).float())
        ref = expected[0]
        err = ((out.float() - ref).norm() / ref.norm().clamp_min(1e-30)).item()
        limit = 1e-4 if q.dtype == torch.float32 else 2e-2
        return None if err <= limit else f"relative error {err:.1e} against PyTorch's SDPA (limit {limit:.0e})"

    return check


def _launcher(path, q, k, v, out, causal, qk_scale):
    """A function that launches the chosen kernel on these tensors with a given configuration."""
    b, h, sq, d = q.shape
    kv_heads, sk = k.shape[1], k.shape[2]
    block_d = max(16, _next_pow2(d))
    precision = "ieee" if q.dtype == torch.float32 else "tf32"
    common = dict(CAUSAL=causal, DOT_PRECISION=precision)

    if path == "tma":

        def launch(cfg: FlashConfig) -> None:
            bm, bn = cfg.block_m, cfg.block_n
            descs = (
                TensorDescriptor.from_tensor(q, [1, 1, bm, block_d]),
                TensorDescriptor.from_tensor(k, [1, 1, bn, block_d]),
                TensorDescriptor.from_tensor(v, [1, 1, bn, block_d]),
                TensorDescriptor.from_tensor(out, [1, 1, bm, block_d]),
            )
            _flash_attn_fwd_tma_kernel[(_cdiv(sq, bm), b * h)](
                *descs, h, h // kv_heads, sq, sk, qk_scale, BLOCK_D=block_d, BLOCK_M=bm, BLOCK_N=bn,
                num_warps=cfg.num_warps, num_stages=cfg.num_stages, **common,
            )  # fmt: skip

        return launch

    def launch(cfg: FlashConfig) -> None:
        bm, bn = cfg.block_m, cfg.block_n
        _flash_attn_fwd_kernel[(_cdiv(sq, bm), b * h)](
            q, k, v, out, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *out.stride()[:3],
            h, h // kv_heads, sq, sk, qk_scale, HEAD_DIM=d, BLOCK_D=block_d, BLOCK_M=bm, BLOCK_N=bn,
            num_warps=cfg.num_warps, num_stages=cfg.num_stages, **common,
        )  # fmt: skip

    return launch


# ----------------------------------------------------------------------------------------------
# Autograd Function and module
# ----------------------------------------------------------------------------------------------


def _sdpa_with_kernel_conventions(q, k, v, causal: bool, scale: float | None) -> torch.Tensor:
    """PyTorch's SDPA computing what the kernel computes (bottom-right causal diagonal, GQA)."""
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    sq, sk = q.shape[2], k.shape[2]
    if causal and sq != sk:
        visible = torch.ones(sq, sk, dtype=torch.bool, device=q.device).tril(diagonal=sk - sq)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=visible, scale=scale)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)


class FlashAttentionFunction(torch.autograd.Function):
    """Differentiable :func:`flash_attention`: Triton forward, backward recomputed through PyTorch's SDPA."""

    @staticmethod
    def forward(ctx, q, k, v, causal: bool = True, scale: float | None = None):  # type: ignore[override]
        ctx.save_for_backward(q, k, v)
        ctx.causal, ctx.scale = causal, scale
        return flash_attention(q, k, v, causal, scale)

    @staticmethod
    def backward(ctx, grad_out):  # type: ignore[override]
        q, k, v = ctx.saved_tensors
        with torch.enable_grad():
            leaves = [t.detach().requires_grad_(True) for t in (q, k, v)]
            out = _sdpa_with_kernel_conventions(*leaves, ctx.causal, ctx.scale)
            grads = torch.autograd.grad(out, leaves, grad_out)
        return (*grads, None, None)


class CourseFlashAttention(nn.Module):
    """``CourseFlashAttention(causal=True)(q, k, v)``: the course's kernel as a layer (see :func:`flash_attention`)."""

    def __init__(self, causal: bool = True, scale: float | None = None) -> None:
        super().__init__()
        self.causal, self.scale = bool(causal), scale

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return FlashAttentionFunction.apply(q, k, v, self.causal, self.scale)

    def extra_repr(self) -> str:
        return f"causal={self.causal}, scale={self.scale}, kernel=course Triton flash attention ({triton_mode()})"
