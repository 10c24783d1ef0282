"""The causal self-attention block the course profiles (07), reused by the decoder (08), with interchangeable
attention (SDPA, hand-written, the course's kernel) so each can be profiled in the same model."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..checks import positive_int, positive_number

ATTENTION_IMPLS = ("sdpa", "manual", "course")


@dataclass(frozen=True)
class AttentionConfig:
    """The sizes of an attention block, named as in ``transformers`` configs; fewer key/value heads than query
    heads is grouped-query attention."""

    hidden_size: int = 2048
    num_attention_heads: int = 16
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    rope_theta: float = 10000.0
    max_position_embeddings: int = 4096
    attention_bias: bool = False

    def __post_init__(self) -> None:
        positive_int("hidden_size", self.hidden_size)
        heads = positive_int("num_attention_heads", self.num_attention_heads)
        kv = positive_int("num_key_value_heads", self.kv_heads)
        if heads % kv:
            raise ValueError(f"num_attention_heads ({heads}) must be a multiple of num_key_value_heads ({kv})")
        if self.head_dim is None and self.hidden_size % heads:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) is not a multiple of num_attention_heads ({heads}): give head_dim"
            )
        positive_int("head_dim", self.dim_per_head)
        if self.dim_per_head % 2:
            raise ValueError(f"head_dim must be even for rotary embeddings, got {self.dim_per_head}")
        positive_number("rope_theta", self.rope_theta)
        positive_int("max_position_embeddings", self.max_position_embeddings)

    @property
    def kv_heads(self) -> int:
        return self.num_attention_heads if self.num_key_value_heads is None else self.num_key_value_heads

    @property
    def dim_per_head(self) -> int:
        return self.hidden_size // self.num_attention_heads if self.head_dim is None else self.head_dim

    @classmethod
    def from_config(cls, config: Any) -> AttentionConfig:
        """Read the attention sizes from any object with these attributes (a transformers config, a dict)."""
        if isinstance(config, AttentionConfig):
            return config
        get = config.get if isinstance(config, Mapping) else lambda name, default=None: getattr(config, name, default)
        missing = [a for a in ("hidden_size", "num_attention_heads") if get(a) is None]
        if missing:
            raise TypeError(
                f"config needs hidden_size and num_attention_heads (like a transformers config); "
                f"{type(config).__name__} lacks {missing}"
            )
        return cls(
            hidden_size=get("hidden_size"),
            num_attention_heads=get("num_attention_heads"),
            num_key_value_heads=get("num_key_value_heads"),
            head_dim=get("head_dim"),
            rope_theta=float(get("rope_theta", 10000.0) or 10000.0),
            max_position_embeddings=get("max_position_embeddings", 4096) or 4096,
            attention_bias=bool(get("attention_bias", False)),
        )


def future_mask(seq_q: int, seq_k: int, device: torch.device | str | None = None) -> torch.Tensor:
    """[seq_q, seq_k] bool, True where query i must NOT see key j (j > i + seq_k - seq_q)."""
    return torch.ones(seq_q, seq_k, dtype=torch.bool, device=device).triu(diagonal=seq_k - seq_q + 1)


def manual_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = True,
    scale: float | None = None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention as a textbook writes it, each step a separate op; ``mask`` is built here when None and ``causal``."""
    if k.shape[1] != q.shape[1]:  # grouped-query attention: each K/V head serves several query heads
        group = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale
    if causal:
        if mask is None:
            mask = future_mask(q.shape[-2], k.shape[-2], q.device)
        scores = scores.masked_fill(mask, float("-inf"))
    probs = scores.softmax(dim=-1)
    return probs @ v


