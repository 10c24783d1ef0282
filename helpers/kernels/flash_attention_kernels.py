"""The Triton kernels of the course's flash-attention forward: keys and values stream through on-chip memory,
folded into a running result by the online softmax; causal programs skip tiles above the diagonal."""

from __future__ import annotations

from ..triton_env import ensure_interpreter_ready, triton_mode

triton_mode()  # fixes the mode before the kernels below are defined (triton.jit reads it then)

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

ensure_interpreter_ready()

LOG2E = 1.4426950408889634  # log2(e): exp(x) == exp2(x * LOG2E)
# What a masked raw score is replaced by. Finite on purpose: exp2 of it (scaled) is exactly 0,
# and a row whose first tile is all masked gets rescaled to nothing as soon as a real score arrives
# (alpha = exp2(m_old - m_new) = 0), without the inf - inf = NaN that -inf could produce.
MASKED = tl.constexpr(-1.0e30)  # a global read inside a kernel must be a constexpr (compiled Triton refuses others)


@triton.jit
def _online_softmax_update(qk, qk_scale, m_i, l_i, acc, v, DOT_PRECISION: tl.constexpr = "tf32"):
    """Fold one tile of scores into the running softmax: the heart of flash attention.

    qk: [BM, BN] fp32 raw scores q . k (masked entries MASKED); qk_scale: softmax scale * log2(e);
    m_i, l_i: [BM] running maximum (in log2 units) and running sum; acc: [BM, D] fp32 running sum
    of p @ v; v: [BN, D] the tile's values. Returns the new (m_i, l_i, acc). DOT_PRECISION matters
    for fp32 inputs only ("ieee": exact; bf16/fp16 dots ignore it).
    """
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    p = tl.math.exp2(qk * qk_scale - m_new[:, None])  # one fused multiply-add, one exp2 per score
    alpha = tl.math.exp2(m_i - m_new)  # how much the old sums shrink under the new maximum
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=DOT_PRECISION)
    return m_new, l_i, acc


