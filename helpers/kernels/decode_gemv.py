"""Batch-1 GEMV for decode, ``y[1, N] = x[1, K] @ W[N, K]^T`` (bf16, fp16 or fp32 in, fp32 accumulation):
kernels, launcher :func:`gemv`, module :class:`DecodeGEMV`. At one row a GEMM is a stream of the weight
through memory; each program owns a block of output rows and reads them along K in wide coalesced loads.
What sits beside the GEMV at one row is folded in: an RMSNorm or the GeGLU before it, a residual add after it.
"""

from __future__ import annotations

from ..triton_env import check_device, ensure_interpreter_ready, triton_mode

triton_mode()  # fixes the mode before the kernels below are defined (triton.jit reads it then)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from torch import nn  # noqa: E402

from .geglu_pointwise import _gelu_tanh_f32  # noqa: E402

ensure_interpreter_ready()

__all__ = ["PROLOGUES", "SUPPORTED_DTYPES", "DecodeGEMV", "gemv", "gemv_reference", "launch_gemv", "one_row"]

PROLOGUES = ("none", "rmsnorm", "geglu")
SUPPORTED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


@triton.jit
def _x_tile(x_ptr, norm_ptr, kk, k_ok, K, rstd, dt, PROLOGUE: tl.constexpr):
    """The K-slice `kk` of the GEMV's input in fp32, after the prologue, rounded where the eager ops round."""
    if PROLOGUE == 2:  # gelu_tanh(gate) * up in fp32, rounded once as the GeGLU kernel's output is
        g = tl.load(x_ptr + kk, mask=k_ok, other=0.0).to(tl.float32)
        u = tl.load(x_ptr + K + kk, mask=k_ok, other=0.0).to(tl.float32)
        xv = (_gelu_tanh_f32(g) * u).to(dt).to(tl.float32)
    else:
        xv = tl.load(x_ptr + kk, mask=k_ok, other=0.0).to(tl.float32)
        if PROLOGUE == 1:  # RMSNorm rounds the normalised x, then multiplies by its weight in the dtype
            nw = tl.load(norm_ptr + kk, mask=k_ok, other=0.0).to(tl.float32)
            xv = ((xv * rstd).to(dt).to(tl.float32) * nw).to(dt).to(tl.float32)
    return xv


