"""Launcher of the backward GEMM with a GeGLU-backward epilogue: ``dh = dy @ W_down`` never reaches memory."""

from __future__ import annotations

import torch
import triton

from ..triton_env import check_device
from .gate_up_choice import choose_path, configs_for, launch_first, padded_cols, programs, tma_aligned
from .gate_up_kernels import _geglu_backward_gemm_kernel, _geglu_backward_gemm_tma_kernel
from .geglu_pointwise import SUPPORTED_DTYPES
from .launch_plans import LaunchPlan, TensorDescriptor, plan_cache

__all__ = ["geglu_backward_gemm"]


def _check_backward_args(dy: object, w_down: object, gu: object, dgu: object) -> None:
    for name, t in (("dy", dy), ("w_down", w_down), ("gu", gu)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    assert isinstance(dy, torch.Tensor) and isinstance(w_down, torch.Tensor) and isinstance(gu, torch.Tensor)
    if dy.dim() != 2 or w_down.dim() != 2 or gu.dim() != 2:
        raise ValueError(
            f"dy [M, dim], w_down [dim, hidden] and gu [M, 2*hidden] must be 2-D, got "
            f"{tuple(dy.shape)}, {tuple(w_down.shape)}, {tuple(gu.shape)}"
        )
    M, D = dy.shape
    if w_down.shape[0] != D or gu.shape != (M, 2 * w_down.shape[1]):
        raise ValueError(
            f"shapes do not fit: dy {tuple(dy.shape)} needs w_down [{D}, hidden] and gu [{M}, 2*hidden]; "
            f"got w_down {tuple(w_down.shape)}, gu {tuple(gu.shape)}"
        )
    if not (dy.dtype == w_down.dtype == gu.dtype) or dy.dtype not in SUPPORTED_DTYPES:
        raise ValueError(
            f"dy, w_down and gu must share one of {SUPPORTED_DTYPES}, got {dy.dtype}, {w_down.dtype}, {gu.dtype}"
        )
    if dgu is not None:
        if not isinstance(dgu, torch.Tensor) or dgu.shape != gu.shape or dgu.dtype != gu.dtype:
            raise ValueError("dgu must be a tensor of gu's shape and dtype (or gu itself, to write in place)")
        if dgu.stride() != gu.stride():
            raise ValueError("dgu must have gu's strides")
    for name, t in (("dy", dy), ("w_down", w_down), ("gu", gu)):
        if t.stride(-1) != 1:
            raise ValueError(f"{name} must be contiguous in its last dimension (stride 1), got {tuple(t.stride())}")
    check_device(dy, w_down, gu, what="dy, w_down and gu")


def geglu_backward_gemm(
    dy: torch.Tensor,
    w_down: torch.Tensor,
    gu: torch.Tensor,
    *,
    dgu: torch.Tensor | None = None,
    store_h: bool = False,
    kernel: str = "auto",
    config: triton.Config | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(dgu, h)`` for ``y = h @ w_down.T`` from the interleaved pre-activations ``gu``; ``dgu`` is interleaved like
    ``gu`` (so ``dgu.T @ x`` is the packed weight's gradient) and may be written over ``gu``."""
    _check_backward_args(dy, w_down, gu, dgu)  # cheap next to a backward GEMM
    M, D = dy.shape
    H = w_down.shape[1]
    out = dgu if dgu is not None else _like_padded(gu, M, 2 * H)
    if M == 0 or H == 0:
        return out, (dy.new_empty((M, H)) if store_h else None)
    key = (
        "backward",
        dy.shape,
        dy.dtype,
        dy.device,
        dy.stride(),
        gu.stride(),
        w_down.stride(),
        tma_aligned(dy),
        tma_aligned(w_down),
        tma_aligned(gu),
        tma_aligned(out),
        tuple(t.data_ptr() % 16 == 0 for t in (dy, w_down, gu, out)),  # pointers are specialised on it
        store_h,
        kernel,
        None if config is None else id(config),
    )
    plan = plan_cache().get(key)
    path = plan.path if plan is not None else choose_path(kernel, (dy, w_down, gu, out), dy)
    h = None
    if store_h:
        cols = padded_cols(H, dy.element_size()) if path == "tma" else H
        h = torch.empty((M, cols), dtype=dy.dtype, device=dy.device)[:, :H]
    tensors = (dy, w_down, gu, out) + ((h,) if store_h else ())
    if plan is not None:
        plan.launch(*tensors)
    else:
        launch_first(*_backward_plan(path, dy, w_down, gu, out, h, config), key, tensors)
    return out, h


def _like_padded(gu: torch.Tensor, M: int, cols: int) -> torch.Tensor:
    """A new [M, cols] tensor with gu's row stride (so one plan serves gu and its gradient)."""
    stride = max(gu.stride(0), cols) if M > 1 else padded_cols(cols, gu.element_size())
    return torch.empty((M, stride), dtype=gu.dtype, device=gu.device)[:, :cols]


def _backward_plan(path, dy, wd, gu, dgu, h, config):
    M, D = dy.shape
    H = wd.shape[1]
    shape = {
        "m": M,
        "n": H,
        "k": D,
        "hidden": H,
        "dtype": str(dy.dtype).removeprefix("torch."),
        "store_h": h is not None,
    }
    configs, source = configs_for("backward", path, M, H, D, dy.dtype, dy.device, config)
    precision = "ieee" if dy.dtype == torch.float32 else "tf32"
    common = {"M": M, "H": H, "D": D, "DOT_PRECISION": precision, "STORE_H": h is not None}

    def build(cfg: triton.Config, src: str) -> LaunchPlan:
        bm, bn, bk = cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"], cfg.kwargs["BLOCK_K"]
        grid = (programs(path, -(-M // bm) * -(-H // bn), dy.device),)
        runtime = (
            ["dy_desc", "wd_desc", "gu_desc", "dgu_desc"]
            if path == "tma"
            else ["dy_ptr", "wd_ptr", "gu_ptr", "dgu_ptr"]
        )
        values: dict = dict(common)
        if path == "tma":
            templates = {
                "dy_desc": TensorDescriptor.from_tensor(dy, [bm, bk]),
                "wd_desc": TensorDescriptor.from_tensor(wd, [bk, bn]),
                "gu_desc": TensorDescriptor.from_tensor(gu, [bm, 2 * bn]),
                "dgu_desc": TensorDescriptor.from_tensor(dgu, [bm, 2 * bn]),
            }
            if h is not None:
                templates["h_desc"] = TensorDescriptor.from_tensor(h, [bm, bn])
                runtime.append("h_desc")
            else:
                values["h_desc"] = None
            values["FLATTEN"] = True
            kern = _geglu_backward_gemm_tma_kernel
        else:
            templates = None
            values.update(
                stride_dym=dy.stride(0),
                stride_wdk=wd.stride(0),
                stride_gum=gu.stride(0),
                stride_dgum=dgu.stride(0),
                stride_hm=h.stride(0) if h is not None else 0,
                EVEN_K=D % bk == 0,
            )
            if h is not None:
                runtime.append("h_ptr")
            else:
                values["h_ptr"] = None
            kern = _geglu_backward_gemm_kernel
        return LaunchPlan.build("geglu_backward_gemm", kern, grid, cfg, src, path, values, runtime, templates, shape)

    return build, configs, source
