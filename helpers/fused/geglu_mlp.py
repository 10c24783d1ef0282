"""Gate+up GEMM with a GeGLU epilogue in Triton, and the two-kernel MLP built on it.

The eager MLP runs ``gate = x @ Wg.T`` and ``up = x @ Wu.T`` as two GEMMs, writes both
``[M, hidden]`` products to memory, then reads them back for ``gelu_tanh(gate) * up``. Here one
kernel computes both products tile by tile and applies the GeGLU in its epilogue, so only
``h = gelu_tanh(gate) * up`` reaches memory; ``down_proj`` stays a cuBLAS GEMM (``F.linear``).

Layers, as in ``geglu.py``:

1. Kernels: ``_gate_up_geglu_tma_kernel`` (Hopper path: tensor descriptors (TMA), persistent
   programs, loops flattened so the next tile's loads overlap this tile's epilogue) and
   ``_gate_up_geglu_kernel`` (portable pointer path: any CUDA GPU, unaligned shapes).
2. ``gate_up_geglu(x, w_packed, b_packed=None)``: the launcher (checks, path choice, autotuning).
3. ``GateUpGeGLUFunction``: autograd Function (Triton forward; backward with cuBLAS GEMMs and
   the pointwise backward kernel of ``geglu.py``).
4. ``FusedGeGLUMLP``: the module, built with ``FusedGeGLUMLP.from_module(SimpleGeGLUMLP)``.

The weight layout that makes one accumulator enough: ``pack_gate_up`` interleaves the rows of the
two weights, row ``2j`` = gate row ``j`` and row ``2j+1`` = up row ``j``. A tile of ``BLOCK_N``
columns of ``x @ W_packed.T`` then holds ``BLOCK_N/2`` gate columns and the matching up columns
side by side, and the epilogue separates them with ``tl.reshape(acc, [BM, BN/2, 2])`` +
``tl.split``. In the wgmma accumulator layout each thread owns pairs of adjacent columns, so this
split moves no data (the compiled TTGIR has no ``convert_layout`` there). The packing is done
once, when the module is built, never per call.

Measured on an H200 (torch 2.11, triton 3.6, M=8192, dim 768, hidden 3072, bf16, profiler
kernel time, one run of benchmarks/geglu_kernels.py): the fused gate+up kernel 120.6 us (641
TFLOP/s) against 108.7 us for cuBLAS on the concatenated weight *without* the GeGLU; the whole
forward 172.2 us of kernels against 200.9 us for torch.compile (0.86x) and 231.8 us eager.
"""

from __future__ import annotations

from . import _backend  # noqa: F401  (sets TRITON_INTERPRET before the kernels below are defined)

import functools

import torch
import triton
import triton.language as tl
import triton.testing
from torch import nn
from torch.nn import functional as F

from ._backend import check_device, triton_mode
from .geglu import SUPPORTED_DTYPES, _gelu_tanh_f32, geglu_backward

try:  # host-side TMA descriptors: triton >= 3.4 (the H200 image has 3.6)
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - older triton: the pointer path is used
    TensorDescriptor = None  # type: ignore[assignment,misc]

__all__ = [
    "pack_gate_up",
    "unpack_gate_up",
    "gate_up_geglu",
    "GateUpGeGLUFunction",
    "FusedGeGLUMLP",
]

KERNELS = ("auto", "tma", "pointer")


