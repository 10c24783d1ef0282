"""Autograd Functions of the fused GeGLU MLP. ``"save"`` keeps ``gu`` and ``h`` for the backward, ``"recompute"``
only ``x``; the backward overwrites ``gu`` in place, so ``save`` refuses a second backward through one graph."""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable
from torch.nn import functional as F

from .gate_up import gate_up_forward, geglu_backward_gemm

__all__ = ["MODES", "GeGLUMLPFunction", "GateUpGeGLUFunction", "check_mode"]

MODES = ("save", "recompute")


def check_mode(mode: object) -> str:
    """`mode` if it is one of :data:`MODES`, else a ValueError that lists them."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES} (what the backward keeps), got {mode!r}")
    return str(mode)


class GeGLUMLPFunction(torch.autograd.Function):
    """``y = F.linear(gelu_tanh(x @ Wg.T + bg) * (x @ Wu.T + bu), W_down, b_down)`` with a fused backward:
    ``apply(x, w_packed, b_packed, w_down, b_down, mode)``."""

    @staticmethod
    def forward(ctx, x, w_packed, b_packed, w_down, b_down, mode):  # type: ignore[override]
        save = check_mode(mode) == "save"
        x2 = x.reshape(-1, x.shape[-1])
        h, gu = gate_up_forward(x2, w_packed, b_packed, store_gu=save)
        y = F.linear(h, w_down, b_down)
        ctx.mode, ctx.x_shape, ctx.consumed = mode, x.shape, False
        ctx.has_b_packed, ctx.has_b_down = b_packed is not None, b_down is not None
        if save:
            ctx.save_for_backward(x2, w_packed, b_packed, w_down, gu, h)
        else:
            ctx.save_for_backward(x2, w_packed, b_packed, w_down)
        return y.reshape(*x.shape[:-1], y.shape[-1])

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):  # type: ignore[override]
        dy2 = dy.reshape(-1, dy.shape[-1])
        if not dy2.is_contiguous():  # e.g. the expanded ones of y.sum().backward()
            dy2 = dy2.contiguous()
        if ctx.mode == "save":
            if ctx.consumed:
                raise RuntimeError(
                    "FusedGeGLUMLP in mode='save' overwrote its saved activations during the first backward; "
                    "to backward twice through one graph (retain_graph=True), use mode='recompute'"
                )
            x2, w_packed, b_packed, w_down, gu, h = ctx.saved_tensors
            ctx.consumed = True
            dgu, _ = geglu_backward_gemm(dy2, w_down, gu, dgu=gu)
        else:
            x2, w_packed, b_packed, w_down = ctx.saved_tensors
            gu = F.linear(x2, w_packed, b_packed)  # recompute: one cuBLAS GEMM
            dgu, h = geglu_backward_gemm(dy2, w_down, gu, dgu=gu, store_h=True)
        need_x, need_wp, need_bp, need_wd, need_bd, _ = ctx.needs_input_grad
        dw_down = dy2.t() @ h if need_wd else None
        db_down = dy2.sum(0) if need_bd and ctx.has_b_down else None
        del h
        dx = (dgu @ w_packed).reshape(ctx.x_shape) if need_x else None
        dw_packed = dgu.t() @ x2 if need_wp else None
        db_packed = dgu.sum(0) if need_bp and ctx.has_b_packed else None
        return dx, dw_packed, db_packed, dw_down, db_down, None


class GateUpGeGLUFunction(torch.autograd.Function):
    """Differentiable :func:`gate_up_geglu` alone: ``apply(x, w_packed, b_packed)``; backward from the stored ``gu``."""

    @staticmethod
    def forward(ctx, x, w_packed, b_packed):  # type: ignore[override]
        x2 = x.reshape(-1, x.shape[-1])
        h, gu = gate_up_forward(x2, w_packed, b_packed, store_gu=True)
        ctx.x_shape, ctx.has_bias = x.shape, b_packed is not None
        ctx.save_for_backward(x2, w_packed, gu)
        return h.reshape(*x.shape[:-1], h.shape[-1])

    @staticmethod
    @once_differentiable
    def backward(ctx, dh):  # type: ignore[override]
        x2, w_packed, gu = ctx.saved_tensors
        dh = dh.reshape(-1, dh.shape[-1]).float()
        gate, up = gu.float().unflatten(-1, (-1, 2)).unbind(-1)
        # gelu_tanh(g) = g * s, s = sigmoid(2z), 2z = g (k0 + k1 g^2): the kernels' formula.
        k0, k1 = 1.5957691216057308, 0.0713548162726009
        s = torch.sigmoid(gate * (k0 + k1 * gate * gate))
        dgelu = s + gate * s * (1 - s) * (k0 + 3 * k1 * gate * gate)
        dgu = torch.stack((dh * up * dgelu, dh * gate * s), dim=-1).flatten(-2).to(gu.dtype)
        dx = (dgu @ w_packed).reshape(ctx.x_shape) if ctx.needs_input_grad[0] else None
        dw = dgu.t() @ x2 if ctx.needs_input_grad[1] else None
        db = dgu.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return dx, dw, db
