"""The course's flash-attention forward: launcher, autograd Function (backward through SDPA) and layer.
Causal masking aligns the diagonal bottom right: query ``i`` sees keys ``j <= i + seq_k - seq_q``."""

from __future__ import annotations

import math
import warnings

import torch
import torch.nn.functional as F
import triton
from torch import nn

from ..triton_env import check_device, triton_mode
from .flash_attention_configs import FlashConfig, capability_major, configs_to_try, pick_config, seq_bucket
from .flash_attention_kernels import LOG2E, _flash_attn_fwd_kernel, _flash_attn_fwd_tma_kernel

try:  # host-side TMA descriptors: triton >= 3.4
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - older triton: the pointer path is used
    TensorDescriptor = None  # type: ignore[assignment,misc]

KERNELS = ("auto", "tma", "pointer")
# Paths that failed for every configuration in this process (by path, head dim, causal, dtype, device), and why.
path_failures: dict[tuple, str] = {}
SUPPORTED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
MAX_HEAD_DIM = 256


def _visible(sq: int, sk: int, device=None) -> torch.Tensor:
    """[sq, sk] bool: True where query i may see key j (the diagonal at the bottom right)."""
    return torch.ones(sq, sk, dtype=torch.bool, device=device).tril(diagonal=sk - sq)


def attention_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True, scale: float | None = None
) -> torch.Tensor:
    """Attention computed plainly in float64 on the CPU, with the kernel's conventions (GQA, bottom-right diagonal)."""
    qd, kd, vd = (t.detach().to("cpu", torch.float64) for t in (q, k, v))
    group = qd.shape[1] // kd.shape[1]
    if group > 1:
        kd, vd = kd.repeat_interleave(group, dim=1), vd.repeat_interleave(group, dim=1)
    scale = 1.0 / math.sqrt(qd.shape[-1]) if scale is None else scale
    scores = qd @ kd.transpose(-2, -1) * scale
    if causal:
        scores = scores.masked_fill(~_visible(qd.shape[-2], kd.shape[-2]), float("-inf"))
    return scores.softmax(dim=-1) @ vd


def _check_inputs(q: object, k: object, v: object, causal: bool, scale: float | None) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(
            f"q, k and v must be 4-D [batch, heads, seq, head_dim], got {tuple(q.shape)}, {tuple(k.shape)}, "
            f"{tuple(v.shape)}: split the heads first, e.g. x.view(b, s, h, d).transpose(1, 2)"
        )
    b, h, sq, d = q.shape
    if k.shape != v.shape or k.shape[0] != b or k.shape[3] != d:
        raise ValueError(
            f"k and v must be [batch={b}, kv_heads, seq_k, head_dim={d}], got {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if k.shape[1] == 0 or h % k.shape[1]:
        raise ValueError(f"the {h} query heads must be a multiple of the {k.shape[1]} key/value heads (GQA)")
    if not 1 <= d <= MAX_HEAD_DIM:
        raise ValueError(f"head_dim must be from 1 to {MAX_HEAD_DIM}, got {d}")
    if q.dtype not in SUPPORTED_DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"q, k and v must share one dtype of {SUPPORTED_DTYPES}, got {q.dtype}, {k.dtype}, {v.dtype}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.shape[-1] > 1 and t.stride(-1) != 1:
            raise ValueError(f"{name} must be contiguous in its last dimension (head_dim), got strides {t.stride()}")
    if causal and sq > k.shape[2]:
        raise ValueError(f"causal attention with more queries ({sq}) than keys ({k.shape[2]}): the first see no key")
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0):
        raise ValueError(f"scale must be a positive number or None (1/sqrt(head_dim)), got {scale!r}")
    check_device(q, k, v, what="q, k and v")


def _tma_ok(*tensors: torch.Tensor) -> bool:
    """Can these be described for TMA: 16-byte aligned base and strides (the last one 1)?"""
    if TensorDescriptor is None:
        return False
    return all(
        t.data_ptr() % 16 == 0 and t.stride(-1) == 1 and all((s * t.element_size()) % 16 == 0 for s in t.stride()[:-1])
        for t in tensors
    )


def _device_index(t: torch.Tensor) -> int:
    return t.device.index if t.device.index is not None else torch.cuda.current_device()


