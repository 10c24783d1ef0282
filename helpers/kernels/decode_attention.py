"""Split-KV decode attention (flash-decoding) for one query token per sequence against a static KV cache:
kernels, launcher :func:`launch_decode_attention`, function :func:`decode_attention`. The position lives on the
device and is read inside the kernel, so the launch needs no host sync and a CUDA graph replays it as the
position advances. The grid depends only on the shapes: each split owns a fixed range of the buffer and skips
the blocks past the position; a second kernel merges the splits by their log-sum-exp.
"""

from __future__ import annotations

import functools
import math

from ..triton_env import check_device, ensure_interpreter_ready, triton_mode

triton_mode()  # fixes the mode before the kernels below are defined (triton.jit reads it then)

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

ensure_interpreter_ready()

__all__ = [
    "SUPPORTED_DTYPES",
    "decode_attention",
    "decode_attention_reference",
    "decode_attention_step",
    "launch_decode_attention",
    "split_plan",
]

SUPPORTED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
LOG2E = 1.4426950408889634
BLOCK_N = 64  # cache positions per loop step: a [64, 128] tile of K and of V per step
NUM_WARPS = 8  # with 4 warps each thread would hold too much of the two fp32 tiles in registers
MIN_SPLIT_LEN = 64  # positions: a shorter split would cost more in the merge than it saves
WAVES = 4  # programs per SM to aim for: each is short, so several per SM hide the load latency
MAX_SPLITS = 64  # the merge holds every split's partial output of one head in registers
INTERPRETER_SMS = 8  # any count works in the interpreter; a small one keeps the programs few
INTERPRETER_BLOCK_N = 16


@triton.jit
def _decode_attn_split_kernel(
    q_ptr, k_ptr, v_ptr, pos_ptr, part_ptr, lse_ptr, out_ptr,
    H, GROUP, D, split_len, n_splits, qk_scale,
    stride_qb, stride_qh, stride_kb, stride_kh, stride_kn, stride_vb, stride_vh, stride_vn, stride_pos,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, SINGLE: tl.constexpr,
):  # fmt: skip
    """One program: one (sequence, head) over one split of the cache, positions past the sequence's position
    skipped (the loop's upper bound comes from the loaded position). Writes the split's normalised output and
    its log2-sum-exp, or with SINGLE (one split) the final output."""
    bh = tl.program_id(0)
    split = tl.program_id(1)
    b = bh // H
    h = bh % H
    kvh = h // GROUP
    pos = tl.load(pos_ptr + b * stride_pos).to(tl.int32)
    lo = split * split_len
    hi = tl.minimum(lo + split_len, pos + 1)  # <= lo: an empty split (the loop below does not run)
    d = tl.arange(0, BLOCK_D)
    d_ok = d < D
    q = tl.load(q_ptr + b.to(tl.int64) * stride_qb + h * stride_qh + d, mask=d_ok, other=0.0).to(tl.float32)
    q = q * qk_scale  # the softmax scale and log2(e) folded in once: exp2 below
    k_base = k_ptr + b.to(tl.int64) * stride_kb + kvh.to(tl.int64) * stride_kh
    v_base = v_ptr + b.to(tl.int64) * stride_vb + kvh.to(tl.int64) * stride_vh
    m = tl.full([1], float("-inf"), tl.float32)  # running max (log2 units), running sum, accumulator
    total = tl.zeros([1], dtype=tl.float32)
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for start in range(lo, hi, BLOCK_N):
        n = start + tl.arange(0, BLOCK_N)
        n_ok = n < hi
        tile_ok = n_ok[:, None] & d_ok[None, :]
        k = tl.load(k_base + n[:, None] * stride_kn + d[None, :], mask=tile_ok, other=0.0).to(tl.float32)
        s = tl.where(n_ok, tl.sum(k * q[None, :], axis=1), float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=0))  # finite: every step holds at least one visible position
        alpha = tl.exp2(m - m_new)
        p = tl.exp2(s - m_new)
        v = tl.load(v_base + n[:, None] * stride_vn + d[None, :], mask=tile_ok, other=0.0).to(tl.float32)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        total = total * alpha + tl.sum(p, axis=0)
        m = m_new
    filled = total > 0.0
    o = acc / tl.where(filled, total, 1.0)  # an empty split: 0, never 0 / 0
    if SINGLE:
        tl.store(out_ptr + bh.to(tl.int64) * D + d, o.to(out_ptr.dtype.element_ty), mask=d_ok)
    else:
        row = bh.to(tl.int64) * n_splits + split
        tl.store(part_ptr + row * D + d, o, mask=d_ok)
        lse = tl.where(filled, m + tl.log2(tl.where(filled, total, 1.0)), float("-inf"))
        tl.store(lse_ptr + row + tl.arange(0, 1), lse)


