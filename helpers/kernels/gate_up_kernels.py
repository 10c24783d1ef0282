"""The Triton kernels of the gate+up GEMM with a GeGLU epilogue, forward and backward: a Hopper TMA and a
portable pointer path; ``HAS_SCALES`` selects e4m3 inputs. ``dgu`` may alias ``gu`` (a tile is read first)."""

from __future__ import annotations

import triton
import triton.language as tl

from .geglu_pointwise import _geglu_grads, _gelu_tanh_f32  # (its import fixes the Triton mode first)

# Pieces shared by the forward and backward kernels


@triton.jit
def _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Grouped ("super-tile") order: GROUP_M row-tiles share each column tile while it is in L2."""
    group_size = GROUP_M * num_pid_n
    first_m = (tile_id // group_size) * GROUP_M
    rows_in_group = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile_id % group_size) % rows_in_group
    pid_n = (tile_id % group_size) // rows_in_group
    return pid_m, pid_n


@triton.jit
def _pointer_k_loop(
    a_ptrs,
    b_ptrs,
    K,
    b_step,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    """acc[BM, BN] = a @ b over K in fp32 from pointer blocks; without EVEN_K the last block is masked."""
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ki in range(tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            k_ok = rk < K - ki * BLOCK_K
            a = tl.load(a_ptrs, mask=k_ok[None, :], other=0.0)
            b = tl.load(b_ptrs, mask=k_ok[:, None], other=0.0)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
        a_ptrs += BLOCK_K
        b_ptrs += b_step
    return acc


@triton.jit
def _add_bias(acc, bias_ptr, off_n, N2, BLOCK_N: tl.constexpr, HAS_BIAS: tl.constexpr):
    if HAS_BIAS:
        cols = off_n + tl.arange(0, BLOCK_N)
        acc += tl.load(bias_ptr + cols, mask=cols < N2, other=0.0).to(tl.float32)[None, :]
    return acc


@triton.jit
def _apply_scales(
    acc, sx_ptr, sw_ptr, off_m, off_n, M, N2, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HAS_SCALES: tl.constexpr
):
    """FP8 inputs: ``acc * sx[rows, None] * sw[None, cols]``, the per-row scales of x and of W_packed
    (a row of W_packed is a column of the product), so the fp32 tile is in real units again."""
    if HAS_SCALES:
        rows = off_m + tl.arange(0, BLOCK_M)
        cols = off_n + tl.arange(0, BLOCK_N)
        sx = tl.load(sx_ptr + rows, mask=rows < M, other=0.0)
        sw = tl.load(sw_ptr + cols, mask=cols < N2, other=0.0)
        acc = acc * sx[:, None] * sw[None, :]
    return acc


@triton.jit
def _geglu_of_tile(acc, BLOCK_N: tl.constexpr, GROUP_ROWS: tl.constexpr):
    """[BM, BN] interleaved (gate, up) fp32 tile -> [BM, BN/2] gelu_tanh(gate) * up in fp32.

    GROUP_ROWS = 1: columns alternate gate, up (pack_gate_up(..., group=1), the default).
    GROUP_ROWS = BLOCK_N/2: the tile's first half is gate, its second half up (group=BLOCK_N/2).
    """
    if GROUP_ROWS == 1:
        gate, up = tl.split(tl.reshape(acc, (acc.shape[0], BLOCK_N // 2, 2)))
    else:
        tl.static_assert(GROUP_ROWS * 2 == BLOCK_N, "GROUP_ROWS must be 1 or BLOCK_N // 2")
        gate, up = tl.split(tl.permute(tl.reshape(acc, (acc.shape[0], 2, BLOCK_N // 2)), (0, 2, 1)))
    return _gelu_tanh_f32(gate) * up


# Forward kernels


@triton.jit
def _gate_up_geglu_tma_kernel(
    x_desc,
    w_desc,
    out_desc,
    gu_desc,
    bias_ptr,
    M,
    N2,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    FLATTEN: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    GROUP_ROWS: tl.constexpr = 1,
    WARP_SPECIALIZE: tl.constexpr = False,
    STORE_GU: tl.constexpr = False,
    HAS_SCALES: tl.constexpr = False,
    sx_ptr=None,
    sw_ptr=None,
):
    """Persistent: program p of P computes tiles p, p + P, p + 2P, ... of out = geglu(x @ W_packed.T).

    x_desc: [M, K] blocks [BM, BK]; w_desc: [2H, K] blocks [BN, BK]; out_desc: [M, H] blocks [BM, BN/2];
    gu_desc (STORE_GU only, else None): [M, 2H] blocks [BM, BN]. HAS_SCALES: x and W_packed are e4m3
    (W blocks loaded [BN, BK] and transposed in the dot: Hopper's fp8 wgmma wants B K-major),
    sx_ptr [M] and sw_ptr [2H] their float32 row scales.
    Out-of-range rows/columns of a tile are zero-filled by the TMA loads and clipped by its stores.
    """
    start = tl.program_id(0)
    num_programs = tl.num_programs(0)  # the grid is min(#SMs, #tiles): any size works
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N2, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    # A second tile counter for the epilogue: with FLATTEN the software pipeliner overlaps the
    # next tile's loads with this epilogue, and sharing one counter between them can confuse it.
    tile_id_c = start - num_programs
    for tile_id in tl.range(start, num_tiles, num_programs, flatten=FLATTEN, warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            a = x_desc.load([off_m, ki * BLOCK_K])
            b = w_desc.load([off_n, ki * BLOCK_K])
            acc = tl.dot(a, b.T, acc, input_precision=DOT_PRECISION)
        tile_id_c += num_programs
        pid_m, pid_n = _tile_coords(tile_id_c, num_pid_m, num_pid_n, GROUP_M)
        acc = _apply_scales(acc, sx_ptr, sw_ptr, pid_m * BLOCK_M, pid_n * BLOCK_N, M, N2, BLOCK_M, BLOCK_N, HAS_SCALES)
        acc = _add_bias(acc, bias_ptr, pid_n * BLOCK_N, N2, BLOCK_N, HAS_BIAS)
        if STORE_GU:
            gu_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(gu_desc.dtype))
        h = _geglu_of_tile(acc, BLOCK_N, GROUP_ROWS)
        out_desc.store([pid_m * BLOCK_M, pid_n * (BLOCK_N // 2)], h.to(out_desc.dtype))


@triton.jit
def _gate_up_geglu_kernel(
    x_ptr,
    w_ptr,
    bias_ptr,
    out_ptr,
    gu_ptr,
    M,
    N2,
    K,
    stride_xm,
    stride_wn,
    stride_om,
    stride_gm,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    EVEN_K: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    GROUP_ROWS: tl.constexpr = 1,
    STORE_GU: tl.constexpr = False,
    HAS_SCALES: tl.constexpr = False,
    sx_ptr=None,
    sw_ptr=None,
):
    """One tile per program, plain pointer loads; HAS_SCALES as in the TMA kernel."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N2, BLOCK_N)
    pid_m, pid_n = _tile_coords(tl.program_id(0), num_pid_m, num_pid_n, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    # Rows/columns past the edge read row 0 instead of being masked: the loads stay unmasked
    # along M and N (cheaper), and the store mask discards what they produce.
    rm_load = tl.where(rm < M, rm, 0).to(tl.int64)
    rn_load = tl.where(rn < N2, rn, 0).to(tl.int64)
    a_ptrs = x_ptr + rm_load[:, None] * stride_xm + rk[None, :]
    b_ptrs = w_ptr + rn_load[None, :] * stride_wn + rk[:, None]  # [BK, BN] view of W_packed.T
    acc = _pointer_k_loop(a_ptrs, b_ptrs, K, BLOCK_K, BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K, DOT_PRECISION)
    acc = _apply_scales(acc, sx_ptr, sw_ptr, pid_m * BLOCK_M, pid_n * BLOCK_N, M, N2, BLOCK_M, BLOCK_N, HAS_SCALES)
    acc = _add_bias(acc, bias_ptr, pid_n * BLOCK_N, N2, BLOCK_N, HAS_BIAS)
    row_ok = rm[:, None] < M
    if STORE_GU:
        gu_ptrs = gu_ptr + rm[:, None].to(tl.int64) * stride_gm + rn[None, :]
        tl.store(gu_ptrs, acc.to(gu_ptr.dtype.element_ty), mask=row_ok & (rn[None, :] < N2))
    h = _geglu_of_tile(acc, BLOCK_N, GROUP_ROWS)
    co = pid_n * (BLOCK_N // 2) + tl.arange(0, BLOCK_N // 2)
    mask = row_ok & (co[None, :] < N2 // 2)
    tl.store(out_ptr + rm[:, None].to(tl.int64) * stride_om + co[None, :], h.to(out_ptr.dtype.element_ty), mask=mask)


# Backward kernels: dh = dy @ W_down with the GeGLU backward in the epilogue


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
    """Persistent: tiles of dh = dy @ W_down with the GeGLU backward in the epilogue (gu and dgu may share memory)."""
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
