"""The backward of the fused MLP's middle: the ``dh`` GEMM with a GeGLU-backward epilogue.

In the MLP ``y = down(h)``, ``h = gelu_tanh(gate) * up``, the backward first needs
``dh = dy @ W_down`` (``[M, hidden]``), then the GeGLU backward ``dgate = dh * up * gelu'(gate)``,
``dup = dh * gelu(gate)``. Done as a cuBLAS GEMM and a pointwise kernel, ``dh`` goes to memory
and comes back; here the GEMM's epilogue reads the saved (or recomputed) pre-activations ``gu``
(gate and up interleaved, as the forward kernel writes them), and writes ``dgu`` (``dgate`` and
``dup`` interleaved: exactly the layout of the packed weight's gradient) and, if asked, ``h``
(the down projection's weight gradient needs it when nothing was saved).

``dgu`` may be ``gu`` itself: each program reads its ``gu`` tile before writing the same tile of
``dgu``, and no two programs share a tile, so the backward needs no second ``[M, 2*hidden]`` buffer.

- ``_geglu_backward_gemm_tma_kernel``: Hopper path (tensor descriptors, persistent programs).
- ``_geglu_backward_gemm_kernel``: portable pointer path (any CUDA GPU, unaligned sizes).
"""

from __future__ import annotations

import triton
import triton.language as tl

from .gate_up_kernels import _pointer_k_loop, _tile_coords
from .geglu_pointwise import _geglu_grads


@triton.jit
def _split_pairs(gu, BLOCK_N: tl.constexpr):
    """[BM, 2*BN] interleaved (gate, up) -> two fp32 [BM, BN] tiles."""
    return tl.split(tl.reshape(gu.to(tl.float32), (gu.shape[0], BLOCK_N, 2)))


@triton.jit
def _join_pairs(dgate, dup, BLOCK_N: tl.constexpr):
    """Two [BM, BN] tiles -> [BM, 2*BN] interleaved (dgate, dup), the packed weight's row order."""
    return tl.reshape(tl.join(dgate, dup), (dgate.shape[0], 2 * BLOCK_N))


@triton.jit
def _geglu_backward_gemm_tma_kernel(
    dy_desc,
    wd_desc,
    gu_desc,
    dgu_desc,
    h_desc,
    M,
    H,
    D,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    FLATTEN: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    STORE_H: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr = False,
):
    """Persistent: tiles of dh = dy @ W_down ([BM, BN], BN columns of hidden), GeGLU backward in the epilogue.

    dy_desc: [M, D] blocks [BM, BK]; wd_desc: W_down [D, H] blocks [BK, BN]; gu_desc and dgu_desc:
    [M, 2H] blocks [BM, 2BN] (may describe the same memory); h_desc (STORE_H only, else None): [M, H]
    blocks [BM, BN].
    """
    start = tl.program_id(0)
    num_programs = tl.num_programs(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(H, BLOCK_N)
    k_tiles = tl.cdiv(D, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    tile_id_c = start - num_programs  # the epilogue's own counter (see the forward kernel)
    for tile_id in tl.range(start, num_tiles, num_programs, flatten=FLATTEN, warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            a = dy_desc.load([off_m, ki * BLOCK_K])
            b = wd_desc.load([ki * BLOCK_K, off_n])
            acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
        tile_id_c += num_programs
        pid_m, pid_n = _tile_coords(tile_id_c, num_pid_m, num_pid_n, GROUP_M)
        gate, up = _split_pairs(gu_desc.load([pid_m * BLOCK_M, pid_n * 2 * BLOCK_N]), BLOCK_N)
        dgate, dup, gelu = _geglu_grads(acc, gate, up)
        dgu_desc.store([pid_m * BLOCK_M, pid_n * 2 * BLOCK_N], _join_pairs(dgate, dup, BLOCK_N).to(dgu_desc.dtype))
        if STORE_H:
            h_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], (gelu * up).to(h_desc.dtype))


@triton.jit
def _geglu_backward_gemm_kernel(
    dy_ptr,
    wd_ptr,
    gu_ptr,
    dgu_ptr,
    h_ptr,
    M,
    H,
    D,
    stride_dym,
    stride_wdk,
    stride_gum,
    stride_dgum,
    stride_hm,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    EVEN_K: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    STORE_H: tl.constexpr,
):
    """One tile per program, plain pointers: dy [M, D] and W_down [D, H] contiguous along their rows."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(H, BLOCK_N)
    pid_m, pid_n = _tile_coords(tl.program_id(0), num_pid_m, num_pid_n, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    rm_load = tl.where(rm < M, rm, 0).to(tl.int64)  # past the edge: read row 0, never store it
    rn_load = tl.where(rn < H, rn, 0)
    a_ptrs = dy_ptr + rm_load[:, None] * stride_dym + rk[None, :]
    b_ptrs = wd_ptr + rk[:, None].to(tl.int64) * stride_wdk + rn_load[None, :]
    acc = _pointer_k_loop(a_ptrs, b_ptrs, D, BLOCK_K * stride_wdk, BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K, DOT_PRECISION)
    rows = rm[:, None].to(tl.int64)
    row_ok = rm[:, None] < M
    c2 = pid_n * 2 * BLOCK_N + tl.arange(0, 2 * BLOCK_N)
    mask2 = row_ok & (c2[None, :] < 2 * H)
    gate, up = _split_pairs(tl.load(gu_ptr + rows * stride_gum + c2[None, :], mask=mask2, other=0.0), BLOCK_N)
    dgate, dup, gelu = _geglu_grads(acc, gate, up)
    dgu = _join_pairs(dgate, dup, BLOCK_N)
    tl.store(dgu_ptr + rows * stride_dgum + c2[None, :], dgu.to(dgu_ptr.dtype.element_ty), mask=mask2)
    if STORE_H:
        h_mask = row_ok & (rn[None, :] < H)
        tl.store(h_ptr + rows * stride_hm + rn[None, :], (gelu * up).to(h_ptr.dtype.element_ty), mask=h_mask)
