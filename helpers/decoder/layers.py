"""Change how the decoder computes: the course's kernels, MLP recomputation, compiled blocks.
The course's Triton kernels are imported only when a swap asks for them.
"""

from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..attention.backends import force_backend
from ..attention.model import ATTENTION_IMPLS
from ..mlp.model import SimpleGeGLUMLP
from .model import Decoder, build_model

MLP_KINDS = ("eager", "course", "fused")


class Recomputed(nn.Module):
    """Runs `inner` under ``torch.utils.checkpoint`` when training; directly without gradients."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled() and x.requires_grad:
            return checkpoint(self.inner, x, use_reentrant=False)
        return self.inner(x)


class RunsEager(nn.Module):
    """`inner` run eagerly inside a compiled region, a deliberate graph break: the course's Triton layers keep
    their own launch plans while compile fuses what is around them."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        # wrapped here, not with a decorator: a decorator would import torch._dynamo (and Triton) with this
        # module, for every eager model too
        self._eager = torch.compiler.disable(self._run)

    def _run(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._eager(x)


def _course_mlp(mlp: nn.Module, kind: str, recompute: bool) -> tuple[nn.Module, bool]:
    """The course's layer for `mlp`, and whether it recomputes by itself (else the caller wraps it)."""
    from ..kernels.modules import CourseGeGLUMLP, FusedGeGLUMLP  # Triton: only when a course kernel is asked for

    if kind == "course":
        return CourseGeGLUMLP.from_module(mlp, concat=True), False
    if recompute and "mode" in inspect.signature(FusedGeGLUMLP.from_module).parameters:
        return FusedGeGLUMLP.from_module(mlp, mode="recompute"), True
    return FusedGeGLUMLP.from_module(mlp), False


def swap_layers(
    model: Decoder,
    mlp: str = "eager",
    attention: str | None = None,
    fused_qkv: bool = False,
    recompute: bool = False,
    decode_gemv: bool = False,
) -> Decoder:
    """Replace the layers of every block of a freshly built `model` in place, weights carried over; returns it.
    ``decode_gemv`` runs batch-1 decode steps through the course's GEMV kernels (needs ``mlp="course"`` and
    ``fused_qkv``); every other call keeps the layers chosen here."""
    if not isinstance(model, Decoder):
        raise TypeError(f"model must be a helpers Decoder (build_model), got {type(model).__name__}")
    if mlp not in MLP_KINDS:
        raise ValueError(f"mlp must be one of {MLP_KINDS}, got {mlp!r}")
    if attention is not None and attention not in ATTENTION_IMPLS:
        raise ValueError(f"attention must be one of {ATTENTION_IMPLS} or None (keep), got {attention!r}")
    if decode_gemv and (mlp != "course" or not fused_qkv or recompute):
        raise ValueError(
            "decode_gemv reads one QKV weight and one [gate; up] weight: give mlp='course' and fused_qkv=True "
            f"(and no recompute), got mlp={mlp!r}, fused_qkv={fused_qkv}, recompute={recompute}"
        )
    for i, block in enumerate(model.layers):
        if not isinstance(block.mlp, SimpleGeGLUMLP):
            raise ValueError(
                f"block {i} already has a {type(block.mlp).__name__} MLP: swap_layers starts from the eager "
                "SimpleGeGLUMLP. Build a fresh model (build_model with the same seed gives the same weights)."
            )
    for block in model.layers:
        new, recomputes_itself = (block.mlp, False) if mlp == "eager" else _course_mlp(block.mlp, mlp, recompute)
        block.mlp = Recomputed(new) if recompute and not recomputes_itself else new
        if fused_qkv:
            block.attention = block.attention.with_fused_qkv()
        if attention is not None:
            block.attention.attn_impl = attention
    if decode_gemv:
        from .gemv_block import GEMVDecodeBlock  # Triton: only when the GEMV decode step is asked for

        for i, block in enumerate(model.layers):
            model.layers[i] = GEMVDecodeBlock.from_block(block)
    return model


RECOMPILE_LIMIT = 64  # compiled versions kept per block: prefill, decode, training, per configuration


def compile_blocks(model: Decoder, mode: str | None = None, dynamic: bool | None = False) -> Decoder:
    """``torch.compile`` every block in place (regional; embedding and LM head stay eager), ``dynamic=False``;
    returns `model`. All blocks share one compiled function, so Dynamo's recompile limit is raised."""
    if not isinstance(model, Decoder):
        raise TypeError(f"model must be a helpers Decoder (build_model), got {type(model).__name__}")
    config = torch._dynamo.config
    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    setattr(config, name, max(getattr(config, name), RECOMPILE_LIMIT))
    for block in model.layers:
        inner = block.mlp.inner if isinstance(block.mlp, (Recomputed, RunsEager)) else block.mlp
        if not isinstance(inner, SimpleGeGLUMLP) and not isinstance(block.mlp, RunsEager):
            block.mlp = RunsEager(block.mlp)  # a course kernel layer
        if block.attention.attn_impl == "course" and "attend" not in vars(block.attention):
            # the block's own attend() would launch the course's Triton kernel: run it as it is
            block.attention.attend = torch.compiler.disable(block.attention.attend)
        block.compile(mode=mode, dynamic=dynamic)
    return model


@dataclass(frozen=True)
class Configuration:
    """A named way to build the decoder and run it (decode replayed from a CUDA graph, SDPA forced to a backend)."""

    name: str = "eager"
    mlp: str = "eager"
    attention: str = "sdpa"
    fused_qkv: bool = False
    recompute: bool = False
    compiled: bool = False
    graph: bool = False
    sdpa_backend: str | None = None
    decode_gemv: bool = False  # batch-1 decode steps through the course's GEMV kernels (swap_layers)

    def build(self, config, device=None, dtype=None, seed: int = 0) -> Decoder:
        """A fresh model with this configuration's layers (compiled blocks when `compiled`)."""
        model = build_model(config, device, dtype, seed)
        swap_layers(
            model,
            mlp=self.mlp,
            attention=self.attention,
            fused_qkv=self.fused_qkv,
            recompute=self.recompute,
            decode_gemv=self.decode_gemv,
        )
        return compile_blocks(model) if self.compiled else model

    def running(self) -> contextlib.AbstractContextManager:
        """The context every call of this configuration runs in (a forced SDPA backend, or nothing)."""
        return force_backend(self.sdpa_backend) if self.sdpa_backend else contextlib.nullcontext()
