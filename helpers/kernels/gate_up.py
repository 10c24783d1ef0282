"""Gate+up GEMM with a GeGLU epilogue: weight packing and launchers. Only ``h = gelu_tanh(gate) * up`` reaches
memory; a launcher's checks and choices are made once per shape, so call once before a CUDA graph capture."""

from __future__ import annotations

import torch
import triton

from ..triton_env import check_device
from .gate_up_backward import geglu_backward_gemm
from .gate_up_choice import KERNELS, choose_path, configs_for, launch_first, padded_cols, programs
from .gate_up_kernels import _gate_up_geglu_kernel, _gate_up_geglu_tma_kernel
from .geglu_pointwise import SUPPORTED_DTYPES
from .launch_plans import LaunchPlan, TensorDescriptor, plan_cache

_PLANS = plan_cache()  # the same dict object for the life of the process (clear_plans empties it)

__all__ = ["pack_gate_up", "unpack_gate_up", "gate_up_geglu", "gate_up_forward", "geglu_backward_gemm", "KERNELS"]


def pack_gate_up(gate: torch.Tensor, up: torch.Tensor, group: int = 1) -> torch.Tensor:
    """Interleave two ``[H, ...]`` tensors (weights or biases) in blocks of ``group`` rows, gate then up, so one
    accumulator holds both and ``tl.reshape`` + ``tl.split`` separate them without a layout conversion."""
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


# Forward


def _check_forward_args(x: object, w_packed: object, b_packed: object) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if not isinstance(w_packed, torch.Tensor):
        raise TypeError(f"w_packed must be a torch.Tensor, got {type(w_packed).__name__}")
    if b_packed is not None and not isinstance(b_packed, torch.Tensor):
        raise TypeError(f"b_packed must be a torch.Tensor or None, got {type(b_packed).__name__}")
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
        if b_packed.shape != (w_packed.shape[0],) or b_packed.dtype != x.dtype:
            raise ValueError(
                f"b_packed must have shape ({w_packed.shape[0]},) and dtype {x.dtype}, "
                f"got {tuple(b_packed.shape)} {b_packed.dtype}"
            )
        tensors.append(b_packed)
    check_device(*tensors, what="x, w_packed" + (" and b_packed" if b_packed is not None else ""))


def _forward_key(x, w, b, store_gu, kernel, config) -> tuple:
    """What a forward plan depends on: shapes, dtypes, devices, contiguity, alignment, options."""
    return (
        "forward",
        x.shape,
        x.dtype,
        x.device,
        x.is_contiguous(),
        x.data_ptr() % 16 == 0,
        w.shape,
        w.dtype,
        w.device,
        w.is_contiguous(),
        w.data_ptr() % 16 == 0,
        None if b is None else (b.shape, b.dtype, b.device, b.data_ptr() % 16 == 0),
        store_gu,
        kernel,
        None if config is None else id(config),
    )


def gate_up_geglu(
    x: torch.Tensor,
    w_packed: torch.Tensor,
    b_packed: torch.Tensor | None = None,
    *,
    kernel: str = "auto",
    config: triton.Config | None = None,
) -> torch.Tensor:
    """``gelu_tanh(x @ Wg.T + bg) * (x @ Wu.T + bu)`` in one Triton kernel from the packed weight; ``[..., hidden]``
    (a view with a padded row stride when not 16-byte aligned on the TMA path). fp32 uses IEEE dots, not tf32."""
    return gate_up_forward(x, w_packed, b_packed, kernel=kernel, config=config)[0]