# ----------------------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------------------


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
def _geglu_epilogue(acc, bias_ptr, off_n, N2, BLOCK_N: tl.constexpr, HAS_BIAS: tl.constexpr, GROUP_ROWS: tl.constexpr):
    """[BM, BN] interleaved (gate, up) fp32 accumulator -> [BM, BN/2] gelu_tanh(gate) * up in fp32.

    GROUP_ROWS = 1: columns alternate gate, up (pack_gate_up(..., group=1), the default).
    GROUP_ROWS = BLOCK_N/2: the tile's first half is gate, its second half up (group=BLOCK_N/2).
    """
    if HAS_BIAS:
        cols = off_n + tl.arange(0, BLOCK_N)
        acc += tl.load(bias_ptr + cols, mask=cols < N2, other=0.0).to(tl.float32)[None, :]
    if GROUP_ROWS == 1:
        gate, up = tl.split(tl.reshape(acc, (acc.shape[0], BLOCK_N // 2, 2)))
    else:
        tl.static_assert(GROUP_ROWS * 2 == BLOCK_N, "GROUP_ROWS must be 1 or BLOCK_N // 2")
        gate, up = tl.split(tl.permute(tl.reshape(acc, (acc.shape[0], 2, BLOCK_N // 2)), (0, 2, 1)))
    return _gelu_tanh_f32(gate) * up


@triton.jit
def _gate_up_geglu_tma_kernel(
    x_desc, w_desc, out_desc, bias_ptr,
    M, N2, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    HAS_BIAS: tl.constexpr, FLATTEN: tl.constexpr, DOT_PRECISION: tl.constexpr, GROUP_ROWS: tl.constexpr = 1,
    WARP_SPECIALIZE: tl.constexpr = False,
):
    """Persistent: program p of P computes tiles p, p + P, p + 2P, ... of out = geglu(x @ W_packed.T).

    x_desc: [M, K] blocks [BM, BK]; w_desc: [2H, K] blocks [BN, BK]; out_desc: [M, H] blocks [BM, BN/2].
    Out-of-range rows/columns of a tile are zero-filled by the TMA loads and clipped by its store.
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
        h = _geglu_epilogue(acc, bias_ptr, pid_n * BLOCK_N, N2, BLOCK_N, HAS_BIAS, GROUP_ROWS)
        out_desc.store([pid_m * BLOCK_M, pid_n * (BLOCK_N // 2)], h.to(out_desc.dtype))


@triton.jit
def _gate_up_geglu_kernel(
    x_ptr, w_ptr, bias_ptr, out_ptr,
    M, N2, K,
    stride_xm, stride_wn, stride_om,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr, DOT_PRECISION: tl.constexpr, GROUP_ROWS: tl.constexpr = 1,
):
    """One tile per program, plain pointer loads (x and W_packed contiguous along K)."""
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
        b_ptrs += BLOCK_K
    h = _geglu_epilogue(acc, bias_ptr, pid_n * BLOCK_N, N2, BLOCK_N, HAS_BIAS, GROUP_ROWS)
    ro = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    co = pid_n * (BLOCK_N // 2) + tl.arange(0, BLOCK_N // 2)
    mask = (ro[:, None] < M) & (co[None, :] < N2 // 2)
    tl.store(out_ptr + ro[:, None].to(tl.int64) * stride_om + co[None, :], h.to(out_ptr.dtype.element_ty), mask=mask)


# ----------------------------------------------------------------------------------------------
# Configurations and autotuning
# ----------------------------------------------------------------------------------------------


def _cfg(bm: int, bn: int, bk: int, stages: int, warps: int, group_m: int = 8, **extra: object) -> triton.Config:
    return triton.Config(
        {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group_m, **extra},
        num_stages=stages,
        num_warps=warps,
    )


# A small set of Hopper configurations (BLOCK_N counts packed columns: 256 = 128 gate + 128 up).
# Measured on the H200 at the blog shape (benchmarks/geglu_kernels.py --sweep, profiler kernel
# time, cuBLAS on the concatenated weight without GeGLU: 108 us):
#   128x256x64, 3 or 4 stages, 8 warps, flattened persistent loop  119.6 us (646 TFLOP/s)
#   same, loop not flattened (epilogue not overlapped)             129.6
#   256x128x64, 4 stages                                           123.9
#   128x128x64, 4 stages, 4 warps                                  128.8
#   GROUP_M 4 / 16 instead of 8                                    119.6 / 120.2
#   warp specialisation (triton 3.6), flattened / not              121.9 / 130.7
#   gate/up in blocks of 128 rows instead of pairs (GROUP_ROWS)    118.9 (within 1%: pairs kept,
#                                                                  they work with any BLOCK_N)
#   pointer kernel (no TMA, not persistent), best tile             146.3
# The smaller tiles are here for small M (few tiles would leave most SMs idle).
TMA_CONFIGS = [
    _cfg(128, 256, 64, 3, 8, FLATTEN=True),
    _cfg(128, 256, 64, 4, 8, FLATTEN=True),
    _cfg(256, 128, 64, 4, 8, FLATTEN=True),
    _cfg(128, 128, 64, 4, 4, FLATTEN=True),
    _cfg(64, 128, 64, 4, 4, FLATTEN=True),
]
POINTER_CONFIGS = [
    _cfg(128, 256, 64, 3, 8),
    _cfg(128, 128, 64, 3, 8),
    _cfg(64, 128, 32, 4, 4),
    _cfg(64, 64, 32, 4, 4),
]
# fp32 inputs use IEEE fp32 dots, i.e. FMA instructions, not tensor cores: that path is for
# exact results (tests, references), not speed. Large tiles make those kernels slow to compile
# and too big for shared memory, so fp32 uses one small configuration instead of autotuning.
FP32_CONFIG = _cfg(64, 64, 32, 2, 4)
# The interpreter runs programs one after another in Python/numpy: few, mid-sized programs.
INTERPRETER_CONFIG = _cfg(64, 64, 32, 1, 4, group_m=2)
# Persistent programs in the interpreter: a small number that does not divide the tile count of
# the test shapes, so the tests exercise programs that own different numbers of tiles.
INTERPRETER_PROGRAMS = 3


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@functools.lru_cache(maxsize=None)
def _num_sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


@functools.lru_cache(maxsize=None)
def _capability_major(device_index: int) -> int:
    return torch.cuda.get_device_capability(device_index)[0]


def _device_index(t: torch.Tensor) -> int:
    return t.device.index if t.device.index is not None else torch.cuda.current_device()


def _set_tma_block_shapes(nargs: dict) -> None:
    """Autotune pre-hook: give the descriptors the block shapes of the configuration being run."""
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["x_desc"].block_shape = [bm, bk]
    nargs["w_desc"].block_shape = [bn, bk]
    nargs["out_desc"].block_shape = [bm, bn // 2]


def _with_hook(configs: list[triton.Config]) -> list[triton.Config]:
    return [
        triton.Config(dict(c.kwargs), num_warps=c.num_warps, num_stages=c.num_stages, pre_hook=_set_tma_block_shapes)
        for c in configs
    ]


def _prune_for_small_m(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    """Skip tiles taller than the problem (M=37 needs no 256-row tile); keep at least one config."""
    m = named_args["M"]
    kept = [c for c in configs if c.kwargs["BLOCK_M"] <= max(64, m)]
    return kept or configs[-1:]


def _tuning_bench(fn, quantiles):
    # Shorter than do_bench's default (25 ms warm-up, 100 ms of runs) so that tuning a new shape
    # costs well under a second per configuration; ample for kernels of 10 us and more.
    return triton.testing.do_bench(fn, warmup=5, rep=25, quantiles=quantiles)


# Autotuned wrappers (compiled mode only). Their key is the problem size (M, N2, K); Triton adds
# the dtypes of tensor arguments. After the first call for a key, gate_up_geglu reads the
# winner (autotuner.best_config) into _TUNED and launches the plain kernel with it, which skips
# the autotuner's per-call work.
_tma_autotuned = triton.autotune(
    configs=_with_hook(TMA_CONFIGS), key=["M", "N2", "K"],
    prune_configs_by={"early_config_prune": _prune_for_small_m}, do_bench=_tuning_bench,
)(_gate_up_geglu_tma_kernel)
_pointer_autotuned = triton.autotune(
    configs=POINTER_CONFIGS, key=["M", "N2", "K"],
    prune_configs_by={"early_config_prune": _prune_for_small_m}, do_bench=_tuning_bench,
)(_gate_up_geglu_kernel)
_TUNED: dict[tuple, triton.Config] = {}


# ----------------------------------------------------------------------------------------------
# Launcher
# ----------------------------------------------------------------------------------------------


def pack_gate_up(gate: torch.Tensor, up: torch.Tensor, group: int = 1) -> torch.Tensor:
    """Interleave two ``[H, ...]`` tensors in blocks of ``group`` rows: ``group`` rows of gate, then
    ``group`` rows of up, and so on. ``group=1`` (the default): row 2j = gate[j], row 2j+1 = up[j].

    Works for the weights (``[H, dim]`` -> ``[2H, dim]``) and the biases (``[H]`` -> ``[2H]``).
    """
    if gate.shape != up.shape:
        raise ValueError(f"gate and up must have the same shape to be packed, got {tuple(gate.shape)} and {tuple(up.shape)}")
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
        raise ValueError(
            f"w_packed must be 2-D [2*hidden, dim] (see pack_gate_up), got shape {tuple(w_packed.shape)}"
        )
    if w_packed.shape[1] == 0:
        raise ValueError("w_packed has dim 0: the projections need at least one input feature")
    if x.dim() == 0 or x.shape[-1] != w_packed.shape[1]:
        raise ValueError(
            f"x's last dimension must equal w_packed's dim ({w_packed.shape[1]}), got x of shape {tuple(x.shape)}"
        )
    if x.dtype != w_packed.dtype:
        raise ValueError(f"x and w_packed must have the same dtype, got {x.dtype} and {w_packed.dtype}: cast with .to(dtype)")
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
        x_desc, w_desc, out_desc, bias, M, N2, K,
        HAS_BIAS=has_bias, DOT_PRECISION=precision,
        num_warps=config.num_warps, num_stages=config.num_stages, **kw,
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
        *args, HAS_BIAS=has_bias, EVEN_K=K % kw["BLOCK_K"] == 0, DOT_PRECISION=precision,
        num_warps=config.num_warps, num_stages=config.num_stages, **kw,
    )


# ----------------------------------------------------------------------------------------------
# Autograd Function and Module
# ----------------------------------------------------------------------------------------------


class GateUpGeGLUFunction(torch.autograd.Function):
    """Differentiable :func:`gate_up_geglu`.

    Forward: the fused Triton kernel. Backward: recompute the two products with one cuBLAS GEMM
    (nothing [M, hidden] was saved), the pointwise backward kernel of ``geglu.py``, then the
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


class FusedGeGLUMLP(nn.Module):
    """The GeGLU MLP in two kernels: fused gate+up+GeGLU (Triton), then down_proj (cuBLAS).

    ``gate_up_weight`` is the packed ``[2*hidden, dim]`` weight (rows interleaved gate, up: see
    :func:`pack_gate_up`); ``gate_up_bias`` likewise, or None. Build it from a trained
    ``SimpleGeGLUMLP`` with :meth:`from_module`: same outputs, fewer kernels.
    """

    def __init__(self, dim: int, hidden: int, bias: bool = False, device=None, dtype=None) -> None:
        super().__init__()
        if not (isinstance(dim, int) and isinstance(hidden, int)) or dim <= 0 or hidden <= 0:
            raise ValueError(f"dim and hidden must be positive integers, got dim={dim!r}, hidden={hidden!r}")
        factory = {"device": device, "dtype": dtype}
        # Initialise like two nn.Linear(dim, hidden) and pack, so a fresh module matches the
        # statistics of the one it replaces.
        gate = nn.Linear(dim, hidden, bias=bias, **factory)
        up = nn.Linear(dim, hidden, bias=bias, **factory)
        self.gate_up_weight = nn.Parameter(pack_gate_up(gate.weight.detach(), up.weight.detach()))
        if bias:
            self.gate_up_bias = nn.Parameter(pack_gate_up(gate.bias.detach(), up.bias.detach()))
        else:
            self.register_parameter("gate_up_bias", None)
        self.down_proj = nn.Linear(hidden, dim, bias=bias, **factory)
        self.dim, self.hidden = dim, hidden

    @classmethod
    def from_module(cls, mlp: nn.Module) -> "FusedGeGLUMLP":
        """A ``FusedGeGLUMLP`` with the weights of ``mlp`` (a ``SimpleGeGLUMLP``), on its device and dtype.

        The gate and up weights are packed once here; the down projection is copied.
        """
        for name in ("gate_proj", "up_proj", "down_proj"):
            if not isinstance(getattr(mlp, name, None), nn.Linear):
                raise TypeError(f"from_module needs a module with nn.Linear gate_proj, up_proj and down_proj (like SimpleGeGLUMLP); {type(mlp).__name__} has no Linear {name!r}")
        g, u, d = mlp.gate_proj, mlp.up_proj, mlp.down_proj
        if g.weight.shape != u.weight.shape or d.in_features != g.out_features:
            raise ValueError(
                f"inconsistent projections: gate {tuple(g.weight.shape)}, up {tuple(u.weight.shape)}, down {tuple(d.weight.shape)}"
            )
        if (g.bias is None) != (u.bias is None):
            raise ValueError("gate_proj and up_proj must both have a bias or both have none")
        new = cls(g.in_features, g.out_features, bias=g.bias is not None, device=g.weight.device, dtype=g.weight.dtype)
        with torch.no_grad():
            new.gate_up_weight.copy_(pack_gate_up(g.weight, u.weight))
            if g.bias is not None:
                new.gate_up_bias.copy_(pack_gate_up(g.bias, u.bias))
            if (d.bias is None) != (new.down_proj.bias is None):  # down's bias need not follow gate's
                new.down_proj = nn.Linear(d.in_features, d.out_features, bias=d.bias is not None,
                                          device=d.weight.device, dtype=d.weight.dtype)
            new.down_proj.load_state_dict(d.state_dict())
        new.train(mlp.training)
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = GateUpGeGLUFunction.apply(x, self.gate_up_weight, self.gate_up_bias)
        return self.down_proj(h)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, hidden={self.hidden}, bias={self.gate_up_bias is not None}, kernel=gate_up_geglu+cuBLAS down"