@triton.jit
def _gemv_body(
    x_ptr, w_ptr, out_ptr, res_ptr, norm_ptr, N, K, stride_w, eps,
    PROLOGUE: tl.constexpr, RESIDUAL: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr,
):  # fmt: skip
    """One program: BLOCK_N output rows; PROLOGUE 0 plain, 1 RMSNorm of x (weight at norm_ptr), 2 GeGLU of
    x = [gate | up] (2K long); RESIDUAL adds res[rows] after rounding the product, as ``x + linear(h)`` does."""
    dt = out_ptr.dtype.element_ty
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    # rows past N read row N-1 again instead of a mask: the weight loads stay unmasked along K
    w_rows = w_ptr + tl.minimum(rows, N - 1).to(tl.int64)[:, None] * stride_w
    cols = tl.arange(0, BLOCK_K)
    # the first weight tile is asked for before x and the prologue: the weight stream, the whole cost at one row,
    # is then in flight while the RMSNorm's reduction and the first x slice are read
    if EVEN_K:
        w = tl.load(w_rows + cols[None, :])
    else:
        w = tl.load(w_rows + cols[None, :], mask=cols[None, :] < K, other=0.0)
    rstd = 1.0
    if PROLOGUE == 1:  # each program recomputes the row's rms: x is K elements, read from L2
        sq = tl.zeros([BLOCK_K], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            xs = tl.load(x_ptr + k0 + cols, mask=k0 + cols < K, other=0.0).to(tl.float32)
            sq += xs * xs
        rstd = 1.0 / tl.sqrt(tl.sum(sq, axis=0) / K + eps)
    acc = w.to(tl.float32) * _x_tile(x_ptr, norm_ptr, cols, cols < K, K, rstd, dt, PROLOGUE)[None, :]
    for k0 in range(BLOCK_K, K, BLOCK_K):
        kk = k0 + cols
        k_ok = kk < K
        if EVEN_K:
            w = tl.load(w_rows + kk[None, :])
        else:
            w = tl.load(w_rows + kk[None, :], mask=k_ok[None, :], other=0.0)
        acc += w.to(tl.float32) * _x_tile(x_ptr, norm_ptr, kk, k_ok, K, rstd, dt, PROLOGUE)[None, :]
    y = tl.sum(acc, axis=1)  # one reduction at the end, not one per step
    if RESIDUAL:
        y = y.to(dt).to(tl.float32) + tl.load(res_ptr + rows, mask=rows < N, other=0.0).to(tl.float32)
    tl.store(out_ptr + rows, y.to(dt), mask=rows < N)


# Three kernels, not one: a trace then names which GEMV of the step it is.
@triton.jit
def _gemv_kernel(x_ptr, w_ptr, out_ptr, res_ptr, norm_ptr, N, K, stride_w, eps, RESIDUAL: tl.constexpr,
                 BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr):  # fmt: skip
    """Plain GEMV (optionally plus a residual)."""
    _gemv_body(x_ptr, w_ptr, out_ptr, res_ptr, norm_ptr, N, K, stride_w, eps, 0, RESIDUAL, BLOCK_N, BLOCK_K, EVEN_K)


@triton.jit
def _rmsnorm_gemv_kernel(x_ptr, w_ptr, out_ptr, res_ptr, norm_ptr, N, K, stride_w, eps, RESIDUAL: tl.constexpr,
                         BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr):  # fmt: skip
    """GEMV of RMSNorm(x)."""
    _gemv_body(x_ptr, w_ptr, out_ptr, res_ptr, norm_ptr, N, K, stride_w, eps, 1, RESIDUAL, BLOCK_N, BLOCK_K, EVEN_K)


@triton.jit
def _geglu_gemv_kernel(x_ptr, w_ptr, out_ptr, res_ptr, norm_ptr, N, K, stride_w, eps, RESIDUAL: tl.constexpr,
                       BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr):  # fmt: skip
    """GEMV of gelu_tanh(gate) * up, x = [gate | up]."""
    _gemv_body(x_ptr, w_ptr, out_ptr, res_ptr, norm_ptr, N, K, stride_w, eps, 2, RESIDUAL, BLOCK_N, BLOCK_K, EVEN_K)


_KERNELS = {"none": _gemv_kernel, "rmsnorm": _rmsnorm_gemv_kernel, "geglu": _geglu_gemv_kernel}

# Few rows per program and long K runs: a decode shape has thousands of rows, so even 16 rows per
# program leave several programs per SM; each config keeps a few KB of loads in flight per program.
TUNING_CONFIGS = [
    triton.Config({"BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w, num_stages=s)
    for bn, bk, w, s in (
        (2, 1024, 4, 1), (2, 2048, 4, 1), (2, 1024, 2, 1), (2, 512, 2, 1), (2, 1024, 4, 2),
        (4, 512, 4, 1), (4, 1024, 4, 1), (8, 512, 4, 1), (8, 1024, 8, 1), (16, 256, 4, 1), (16, 512, 8, 1),
        (4, 512, 4, 3),
    )
]  # fmt: skip
# The interpreter runs programs one after another in numpy: a few mid-sized programs.
INTERPRETER_BLOCKS = (16, 256)

_TUNED: dict[str, object] = {}


def _tuned(prologue: str):
    """The autotuned launcher of one kernel (compiled mode only), keyed on N and K, built on first use."""
    if prologue not in _TUNED:
        even_k = triton.heuristics({"EVEN_K": lambda a: a["K"] % a["BLOCK_K"] == 0})(_KERNELS[prologue])
        _TUNED[prologue] = triton.autotune(configs=TUNING_CONFIGS, key=["N", "K"])(even_k)
    return _TUNED[prologue]


# Launcher


def one_row(x: torch.Tensor) -> bool:
    """True when `x` holds exactly one row (one token at batch 1): the case the GEMV serves."""
    return x.dim() >= 1 and x.shape[-1] > 0 and x.numel() == x.shape[-1]


def _check(x, weight, prologue, norm_weight, residual) -> tuple[int, int]:
    for name, t in (("x", x), ("weight", weight)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if prologue not in PROLOGUES:
        raise ValueError(f"prologue must be one of {PROLOGUES}, got {prologue!r}")
    if weight.dim() != 2 or weight.stride(1) != 1:
        raise ValueError(f"weight must be [N, K] and contiguous along K, got shape {tuple(weight.shape)}, "
                         f"strides {tuple(weight.stride())}")  # fmt: skip
    N, K = weight.shape
    if not one_row(x):
        raise ValueError(f"x must hold one row (batch 1, one token), got shape {tuple(x.shape)}: "
                         "more rows are a GEMM, run F.linear")  # fmt: skip
    if x.shape[-1] != (2 * K if prologue == "geglu" else K):
        want = f"2 x K = {2 * K} ([gate | up])" if prologue == "geglu" else f"K = {K}"
        raise ValueError(f"x's last dimension must be {want} for weight {tuple(weight.shape)}, got {x.shape[-1]}")
    if x.dtype != weight.dtype or x.dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"x and weight must share one dtype of {SUPPORTED_DTYPES}, got {x.dtype} and {weight.dtype}")
    tensors = [x, weight]
    if prologue == "rmsnorm":
        if not isinstance(norm_weight, torch.Tensor) or norm_weight.shape != (K,) or norm_weight.dtype != x.dtype:
            raise ValueError(f"the rmsnorm prologue needs norm_weight [{K}] in {x.dtype}")
        tensors.append(norm_weight)
    if residual is not None:
        if not isinstance(residual, torch.Tensor) or residual.numel() != N or residual.dtype != x.dtype:
            raise ValueError(f"residual must hold the output's {N} elements in {x.dtype}")
        tensors.append(residual)
    check_device(*tensors, what="x, weight and the fused operands")
    return N, K


def gemv(
    x: torch.Tensor,
    weight: torch.Tensor,
    prologue: str = "none",
    norm_weight: torch.Tensor | None = None,
    eps: float = 1e-5,
    residual: torch.Tensor | None = None,
) -> torch.Tensor:
    """``[residual +] F.linear(pro(x), weight)`` for one row `x` ``[..., K]`` in one kernel; `prologue` ``"rmsnorm"``
    (RMSNorm of x with `norm_weight`, `eps`) or ``"geglu"`` (x is ``[gate | up]``, 2K long). Output ``[..., N]``."""
    N, K = _check(x, weight, prologue, norm_weight, residual)
    out = torch.empty((*x.shape[:-1], N), dtype=x.dtype, device=x.device)
    launch_gemv(x.reshape(-1), weight, out, prologue, norm_weight, float(eps), residual)
    return out


def launch_gemv(
    x: torch.Tensor,
    weight: torch.Tensor,
    out: torch.Tensor,
    prologue: str = "none",
    norm_weight: torch.Tensor | None = None,
    eps: float = 1e-5,
    residual: torch.Tensor | None = None,
    blocks: tuple[int, int, int] | None = None,
) -> None:
    """Launch a checked GEMV: autotuned when compiled, unless `blocks` ``(BLOCK_N, BLOCK_K, num_warps)`` fixes the
    config (the benchmark's sweeps); the interpreter's fixed blocks on a CPU. No host sync: a CUDA graph captures it."""
    N, K = weight.shape
    res = residual.reshape(-1) if residual is not None else out
    nw = norm_weight if norm_weight is not None else weight
    args = (x, weight, out, res, nw, N, K, weight.stride(0), eps)
    if blocks is None and triton_mode() == "interpreter":
        blocks = (min(INTERPRETER_BLOCKS[0], triton.next_power_of_2(N)), INTERPRETER_BLOCKS[1], 4)
    if blocks is None:
        tuned = _tuned(prologue)
        tuned[lambda meta: (triton.cdiv(N, meta["BLOCK_N"]),)](*args, RESIDUAL=residual is not None)
        return
    block_n, block_k, warps = blocks
    _KERNELS[prologue][(triton.cdiv(N, block_n),)](
        *args, RESIDUAL=residual is not None, BLOCK_N=block_n, BLOCK_K=block_k, EVEN_K=K % block_k == 0, num_warps=warps
    )


def gemv_reference(
    x: torch.Tensor,
    weight: torch.Tensor,
    prologue: str = "none",
    norm_weight: torch.Tensor | None = None,
    eps: float = 1e-5,
    residual: torch.Tensor | None = None,
) -> torch.Tensor:
    """The same computation in float32 torch (the numerics reference; any number of rows)."""
    xf = x.float()
    if prologue == "rmsnorm":
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * norm_weight.float()
    elif prologue == "geglu":
        gate, up = xf.chunk(2, dim=-1)
        xf = F.gelu(gate, approximate="tanh") * up
    y = F.linear(xf, weight.float())
    return y if residual is None else y + residual.float()


# Module


class DecodeGEMV(nn.Module):
    """A bias-free ``nn.Linear`` with an optional prologue (``"rmsnorm"``: give the norm module, any with ``weight``
    and ``eps``; ``"geglu"``) whose one-row calls without gradients run :func:`gemv`; every other call (prefill,
    training) runs the layers as they are. ``forward(x, residual=None)`` adds `residual` to the output."""

    def __init__(self, linear: nn.Linear, prologue: str = "none", norm: nn.Module | None = None) -> None:
        super().__init__()
        if not isinstance(linear, nn.Linear) or linear.bias is not None:
            raise TypeError(f"linear must be a bias-free nn.Linear, got {linear!r}")
        if prologue not in PROLOGUES:
            raise ValueError(f"prologue must be one of {PROLOGUES}, got {prologue!r}")
        if (prologue == "rmsnorm") != (norm is not None) or (norm is not None and not hasattr(norm, "eps")):
            raise ValueError("give norm (a module with weight and eps) exactly when prologue is 'rmsnorm'")
        self.linear, self.prologue, self.norm = linear, prologue, norm

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        w = self.linear.weight
        if one_row(x) and not (torch.is_grad_enabled() and (x.requires_grad or w.requires_grad)):
            norm_weight = self.norm.weight if self.norm is not None else None
            eps = self.norm.eps if self.norm is not None else 1e-5
            return gemv(x, w, self.prologue, norm_weight, eps, residual)
        if self.prologue == "rmsnorm":
            x = self.norm(x)
        elif self.prologue == "geglu":
            gate, up = x.chunk(2, dim=-1)
            x = F.gelu(gate, approximate="tanh") * up
        y = self.linear(x)
        return y if residual is None else residual + y

    def extra_repr(self) -> str:
        return f"prologue={self.prologue!r}, one row: the course's GEMV ({triton_mode()}); more rows: the layers"