@triton.jit
def _decode_attn_merge_kernel(
    part_ptr, lse_ptr, out_ptr, D, n_splits, BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr
):  # fmt: skip
    """One program per (sequence, head): the splits' outputs weighted by 2^(lse - max lse); empty splits
    (lse -inf) weigh 0, and split 0 always holds position 0, so the max is finite."""
    bh = tl.program_id(0).to(tl.int64)
    s = tl.arange(0, BLOCK_S)
    d = tl.arange(0, BLOCK_D)
    lse = tl.load(lse_ptr + bh * n_splits + s, mask=s < n_splits, other=float("-inf"))
    used = lse > float("-inf")
    w = tl.where(used, tl.exp2(lse - tl.max(lse, axis=0)), 0.0)
    rows = part_ptr + (bh * n_splits + s)[:, None] * D + d[None, :]
    o = tl.load(rows, mask=used[:, None] & (d < D)[None, :], other=0.0)
    out = tl.sum(w[:, None] * o, axis=0) / tl.sum(w, axis=0)
    tl.store(out_ptr + bh * D + d, out.to(out_ptr.dtype.element_ty), mask=d < D)


# Launcher


@functools.cache
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def device_sms(device: torch.device) -> int:
    """Streaming multiprocessors of `device` (CUDA); :data:`INTERPRETER_SMS` elsewhere."""
    if device.type != "cuda":
        return INTERPRETER_SMS
    return _sm_count(device.index if device.index is not None else torch.cuda.current_device())


def split_plan(
    batch_heads: int, max_len: int, block_n: int, sm_count: int, splits: int | None = None
) -> tuple[int, int]:
    """``(splits, split_len)`` from shapes only: enough splits that ``batch_heads * splits`` covers the SMs
    :data:`WAVES` times, each at least :data:`MIN_SPLIT_LEN` positions (whole blocks), at most :data:`MAX_SPLITS`.
    `splits` asks for a count instead (rounded to whole blocks per split)."""
    sizes = {"batch_heads": batch_heads, "max_len": max_len, "block_n": block_n, "sm_count": sm_count}
    for name, value in sizes.items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    n_blocks = triton.cdiv(max_len, block_n)
    if splits is None:
        want = triton.cdiv(WAVES * sm_count, batch_heads)
        per_split = max(triton.cdiv(MIN_SPLIT_LEN, block_n), triton.cdiv(n_blocks, min(want, MAX_SPLITS)))
        per_split = min(per_split, n_blocks)
    elif isinstance(splits, int) and 1 <= splits <= MAX_SPLITS:
        per_split = triton.cdiv(n_blocks, splits)
    else:
        raise ValueError(f"splits must be an int in 1..{MAX_SPLITS} or None, got {splits!r}")
    return triton.cdiv(n_blocks, per_split), per_split * block_n


def _check(q, k, v, position) -> None:
    for name, t in (("q", q), ("k", k), ("v", v), ("position", position)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if q.dim() != 4 or q.shape[2] != 1:
        raise ValueError(f"q must be [batch, heads, 1, head_dim] (one query token), got {tuple(q.shape)}")
    b, h, _, d = q.shape
    if k.dim() != 4 or k.shape != v.shape or k.shape[0] != b or k.shape[3] != d:
        raise ValueError(
            f"k and v must both be [batch, kv_heads, max_len, head_dim] matching q {tuple(q.shape)}, "
            f"got {tuple(k.shape)} and {tuple(v.shape)}"
        )
    if h % k.shape[1] != 0:
        raise ValueError(f"heads ({h}) must be a multiple of kv_heads ({k.shape[1]})")
    if q.dtype != k.dtype or k.dtype != v.dtype or q.dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"q, k and v must share one dtype of {SUPPORTED_DTYPES}, got {q.dtype}, {k.dtype}, {v.dtype}")
    if k.stride(3) != 1 or v.stride(3) != 1:
        raise ValueError("k and v must be contiguous along head_dim (the cache buffers are)")
    if position.dtype not in (torch.int64, torch.int32) or position.shape not in ((), (b,)):
        raise ValueError(
            f"position must be a 0-d integer tensor (or one per sequence, [{b}]), got {position.dtype} "
            f"{tuple(position.shape)}"
        )
    check_device(q, k, v, position, what="q, k, v and position")