def gate_up_forward(
    x: torch.Tensor,
    w_packed: torch.Tensor,
    b_packed: torch.Tensor | None = None,
    *,
    store_gu: bool = False,
    kernel: str = "auto",
    config: triton.Config | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(h, gu)``: :func:`gate_up_geglu`'s ``h`` and, with ``store_gu``, the interleaved pre-activations
    ``[M, 2*hidden]`` the backward needs (else None)."""
    try:
        key = _forward_key(x, w_packed, b_packed, store_gu, kernel, config)
    except (AttributeError, RuntimeError, TypeError):
        _check_forward_args(x, w_packed, b_packed)  # raises a clear error for what was wrong
        raise
    plan = _PLANS.get(key)
    K = w_packed.shape[1]
    x2 = x if x.dim() == 2 else x.reshape(-1, K)
    if not x2.is_contiguous():
        x2 = x2.contiguous()
    w = w_packed if w_packed.is_contiguous() else w_packed.contiguous()
    bias = b_packed if b_packed is not None else w  # any pointer: never read when HAS_BIAS=False
    if plan is None:
        _check_forward_args(x, w_packed, b_packed)
        H = w.shape[0] // 2
        if x2.shape[0] == 0 or H == 0:
            return x.new_empty((*x.shape[:-1], H)), (x.new_empty((x2.shape[0], 2 * H)) if store_gu else None)
        build, configs, source, shape = _forward_plan(x2, w, b_packed, store_gu, kernel, config)
        out, gu = _forward_outputs(shape, x2)
        plan = launch_first(build, configs, source, key, (x2, w, out, bias) + ((gu,) if store_gu else ()))
    else:
        out, gu = _forward_outputs(plan.shape, x2)
        if store_gu:
            plan.launch(x2, w, out, bias, gu)
        else:
            plan.launch(x2, w, out, bias)
    h = out if x.dim() == 2 else out.reshape(*x.shape[:-1], out.shape[1])
    return h, gu


def _forward_outputs(shape: dict, x2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``h`` (and ``gu``) for a plan: new tensors, with a padded row stride where the plan says so."""
    M, H, cols = x2.shape[0], shape["hidden"], shape["out_cols"]
    out = torch.empty((M, cols), dtype=shape.get("out_dtype", x2.dtype), device=x2.device)
    if cols != H:
        out = out[:, :H]
    gu = None
    if shape["store_gu"]:
        gu = torch.empty((M, shape["gu_cols"]), dtype=x2.dtype, device=x2.device)
        if shape["gu_cols"] != 2 * H:
            gu = gu[:, : 2 * H]
    return out, gu


def _forward_plan(x2, w, b, store_gu, kernel, config, fp8=None):
    """``(build, configs, source, shape)`` for :func:`launch_first`; ``fp8``: None, or ``(out_dtype, configs_fn)``
    for e4m3 inputs with row scales (the FP8 benchmark's path)."""
    M, K = x2.shape
    N2 = w.shape[0]
    H = N2 // 2
    path = choose_path(kernel, (x2, w), x2)
    out_dtype = x2.dtype if fp8 is None else fp8[0]
    size = torch.empty((), dtype=out_dtype).element_size()
    shape = {
        "m": M,
        "n": N2,
        "k": K,
        "hidden": H,
        "dtype": str(x2.dtype).removeprefix("torch."),
        "store_gu": store_gu,
        "out_cols": padded_cols(H, size) if path == "tma" else H,
        "gu_cols": padded_cols(N2, size) if path == "tma" else N2,
    }
    if fp8 is None:
        kind = "forward_gu" if store_gu else "forward"
        configs, source = configs_for(kind, path, M, N2, K, x2.dtype, x2.device, config)
    else:
        shape["out_dtype"] = out_dtype
        configs, source = fp8[1](path, M, N2, x2.device, config)
    precision = "ieee" if x2.dtype == torch.float32 else "tf32"
    common = {"M": M, "N2": N2, "K": K, "HAS_BIAS": b is not None, "DOT_PRECISION": precision, "STORE_GU": store_gu}
    common["HAS_SCALES"] = fp8 is not None
    scale_slots = [] if fp8 is None else ["sx_ptr", "sw_ptr"]

    def build(cfg: triton.Config, src: str) -> LaunchPlan:
        bm, bn, bk = cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"], cfg.kwargs["BLOCK_K"]
        tiles = -(-M // bm) * -(-N2 // bn)
        grid = (programs(path, tiles, x2.device),)
        if path == "tma":
            out, gu = _forward_outputs(shape, x2[:1])  # one row: only strides and dtype matter
            templates = {
                "x_desc": TensorDescriptor(x2, [M, K], [K, 1], [bm, bk]),
                "w_desc": TensorDescriptor.from_tensor(w, [bn, bk]),
                "out_desc": TensorDescriptor(out, [M, H], [shape["out_cols"], 1], [bm, bn // 2]),
            }
            runtime = ["x_desc", "w_desc", "out_desc", "bias_ptr", *scale_slots]
            values = {**common, "FLATTEN": True}
            if store_gu:
                templates["gu_desc"] = TensorDescriptor(gu, [M, N2], [shape["gu_cols"], 1], [bm, bn])
                runtime.append("gu_desc")
            else:
                values["gu_desc"] = None
            return LaunchPlan.build(
                "gate_up_forward", _gate_up_geglu_tma_kernel, grid, cfg, src, path, values, runtime, templates, shape
            )
        values = {
            **common,
            "stride_xm": K,
            "stride_wn": K,
            "stride_om": shape["out_cols"],
            "stride_gm": shape["gu_cols"],
            "EVEN_K": K % bk == 0,
        }
        runtime = ["x_ptr", "w_ptr", "out_ptr", "bias_ptr", *scale_slots]
        if store_gu:
            runtime.append("gu_ptr")
        else:
            values["gu_ptr"] = None
        return LaunchPlan.build(
            "gate_up_forward", _gate_up_geglu_kernel, grid, cfg, src, path, values, runtime, None, shape
        )

    return build, configs, source, shape