@triton.jit
def _key_ranges(start_m, SEQ_Q, SEQ_K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    """(end of the unmasked key tiles, end of all key tiles) for the query block at start_m."""
    full_tiles_end = (SEQ_K // BLOCK_N) * BLOCK_N  # tiles wholly inside the keys
    if CAUSAL:
        diag = SEQ_K - SEQ_Q  # query i sees keys j <= i + diag
        # keys every row of the block sees: j <= start_m + diag, rounded down to whole tiles
        unmasked_end = tl.minimum(((start_m + diag + 1) // BLOCK_N) * BLOCK_N, full_tiles_end)
        unmasked_end = tl.maximum(unmasked_end, 0)
        end = tl.minimum(start_m + BLOCK_M + diag, SEQ_K)  # keys the block's last row sees
    else:
        unmasked_end = full_tiles_end
        end = SEQ_K
    return unmasked_end, end


@triton.jit
def _scores(q, k, offs_m, offs_n, SEQ_Q, SEQ_K, MASK: tl.constexpr, CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr):
    """[BM, BN] raw scores q @ k.T; with MASK, keys past the end or past the diagonal get MASKED."""
    s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION)
    if MASK:
        keep = offs_n[None, :] < SEQ_K
        if CAUSAL:
            keep = keep & (offs_n[None, :] <= offs_m[:, None] + (SEQ_K - SEQ_Q))
        s = tl.where(keep, s, MASKED)
    return s


# Pointer kernel (portable; the interpreter runs it)


@triton.jit
def _attend_tiles_ptr(
    acc, l_i, m_i, q, k_ptr, v_ptr, stride_kn, stride_vn, offs_m, offs_d, lo, hi, qk_scale, SEQ_Q, SEQ_K,
    HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, EVEN_D: tl.constexpr, MASK: tl.constexpr,
    CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr,
):  # fmt: skip
    """Stream key/value tiles [lo, hi) of one head through the online softmax."""
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k_ptrs = k_ptr + offs_n[:, None].to(tl.int64) * stride_kn + offs_d[None, :]
        v_ptrs = v_ptr + offs_n[:, None].to(tl.int64) * stride_vn + offs_d[None, :]
        if MASK or not EVEN_D:
            io_mask = (offs_n[:, None] < SEQ_K) & (offs_d[None, :] < HEAD_DIM)
            k = tl.load(k_ptrs, mask=io_mask, other=0.0)
            v = tl.load(v_ptrs, mask=io_mask, other=0.0)
        else:
            k = tl.load(k_ptrs)
            v = tl.load(v_ptrs)
        qk = _scores(q, k, offs_m, offs_n, SEQ_Q, SEQ_K, MASK, CAUSAL, DOT_PRECISION)
        m_i, l_i, acc = _online_softmax_update(qk, qk_scale, m_i, l_i, acc, v, DOT_PRECISION)
    return acc, l_i, m_i


@triton.jit
def _flash_attn_fwd_kernel(
    Q, K, V, Out,
    stride_qb, stride_qh, stride_qm,
    stride_kb, stride_kh, stride_kn,
    stride_vb, stride_vh, stride_vn,
    stride_ob, stride_oh, stride_om,
    H, GROUP, SEQ_Q, SEQ_K, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr,
):  # fmt: skip
    """One program: BLOCK_M query rows of one (batch, head); grid (query blocks, batch * heads).

    Q, Out: [B, H, SEQ_Q, HEAD_DIM]; K, V: [B, H // GROUP, SEQ_K, HEAD_DIM]; any strides, the last
    dimension contiguous. qk_scale = softmax scale * log2(e).
    """
    # Heaviest first: program 0 takes the last query block, which sees the most keys when causal.
    start_m = (tl.num_programs(0) - 1 - tl.program_id(0)) * BLOCK_M
    off_bh = tl.program_id(1)
    off_b = (off_bh // H).to(tl.int64)
    off_h = (off_bh % H).to(tl.int64)
    off_kh = off_h // GROUP
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    EVEN_D: tl.constexpr = BLOCK_D == HEAD_DIM

    q_ptrs = Q + off_b * stride_qb + off_h * stride_qh + offs_m[:, None].to(tl.int64) * stride_qm + offs_d[None, :]
    q = tl.load(q_ptrs, mask=(offs_m[:, None] < SEQ_Q) & (offs_d[None, :] < HEAD_DIM), other=0.0)
    k_ptr = K + off_b * stride_kb + off_kh * stride_kh
    v_ptr = V + off_b * stride_vb + off_kh * stride_vh

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    unmasked_end, end = _key_ranges(start_m, SEQ_Q, SEQ_K, BLOCK_M, BLOCK_N, CAUSAL)
    # 1. key tiles every row of the block sees in full: no mask
    acc, l_i, m_i = _attend_tiles_ptr(
        acc, l_i, m_i, q, k_ptr, v_ptr, stride_kn, stride_vn, offs_m, offs_d, 0, unmasked_end, qk_scale,
        SEQ_Q, SEQ_K, HEAD_DIM, BLOCK_N, EVEN_D, False, CAUSAL, DOT_PRECISION,
    )  # fmt: skip
    # 2. tiles that cross the diagonal, and the ragged last tile: masked
    acc, l_i, m_i = _attend_tiles_ptr(
        acc, l_i, m_i, q, k_ptr, v_ptr, stride_kn, stride_vn, offs_m, offs_d, unmasked_end, end, qk_scale,
        SEQ_Q, SEQ_K, HEAD_DIM, BLOCK_N, EVEN_D, True, CAUSAL, DOT_PRECISION,
    )  # fmt: skip

    out = acc / l_i[:, None]
    o_ptrs = Out + off_b * stride_ob + off_h * stride_oh + offs_m[:, None].to(tl.int64) * stride_om + offs_d[None, :]
    tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=(offs_m[:, None] < SEQ_Q) & (offs_d[None, :] < HEAD_DIM))


# Hopper kernel: the same algorithm, tiles moved by the tensor memory accelerator (TMA)


@triton.jit
def _attend_tiles_tma(
    acc, l_i, m_i, q, k_desc, v_desc, off_b, off_kh, offs_m, lo, hi, qk_scale, SEQ_Q, SEQ_K,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, MASK: tl.constexpr, CAUSAL: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):  # fmt: skip
    """Stream key/value tiles [lo, hi) through the online softmax; rows past SEQ_K arrive as zeros."""
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = k_desc.load([off_b, off_kh, start_n, 0]).reshape([BLOCK_N, BLOCK_D])
        qk = _scores(q, k, offs_m, offs_n, SEQ_Q, SEQ_K, MASK, CAUSAL, DOT_PRECISION)
        v = v_desc.load([off_b, off_kh, start_n, 0]).reshape([BLOCK_N, BLOCK_D])
        m_i, l_i, acc = _online_softmax_update(qk, qk_scale, m_i, l_i, acc, v, DOT_PRECISION)
    return acc, l_i, m_i


@triton.jit
def _flash_attn_fwd_tma_kernel(
    q_desc, k_desc, v_desc, o_desc,
    H, GROUP, SEQ_Q, SEQ_K, qk_scale,
    BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr,
):  # fmt: skip
    """Like ``_flash_attn_fwd_kernel``, with 4-D descriptors: blocks [1, 1, BLOCK_M or BLOCK_N, BLOCK_D]."""
    start_m = (tl.num_programs(0) - 1 - tl.program_id(0)) * BLOCK_M
    off_bh = tl.program_id(1)
    off_b = off_bh // H
    off_h = off_bh % H
    off_kh = off_h // GROUP
    offs_m = start_m + tl.arange(0, BLOCK_M)

    q = q_desc.load([off_b, off_h, start_m, 0]).reshape([BLOCK_M, BLOCK_D])
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    unmasked_end, end = _key_ranges(start_m, SEQ_Q, SEQ_K, BLOCK_M, BLOCK_N, CAUSAL)
    acc, l_i, m_i = _attend_tiles_tma(
        acc, l_i, m_i, q, k_desc, v_desc, off_b, off_kh, offs_m, 0, unmasked_end, qk_scale, SEQ_Q, SEQ_K,
        BLOCK_N, BLOCK_D, False, CAUSAL, DOT_PRECISION,
    )  # fmt: skip
    acc, l_i, m_i = _attend_tiles_tma(
        acc, l_i, m_i, q, k_desc, v_desc, off_b, off_kh, offs_m, unmasked_end, end, qk_scale, SEQ_Q, SEQ_K,
        BLOCK_N, BLOCK_D, True, CAUSAL, DOT_PRECISION,
    )  # fmt: skip

    out = acc / l_i[:, None]
    o_desc.store([off_b, off_h, start_m, 0], out.to(o_desc.dtype).reshape([1, 1, BLOCK_M, BLOCK_D]))