class RotaryEmbedding(nn.Module):
    """cos and sin tables of the rotary embedding (Llama's "rotate half" layout), up to max_positions."""

    def __init__(self, head_dim: int, max_positions: int, base: float = 10000.0) -> None:
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        angles = torch.arange(max_positions, dtype=torch.float32)[:, None] * inv_freq[None, :]
        emb = torch.cat((angles, angles), dim=-1)  # [max_positions, head_dim]
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)
        self.max_positions = max_positions

    def forward(self, start: int, length: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin of positions start .. start + length - 1, as [length, head_dim] in `dtype`."""
        if start + length > self.max_positions:
            raise ValueError(
                f"positions up to {start + length} exceed max_position_embeddings ({self.max_positions}): "
                "build the block with a larger max_position_embeddings"
            )
        return self.cos[start : start + length].to(dtype), self.sin[start : start + length].to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """[x1, x2] -> [-x2, x1] along the last dimension."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each pair of features of `x` [batch, heads, seq, d] by its position's angle."""
    return x * cos + rotate_half(x) * sin


class KVCache:
    """Preallocated keys and values of one layer; :meth:`append` concatenates instead of writing in place when
    new keys need gradients (autograd saved the earlier ones)."""

    def __init__(self, batch: int, kv_heads: int, max_len: int, head_dim: int, device=None, dtype=None) -> None:
        shape = (
            positive_int("batch", batch),
            positive_int("kv_heads", kv_heads),
            positive_int("max_len", max_len),
            positive_int("head_dim", head_dim),
        )
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.length = 0
        self._with_grad: tuple[torch.Tensor, torch.Tensor] | None = None  # filled k, v carrying autograd history

    @property
    def max_len(self) -> int:
        return self.k.shape[2]

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store `k`, `v` ([batch, kv_heads, new, head_dim]) after the filled positions; return all filled."""
        new = k.shape[2]
        if k.shape[:2] != self.k.shape[:2] or k.shape[3] != self.k.shape[3] or v.shape != k.shape:
            raise ValueError(
                f"cache holds {tuple(self.k.shape)}, got keys {tuple(k.shape)} and values {tuple(v.shape)}"
            )
        if self.length + new > self.max_len:
            raise ValueError(f"the cache holds {self.max_len} positions; {self.length} used, {new} more do not fit")
        start, end = self.length, self.length + new
        self.length = end
        if torch.is_grad_enabled() and (k.requires_grad or v.requires_grad):
            old_k, old_v = self._with_grad or (self.k[:, :, :start], self.v[:, :, :start])
            self._with_grad = (torch.cat([old_k, k], dim=2), torch.cat([old_v, v], dim=2))
            return self._with_grad
        if self._with_grad is not None:  # back to no-grad decoding: move what was concatenated into the buffers
            self.k[:, :, :start], self.v[:, :, :start] = self._with_grad[0].detach(), self._with_grad[1].detach()
            self._with_grad = None
        self.k[:, :, start:end] = k
        self.v[:, :, start:end] = v
        return self.k[:, :, :end], self.v[:, :, :end]

    def reset(self) -> None:
        """Forget every position (the buffers are reused)."""
        self.length = 0
        self._with_grad = None


class CausalSelfAttention(nn.Module):
    """Causal self-attention: QKV projections, heads, RoPE, attention, output projection; with ``cache=`` the new
    positions follow the cached ones (decode: one token at a time)."""

    def __init__(self, config: Any, fused_qkv: bool = False, attn_impl: str = "sdpa") -> None:
        super().__init__()
        cfg = AttentionConfig.from_config(config)
        if attn_impl not in ATTENTION_IMPLS:
            raise ValueError(f"attn_impl must be one of {ATTENTION_IMPLS}, got {attn_impl!r}")
        self.config, self.fused_qkv, self.attn_impl = cfg, bool(fused_qkv), attn_impl
        self.num_heads, self.num_kv_heads, self.head_dim = cfg.num_attention_heads, cfg.kv_heads, cfg.dim_per_head
        q_out, kv_out = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        if self.fused_qkv:
            self.qkv_proj = nn.Linear(cfg.hidden_size, q_out + 2 * kv_out, bias=cfg.attention_bias)
        else:
            self.q_proj = nn.Linear(cfg.hidden_size, q_out, bias=cfg.attention_bias)
            self.k_proj = nn.Linear(cfg.hidden_size, kv_out, bias=cfg.attention_bias)
            self.v_proj = nn.Linear(cfg.hidden_size, kv_out, bias=cfg.attention_bias)
        self.o_proj = nn.Linear(q_out, cfg.hidden_size, bias=cfg.attention_bias)
        self.rotary = RotaryEmbedding(self.head_dim, cfg.max_position_embeddings, cfg.rope_theta)

    def new_cache(self, batch: int, max_len: int | None = None, device=None, dtype=None) -> KVCache:
        """An empty :class:`KVCache` for this block (default: max_position_embeddings long, on the weights' device)."""
        weight = self.o_proj.weight
        return KVCache(
            batch,
            self.num_kv_heads,
            max_len or self.config.max_position_embeddings,
            self.head_dim,
            device=device or weight.device,
            dtype=dtype or weight.dtype,
        )

    def project_qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q [b, heads, s, d], k and v [b, kv_heads, s, d]: strided views of the projections (no copy)."""
        if self.fused_qkv:
            return self.split_qkv(self.qkv_proj(x))
        return self._heads(self.q_proj(x), self.k_proj(x), self.v_proj(x))

    def split_qkv(self, qkv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The fused projection's output ``[b, s, (heads + 2 kv_heads) d]`` as :meth:`project_qkv`'s q, k, v views."""
        q_size, kv_size = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        return self._heads(*qkv.split([q_size, kv_size, kv_size], dim=-1))

    def _heads(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, ...]:
        b, s, _ = q.shape
        q = q.view(b, s, self.num_heads, self.head_dim).transpose(1, 2)
        k = k.view(b, s, self.num_kv_heads, self.head_dim).transpose(1, 2)
        v = v.view(b, s, self.num_kv_heads, self.head_dim).transpose(1, 2)
        return q, k, v

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Causal attention of q [b, h, sq, d] over k, v [b, kv, sk, d], the diagonal at the bottom right."""
        sq, sk = q.shape[2], k.shape[2]
        if self.attn_impl == "course":
            from ..kernels.flash_attention import FlashAttentionFunction  # Triton only when asked for

            return FlashAttentionFunction.apply(q, k, v, True, None)
        if self.attn_impl == "manual":
            return manual_attention(q, k, v, causal=True)
        gqa = {"enable_gqa": True} if self.num_kv_heads != self.num_heads else {}
        if sq == sk:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa)
        if sq == 1:  # one new token sees every cached position
            return F.scaled_dot_product_attention(q, k, v, **gqa)
        visible = ~future_mask(sq, sk, q.device)  # a chunk of new tokens after a cache
        return F.scaled_dot_product_attention(q, k, v, attn_mask=visible, **gqa)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        if x.dim() != 3 or x.shape[-1] != self.config.hidden_size:
            raise ValueError(f"x must be [batch, seq, {self.config.hidden_size}], got {tuple(x.shape)}")
        b, s, _ = x.shape
        start = cache.length if cache is not None else 0
        q, k, v = self.project_qkv(x)
        cos, sin = self.rotary(start, s, q.dtype)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if cache is not None:
            k, v = cache.append(k, v)
        out = self.attend(q, k, v)
        return self.o_proj(out.transpose(1, 2).reshape(b, s, self.num_heads * self.head_dim))

    def with_fused_qkv(self) -> CausalSelfAttention:
        """The same block (same weights, same outputs) with q, k and v projected by one GEMM."""
        if self.fused_qkv:
            return self
        fused = CausalSelfAttention(self.config, fused_qkv=True, attn_impl=self.attn_impl)
        fused = fused.to(device=self.o_proj.weight.device, dtype=self.o_proj.weight.dtype)
        with torch.no_grad():
            fused.qkv_proj.weight.copy_(torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight]))
            if self.config.attention_bias:
                fused.qkv_proj.bias.copy_(torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias]))
            fused.o_proj.load_state_dict(self.o_proj.state_dict())
        return fused.train(self.training)

    def extra_repr(self) -> str:
        return (
            f"heads={self.num_heads}, kv_heads={self.num_kv_heads}, head_dim={self.head_dim}, "
            f"fused_qkv={self.fused_qkv}, attn_impl={self.attn_impl!r}"
        )
