"""Batch-1 decode through the course's GEMV kernels (helpers/kernels/decode_gemv.py): a block's decode step
in four GEMVs, RMSNorm folded into the QKV and gate+up GEMVs, GeGLU into the down GEMV, the residual adds
into the O and down GEMVs. Triton is imported only when a block is built (the decoder's rule: the course's
kernels are imported inside functions), and :func:`helpers.decoder.layers.swap_layers` loads this module only when asked.
"""

from __future__ import annotations

import torch
from torch import nn

from .model import DecoderBlock, StaticLayerCache, attend_cached, part


# A graph break around each launch when the block is compiled: compile fuses what lies between the GEMVs
# (RoPE, the cache write, the mask) and the kernels run as they are, autotuned on their first call.
@torch.compiler.disable
def _gemv(*args, **kwargs) -> torch.Tensor:
    """:func:`helpers.kernels.decode_gemv.gemv`."""
    from ..kernels.decode_gemv import gemv

    return gemv(*args, **kwargs)


def _unwrapped(module: nn.Module) -> nn.Module:
    """The layer inside a ``RunsEager`` or ``Recomputed`` wrapper (helpers.decoder.layers), else the module."""
    return getattr(module, "inner", module)


class GEMVDecodeBlock(DecoderBlock):
    """A :class:`DecoderBlock` whose decode steps (one token at batch 1 against a static cache, no gradients)
    run four GEMV kernels with the norms, the GeGLU and the residual adds folded in; every other call
    (prefill, a forward without cache, training) runs :meth:`DecoderBlock.forward` as it is."""

    @classmethod
    def from_block(cls, block: DecoderBlock) -> GEMVDecodeBlock:
        """The same layers (shared, not copied: parameter names unchanged) behind the GEMV decode step. Needs the
        fused QKV projection and the course's concatenated gate+up MLP, all bias-free."""
        if not isinstance(block, DecoderBlock):
            raise TypeError(f"block must be a helpers DecoderBlock, got {type(block).__name__}")
        attn, mlp = block.attention, _unwrapped(block.mlp)
        if not attn.fused_qkv:
            raise ValueError("the GEMV decode step needs the fused QKV projection: swap_layers(..., fused_qkv=True)")
        if not all(hasattr(mlp, name) for name in ("gate_up_proj", "down_proj")):
            raise ValueError(
                f"the GEMV decode step needs one [gate; up] weight: swap_layers(..., mlp='course'), got {type(mlp).__name__}"
            )
        layers = (attn.qkv_proj, attn.o_proj, mlp.gate_up_proj, mlp.down_proj)
        if any(layer.bias is not None for layer in layers):
            raise ValueError("the GEMV decode step runs bias-free projections; this block has biases")
        from ..kernels import decode_gemv  # noqa: F401 - Triton's mode is fixed here, before a decode step

        new = cls.__new__(cls)
        nn.Module.__init__(new)
        new.input_norm, new.attention, new.mlp_norm, new.mlp = block.input_norm, attn, block.mlp_norm, block.mlp
        return new.train(block.training)

    def forward(self, x: torch.Tensor, cache: StaticLayerCache | None = None) -> torch.Tensor:
        if cache is None or x.shape[0] * x.shape[1] != 1 or torch.is_grad_enabled():
            return super().forward(x, cache)
        attn, mlp = self.attention, _unwrapped(self.mlp)
        norm1, norm2 = self.input_norm, self.mlp_norm
        with part("attention"):
            qkv = _gemv(x, attn.qkv_proj.weight, "rmsnorm", norm1.weight, norm1.eps)
            h = attend_cached(attn, *attn.split_qkv(qkv), cache)
            x = _gemv(h, attn.o_proj.weight, residual=x)  # x + o_proj(h) in one kernel
        with part("mlp"):  # ends with x + down(gelu(gate) * up)
            gate_up = _gemv(x, mlp.gate_up_proj.weight, "rmsnorm", norm2.weight, norm2.eps)
            return _gemv(gate_up, mlp.down_proj.weight, "geglu", residual=x)
