"""Change how the decoder computes, layer by layer: the course's kernels, MLP recomputation, compile by region.

- :func:`swap_layers`: in place, on a freshly built model. ``mlp="course"`` turns every
  ``SimpleGeGLUMLP`` into ``CourseGeGLUMLP.from_module(mlp, concat=True)`` (one GEMM for gate and
  up, the course's GeGLU kernel); ``mlp="fused"`` into ``FusedGeGLUMLP.from_module(mlp)`` (the
  fused gate+up GEMM with a GeGLU epilogue); ``fused_qkv=True`` uses the attention block's own
  ``with_fused_qkv()``; ``attention=`` sets its implementation (``"sdpa"``, ``"manual"``,
  ``"course"``); ``recompute=True`` makes training keep only each MLP's input and recompute the rest
  in the backward: the fused layer's own ``recompute`` mode where the layer has one, else
  ``torch.utils.checkpoint`` around the layer (:class:`Recomputed`).
- :func:`compile_blocks`: ``torch.compile`` each decoder block (regional compilation: the 16 blocks
  share one compiled graph, so compiling costs one block's time, not the model's); the course's
  kernel layers run as they are inside the compiled blocks (:class:`RunsEager`).
- :func:`describe_layers`: what each block is now made of, as a table.
"""

from __future__ import annotations

import inspect
from collections import Counter

import pandas as pd
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..attention.model import ATTENTION_IMPLS
from ..kernels.modules import CourseGeGLUMLP, FusedGeGLUMLP
from ..mlp.model import SimpleGeGLUMLP
from .model import Decoder

MLP_KINDS = ("eager", "course", "fused")


class Recomputed(nn.Module):
    """Runs `inner` under ``torch.utils.checkpoint``: the backward keeps only the input and recomputes the rest.

    Without gradients (inference) it calls `inner` directly.
    """

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled() and x.requires_grad:
            return checkpoint(self.inner, x, use_reentrant=False)
        return self.inner(x)


class RunsEager(nn.Module):
    """`inner` called as it is inside a compiled region (``torch.compiler.disable``): a deliberate graph break.

    The course's Triton layers carry launchers with their own plans and caches; they run as written
    while ``torch.compile`` fuses everything around them.
    """

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    @torch.compiler.disable
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)


def _fused_mlp(mlp: nn.Module, recompute: bool) -> tuple[nn.Module, bool]:
    """``FusedGeGLUMLP.from_module(mlp)``, in ``recompute`` mode when asked and the layer has modes.

    Returns the layer and whether it recomputes by itself (else the caller wraps it).
    """
    if recompute and "mode" in inspect.signature(FusedGeGLUMLP.from_module).parameters:
        return FusedGeGLUMLP.from_module(mlp, mode="recompute"), True
    return FusedGeGLUMLP.from_module(mlp), False


def swap_layers(
    model: Decoder,
    mlp: str = "eager",
    attention: str | None = None,
    fused_qkv: bool = False,
    recompute: bool = False,
) -> Decoder:
    """Replace the layers of every block of `model` in place (see the module docstring); returns `model`.

    The model must still have its eager MLPs (a freshly built one): build another model to change
    an MLP twice. Weights are carried over, so outputs agree up to rounding.
    """
    if not isinstance(model, Decoder):
        raise TypeError(f"model must be a helpers Decoder (helpers.build_model), got {type(model).__name__}")
    if mlp not in MLP_KINDS:
        raise ValueError(f"mlp must be one of {MLP_KINDS}, got {mlp!r}")
    if attention is not None and attention not in ATTENTION_IMPLS:
        raise ValueError(f"attention must be one of {ATTENTION_IMPLS} or None (keep), got {attention!r}")
    for i, block in enumerate(model.layers):
        if not isinstance(block.mlp, SimpleGeGLUMLP):
            raise ValueError(
                f"block {i} already has a {type(block.mlp).__name__} MLP: swap_layers starts from the eager "
                "SimpleGeGLUMLP. Build a fresh model (helpers.build_model with the same seed gives the same weights)."
            )
    for block in model.layers:
        new: nn.Module = block.mlp
        recomputes_itself = False
        if mlp == "course":
            new = CourseGeGLUMLP.from_module(block.mlp, concat=True)
        elif mlp == "fused":
            new, recomputes_itself = _fused_mlp(block.mlp, recompute)
        if recompute and not recomputes_itself:
            new = Recomputed(new)
        block.mlp = new
        if fused_qkv:
            block.attention = block.attention.with_fused_qkv()
        if attention is not None:
            block.attention.attn_impl = attention
    return model


def _is_course_layer(module: nn.Module) -> bool:
    return isinstance(module, (CourseGeGLUMLP, FusedGeGLUMLP))


RECOMPILE_LIMIT = 64  # compiled versions kept per block: prefill, decode, training, per configuration


def _allow_recompiles(limit: int = RECOMPILE_LIMIT) -> None:
    """Let one compiled block hold a version per shape and configuration (torch's default keeps 8, then runs eager)."""
    config = torch._dynamo.config
    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    setattr(config, name, max(getattr(config, name), limit))


def compile_blocks(model: Decoder, mode: str | None = None, dynamic: bool | None = False) -> Decoder:
    """``torch.compile`` every block of `model` in place (regional compilation); returns `model`.

    The embedding and the LM head stay eager (one op each). The course's kernel layers inside a
    block are wrapped in :class:`RunsEager` first, and a course attention implementation is left
    to run as it is too. `mode` and `dynamic` go to ``torch.compile`` (``dynamic=False``: one graph
    per shape, prefill and decode apart). Raises Dynamo's recompile limit to :data:`RECOMPILE_LIMIT`:
    all blocks share one compiled function, whose versions add up across shapes and models.
    """
    if not isinstance(model, Decoder):
        raise TypeError(f"model must be a helpers Decoder (helpers.build_model), got {type(model).__name__}")
    _allow_recompiles()
    for block in model.layers:
        inner = block.mlp.inner if isinstance(block.mlp, (Recomputed, RunsEager)) else block.mlp
        if _is_course_layer(inner) and not isinstance(block.mlp, RunsEager):
            block.mlp = RunsEager(block.mlp)
        if block.attention.attn_impl == "course" and "attend" not in vars(block.attention):
            # the block's own attend() would launch the course's Triton kernel: run it as it is
            block.attention.attend = torch.compiler.disable(block.attention.attend)
        block.compile(mode=mode, dynamic=dynamic)
    return model


def _mlp_name(mlp: nn.Module) -> str:
    names = []
    while isinstance(mlp, (Recomputed, RunsEager)):
        names.append(type(mlp).__name__)
        mlp = mlp.inner
    mode = getattr(mlp, "mode", None)
    inner = type(mlp).__name__ + (f"(mode={mode})" if mode else "")
    return "(".join([*names, inner]) + ")" * len(names)


def describe_layers(model: Decoder) -> pd.DataFrame:
    """One row per distinct block make-up: the MLP layer, the attention's implementation, fused QKV, compiled."""
    if not isinstance(model, Decoder):
        raise TypeError(f"model must be a helpers Decoder, got {type(model).__name__}")
    rows = Counter(
        (
            _mlp_name(block.mlp),
            block.attention.attn_impl,
            block.attention.fused_qkv,
            getattr(block, "_compiled_call_impl", None) is not None,
        )
        for block in model.layers
    )
    return pd.DataFrame(
        [{"blocks": n, "mlp": m, "attention": a, "fused_qkv": q, "compiled": c} for (m, a, q, c), n in rows.items()]
    )