def launch_decode_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    position: torch.Tensor,
    out: torch.Tensor,
    scale: float,
    block_n: int | None = None,
    splits: int | None = None,
    num_warps: int | None = None,
) -> int:
    """Launch on checked inputs, writing ``out`` (``[batch, heads, 1, head_dim]``, contiguous); returns the
    split count. `block_n`, `splits` and `num_warps` override the defaults (the benchmark's sweeps). No host sync."""
    b, h, _, d = q.shape
    kvh, max_len = k.shape[1], k.shape[2]
    interpreted = triton_mode() == "interpreter"
    block_n = block_n or (INTERPRETER_BLOCK_N if interpreted else BLOCK_N)
    n_splits, split_len = split_plan(b * h, max_len, block_n, device_sms(q.device), splits)
    block_d = triton.next_power_of_2(d)
    single = n_splits == 1
    if single:  # the first kernel writes the output: no partials, no merge
        part = lse = out
    else:
        part = torch.empty((b * h, n_splits, d), dtype=torch.float32, device=q.device)
        lse = torch.empty((b * h, n_splits), dtype=torch.float32, device=q.device)
    pos_stride = position.stride(0) if position.dim() else 0
    _decode_attn_split_kernel[(b * h, n_splits)](
        q, k, v, position, part, lse, out,
        h, h // kvh, d, split_len, n_splits, scale * LOG2E,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2),
        pos_stride, BLOCK_N=block_n, BLOCK_D=block_d, SINGLE=single, num_warps=num_warps or NUM_WARPS,
    )  # fmt: skip
    if not single:
        block_s = triton.next_power_of_2(n_splits)
        _decode_attn_merge_kernel[(b * h,)](part, lse, out, d, n_splits, BLOCK_S=block_s, BLOCK_D=block_d, num_warps=4)
    return n_splits


def decode_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    position: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """Attention of one query token per sequence, q ``[batch, heads, 1, head_dim]``, over cache positions
    ``0 .. position`` (inclusive) of k, v ``[batch, kv_heads, max_len, head_dim]`` (heads a multiple of kv_heads).
    `position` is a 0-d integer tensor on the device (or one per sequence), read by the kernel: no host sync.
    `scale` defaults to ``1 / sqrt(head_dim)``. Returns ``[batch, heads, 1, head_dim]`` in q's dtype."""
    _check(q, k, v, position)
    if q.stride(3) != 1:
        q = q.contiguous()
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    scale = 1.0 / math.sqrt(q.shape[3]) if scale is None else float(scale)
    launch_decode_attention(q, k, v, position, out, scale)
    return out


# A graph break around the launch when the caller is compiled: compile fuses what is around it (RoPE, the
# cache write), and the kernels run as they are. Imported only where the course's attention is asked for.
decode_attention_step = torch.compiler.disable(decode_attention)


def decode_attention_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    position: torch.Tensor | int,
    scale: float | None = None,
) -> torch.Tensor:
    """The same attention in float32 torch: a softmax over the visible positions only (the numerics reference)."""
    b, h, _, d = q.shape
    group = h // k.shape[1]
    kf = k.float().repeat_interleave(group, dim=1)
    vf = v.float().repeat_interleave(group, dim=1)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    pos = torch.as_tensor(position, device=k.device).reshape(-1, 1).expand(b, 1)
    visible = torch.arange(k.shape[2], device=k.device)[None, :] <= pos  # [b, max_len]
    scores = (q.float() @ kf.transpose(-2, -1)) * scale  # [b, h, 1, max_len]
    scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
    return scores.softmax(dim=-1) @ vf