def choose_path(kernel: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor) -> str:
    """``"tma"`` or ``"pointer"`` for these tensors (``kernel="auto"``: TMA on Hopper when aligned)."""
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
    return "tma" if capability_major(_device_index(q)) >= 9 else "pointer"


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
    """``softmax(q @ k.T * scale) @ v`` in one Triton kernel, never storing the score matrix (fp32: exact IEEE
    dots); returns a new contiguous ``[batch, heads, seq_q, head_dim]`` tensor in ``q``'s dtype."""
    _check_inputs(q, k, v, causal, scale)
    if config is not None and not isinstance(config, FlashConfig):
        raise TypeError(f"config must be a helpers FlashConfig or None, got {type(config).__name__}")
    b, h, sq, d = q.shape
    out = torch.empty((b, h, sq, d), dtype=q.dtype, device=q.device)
    if out.numel() == 0:
        return out
    if k.shape[2] == 0:
        raise ValueError("k and v have no keys (seq_k = 0): attention over nothing is undefined")
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    path = choose_path(kernel, q, k, v, out)
    try:
        _run(path, q, k, v, out, bool(causal), scale, config)
    except RuntimeError as err:
        if kernel != "auto" or path != "tma" or "no flash-attention configuration ran" not in str(err):
            raise
        # The Hopper path failed for every configuration: say so once, take the portable path.
        group = _group("tma", q, causal)
        if group not in path_failures:
            path_failures[group] = str(err)
            warnings.warn(f"the TMA path of flash_attention failed here; using the pointer path. {err}", stacklevel=2)
        _run("pointer", q, k, v, out, bool(causal), scale, config)
    return out


def _group(path: str, q: torch.Tensor, causal: bool) -> tuple:
    return (path, q.shape[-1], bool(causal), q.dtype, q.device)


def _run(path, q, k, v, out, causal: bool, scale: float, config: FlashConfig | None) -> None:
    """Launch `path` with `config`, or with the first configuration that runs and computes right here."""
    launch = _launcher(path, q, k, v, out, causal, scale * LOG2E)
    if config is None:
        sq, sk, d = q.shape[2], k.shape[2], q.shape[-1]
        capability = capability_major(_device_index(q)) if q.device.type == "cuda" else 0
        configs = configs_to_try(path, sq, sk, d, q.dtype, capability)
        key = (*_group(path, q, causal), seq_bucket(sq), seq_bucket(sk))

        def check() -> str | None:  # why `out` is wrong, None when it agrees with PyTorch's SDPA
            ref = sdpa_with_kernel_conventions(q, k, v, causal, scale).float()
            err = ((out.float() - ref).norm() / ref.norm().clamp_min(1e-30)).item()
            return None if err <= 2e-2 else f"relative error {err:.1e} against PyTorch's SDPA (limit 2e-2)"

        config = pick_config(key, configs, launch, check, _group(path, q, causal))
    launch(config)


def _launcher(path, q, k, v, out, causal, qk_scale):
    """A function that launches the chosen kernel on these tensors with a given configuration."""
    b, h, sq, d = q.shape
    kv_heads, sk = k.shape[1], k.shape[2]
    block_d = max(16, 1 << max(d - 1, 0).bit_length())
    common = dict(CAUSAL=causal, DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32")

    if path == "tma":

        def launch(cfg: FlashConfig) -> None:
            bm, bn = cfg.block_m, cfg.block_n
            descs = (
                TensorDescriptor.from_tensor(q, [1, 1, bm, block_d]),
                TensorDescriptor.from_tensor(k, [1, 1, bn, block_d]),
                TensorDescriptor.from_tensor(v, [1, 1, bn, block_d]),
                TensorDescriptor.from_tensor(out, [1, 1, bm, block_d]),
            )
            _flash_attn_fwd_tma_kernel[(triton.cdiv(sq, bm), b * h)](
                *descs, h, h // kv_heads, sq, sk, qk_scale, BLOCK_D=block_d, BLOCK_M=bm, BLOCK_N=bn,
                num_warps=cfg.num_warps, num_stages=cfg.num_stages, **common,
            )  # fmt: skip

        return launch

    def launch(cfg: FlashConfig) -> None:
        bm, bn = cfg.block_m, cfg.block_n
        _flash_attn_fwd_kernel[(triton.cdiv(sq, bm), b * h)](
            q, k, v, out, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *out.stride()[:3],
            h, h // kv_heads, sq, sk, qk_scale, HEAD_DIM=d, BLOCK_D=block_d, BLOCK_M=bm, BLOCK_N=bn,
            num_warps=cfg.num_warps, num_stages=cfg.num_stages, **common,
        )  # fmt: skip

    return launch


def sdpa_with_kernel_conventions(q, k, v, causal: bool, scale: float | None) -> torch.Tensor:
    """PyTorch's SDPA computing what the kernel computes (bottom-right causal diagonal, GQA)."""
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    sq, sk = q.shape[2], k.shape[2]
    if causal and sq != sk:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=_visible(sq, sk, q.device), scale=scale)
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
            out = sdpa_with_kernel_conventions(*leaves, ctx.causal, ctx.scale)
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
