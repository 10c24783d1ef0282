"""The FP8 gate+up GEMM with the GeGLU in its epilogue: one-pass row quantization and the fused launcher.

Fusing the GeGLU into the e4m3 GEMM keeps the bf16 ``[M, 2*hidden]`` product out of memory.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..triton_env import check_device, triton_mode
from . import gate_up_tuning as T
from .gate_up import _forward_outputs, _forward_plan
from .gate_up_choice import launch_first, num_sms
from .launch_plans import plan_cache

__all__ = ["FP8_CONFIGS", "fp8_configs", "quantize_rows_fp8", "fp8_gate_up_geglu_fused"]

E4M3 = torch.float8_e4m3fn
_E4M3_MAX: tl.constexpr = tl.constexpr(448.0)
_PLANS = plan_cache()

# Tile candidates per path with a rough relative efficiency (used, as for bf16, to rank tiles whose
# wave counts differ). e4m3 tiles are half the bytes of bf16 ones, so BLOCK_K = 128 keeps 128-byte
# rows (the widest TMA swizzle) and three or four stages fit Hopper's shared memory.
FP8_CONFIGS: dict[str, list[tuple[triton.Config, float]]] = {
    "tma": [
        (T.tma_config(128, 256, 128, 3, 8), 1.0),
        (T.tma_config(128, 128, 128, 4, 8), 0.9),
        (T.tma_config(64, 256, 128, 4, 4), 0.8),
        (T.tma_config(64, 128, 128, 4, 4), 0.7),
    ],
    "pointer": [
        (T.gate_up_config(128, 128, 64, 4, 8), 1.0),
        (T.gate_up_config(64, 128, 64, 4, 4), 0.8),
        (T.gate_up_config(64, 64, 64, 3, 4), 0.6),
    ],
}
# What benchmarks/fp8_gate_up.py sweeps on Hopper (the defaults' big tiles and two neighbours).
FP8_SWEEP = [
    T.tma_config(128, 256, 128, 3, 8),
    T.tma_config(128, 256, 128, 4, 8),
    T.tma_config(128, 128, 128, 4, 8),
    T.tma_config(128, 256, 64, 4, 8),
]


def fp8_configs(path: str, m: int, n2: int, device: torch.device, config: triton.Config | None = None):
    """``(configs, source)``: the tiles to try for an ``[m, n2]`` product, best first (the caller's
    ``config`` alone when given; the interpreter's small tile on a CPU)."""
    if config is not None:
        return [config], "caller"
    if triton_mode() == "interpreter":
        return [T.INTERPRETER_CONFIG], "interpreter"
    if path not in FP8_CONFIGS:
        raise ValueError(f"path must be one of {sorted(FP8_CONFIGS)}, got {path!r}")
    sms = num_sms(device.index if device.index is not None else torch.cuda.current_device())
    scored = []
    for order, (cfg, eff) in enumerate(FP8_CONFIGS[path]):
        tiles = -(-m // cfg.kwargs["BLOCK_M"]) * -(-n2 // cfg.kwargs["BLOCK_N"])
        scored.append((-eff * tiles / (-(-tiles // sms) * sms), order, cfg))
    return [cfg for _, _, cfg in sorted(scored, key=lambda s: s[:2])], "default (fp8)"


# ----------------------------------------------------------------------------------------------
# Row quantization: one pass
# ----------------------------------------------------------------------------------------------


@triton.jit
def _fp8_quantize_rows_kernel(x_ptr, q_ptr, s_ptr, M, K, stride_xm, ROWS: tl.constexpr, BLOCK_K: tl.constexpr):
    """ROWS rows per program: the row's largest magnitude (first sweep), then values / scale as e4m3
    (second sweep: the row is back from L2). ``scale = max(amax, 1e-12) / 448``, as ``quantize_rows``."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < M
    base = x_ptr + rows.to(tl.int64)[:, None] * stride_xm
    amax = tl.zeros((ROWS,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        mask = row_ok[:, None] & (cols[None, :] < K)
        v = tl.load(base + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.max(tl.abs(v), axis=1))
    scale = tl.div_rn(tl.maximum(amax, 1e-12), _E4M3_MAX)  # IEEE division, as torch: bit-equal scales
    tl.store(s_ptr + rows, scale, mask=row_ok)
    out = q_ptr + rows.to(tl.int64)[:, None] * K
    for k0 in range(0, K, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        mask = row_ok[:, None] & (cols[None, :] < K)
        v = tl.load(base + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        q = _round_to_e4m3(tl.minimum(tl.maximum(tl.div_rn(v, scale[:, None]), -_E4M3_MAX), _E4M3_MAX))
        tl.store(out + cols[None, :], q.to(q_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _round_to_e4m3(q):
    """fp32 values in [-448, 448] rounded (to nearest, ties to even) to e4m3-representable fp32 values,
    so the cast that follows is exact: Triton's CPU interpreter rounds fp32 -> fp8 without carrying
    into the exponent (124.9 becomes 64), and one arithmetic on both paths keeps them equal."""
    bits = q.to(tl.int32, bitcast=True)
    bits = (bits + 0x7FFFF + ((bits >> 20) & 1)) & -1048576  # keep 3 of fp32's 23 mantissa bits
    normal = bits.to(tl.float32, bitcast=True)
    subnormal = (q + 24576.0) - 24576.0  # below 2^-6 e4m3 steps by 2^-9: the ulp of fp32 at 1.5 * 2^14
    return tl.where(tl.abs(q) < 0.015625, subnormal, normal)


def quantize_rows_fp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(values, scales)``: 2-D ``x`` as e4m3 ``[M, K]`` with one float32 scale per row (``[M]``), in
    one Triton kernel; the same arithmetic as ``fp8_gate_up.quantize_rows`` (whose scales are ``[M, 1]``)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2 or not x.is_floating_point() or x.dtype in (E4M3, torch.float8_e5m2):
        raise ValueError(f"x must be a 2-D bf16, fp16 or fp32 tensor, got {x.dtype} of shape {tuple(x.shape)}")
    check_device(x, what="x")
    if x.stride(-1) != 1:
        x = x.contiguous()
    M, K = x.shape
    values = torch.empty((M, K), dtype=E4M3, device=x.device)
    scales = torch.empty((M,), dtype=torch.float32, device=x.device)
    if M == 0 or K == 0:
        return values, scales.fill_(1e-12 / 448.0)
    rows = 2 if triton_mode() == "interpreter" else 4
    block_k = min(triton.next_power_of_2(K), 64 if triton_mode() == "interpreter" else 1024)
    _fp8_quantize_rows_kernel[(triton.cdiv(M, rows),)](
        x, values, scales, M, K, x.stride(0), ROWS=rows, BLOCK_K=block_k, num_warps=4
    )
    return values, scales


# ----------------------------------------------------------------------------------------------
# The fused gate+up GEMM
# ----------------------------------------------------------------------------------------------


def _check_fp8_args(x: object, w: object, ws: object, out_dtype: object) -> None:
    for name, t in (("x", x), ("w_values_packed", w), ("w_scales_packed", ws)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if w.dtype != E4M3 or w.dim() != 2 or w.shape[0] % 2 or w.shape[0] == 0:
        raise ValueError(
            f"w_values_packed must be a 2-D e4m3 (torch.float8_e4m3fn) tensor [2*hidden, dim], rows packed by "
            f"pack_gate_up, got {w.dtype} of shape {tuple(w.shape)}"
        )
    K = w.shape[1]
    if K == 0 or K % 16:
        raise ValueError(f"dim must be a positive multiple of 16 for e4m3 products (16-byte rows), got {K}")
    if ws.dtype != torch.float32 or ws.numel() != w.shape[0] or ws.dim() not in (1, 2) or ws.shape[0] != w.shape[0]:
        raise ValueError(
            f"w_scales_packed must be float32 with one scale per weight row ([{w.shape[0]}] or [{w.shape[0]}, 1]), "
            f"got {ws.dtype} of shape {tuple(ws.shape)}"
        )
    if x.dim() == 0 or x.shape[-1] != K:
        raise ValueError(f"x's last dimension must equal the weight's dim ({K}), got x of shape {tuple(x.shape)}")
    if x.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise TypeError(f"x must be bf16, fp16 or fp32 (it is quantized here), got {x.dtype}")
    if out_dtype not in (torch.bfloat16, torch.float16):
        raise TypeError(f"out_dtype must be torch.bfloat16 or torch.float16, got {out_dtype}")
    check_device(x, w, ws, what="x, w_values_packed and w_scales_packed")
    if x.device.type == "cuda" and triton_mode() == "cuda":
        cap = torch.cuda.get_device_capability(x.device)
        if cap < (8, 9):
            raise ValueError(
                f"e4m3 tensor-core products need compute capability 8.9 or newer (Ada, Hopper), this GPU has "
                f"{cap[0]}.{cap[1]}: use the bf16 gate_up_geglu"
            )


def fp8_gate_up_geglu_fused(
    x: torch.Tensor,
    w_values_packed: torch.Tensor,
    w_scales_packed: torch.Tensor,
    *,
    out_dtype: torch.dtype = torch.bfloat16,
    kernel: str = "auto",
    config: triton.Config | None = None,
) -> torch.Tensor:
    """``gelu_tanh(x @ Wg.T) * (x @ Wu.T)`` with the GEMM in e4m3 and the GeGLU in its epilogue.

    ``x``: ``[..., dim]`` (bf16/fp16/fp32, quantized per row here); ``w_values_packed``:
    ``[2*hidden, dim]`` e4m3, rows interleaved gate/up (``quantize_rows(pack_gate_up(wg, wu))``);
    ``w_scales_packed``: its float32 row scales (``[2*hidden]`` or ``[2*hidden, 1]``). Returns
    ``[..., hidden]`` in ``out_dtype`` (a view with a padded row stride when ``hidden`` is not
    16-byte aligned on the TMA path). ``kernel``: ``"auto"`` (TMA on Hopper), ``"tma"``,
    ``"pointer"``; ``config``: a tile ``triton.Config`` (sweeps), else :func:`fp8_configs`.
    """
    _check_fp8_args(x, w_values_packed, w_scales_packed, out_dtype)
    K = w_values_packed.shape[1]
    H = w_values_packed.shape[0] // 2
    x2 = x.reshape(-1, K)
    if x2.shape[0] == 0:
        return x.new_empty((*x.shape[:-1], H), dtype=out_dtype)
    xq, sx = quantize_rows_fp8(x2)
    w = w_values_packed.contiguous()
    sw = w_scales_packed.reshape(-1).contiguous()
    key = (
        "forward_fp8",
        xq.shape,
        xq.device,
        w.shape,
        w.data_ptr() % 16 == 0,
        out_dtype,
        kernel,
        None if config is None else id(config),
    )
    plan = _PLANS.get(key)
    if plan is None:
        build, configs, source, shape = _forward_plan(xq, w, None, False, kernel, config, fp8=(out_dtype, fp8_configs))
        out, _ = _forward_outputs(shape, xq)
        plan = launch_first(build, configs, source, key, (xq, w, out, w, sx, sw))
    else:
        out, _ = _forward_outputs(plan.shape, xq)
        plan.launch(xq, w, out, w, sx, sw)  # bias slot: any pointer, never read (HAS_BIAS=False)
    return out.reshape(*x.shape[:-1], H) if x.dim() != 2 else out
