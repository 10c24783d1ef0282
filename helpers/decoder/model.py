"""A small Llama-style decoder from the course's blocks (notebook 08): each part runs in a ``record_function``
scope named after it (:data:`PARTS`), so a trace breaks down by part."""

from __future__ import annotations

import contextlib
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..attention.model import CausalSelfAttention, RotaryEmbedding, apply_rope, manual_attention
from ..checks import positive_int
from ..mlp.model import SimpleGeGLUMLP
from .config import DecoderConfig, get_config

# The record_function scope names, one per part of the model (what a trace breakdown groups by).
PARTS = ("embedding", "norm", "attention", "mlp", "residual", "lm_head", "loss")


_NO_SCOPE = contextlib.nullcontext()


def part(name: str) -> contextlib.AbstractContextManager:
    """``record_function(name)`` while a profiler records (and not under torch.compile); a no-op otherwise."""
    if torch.compiler.is_compiling():  # checked first: torch.compile sees a constant, traces no profiler call
        return contextlib.nullcontext()  # (a fresh one: every torch.compile version knows this constructor)
    if not torch.autograd._profiler_enabled():
        return _NO_SCOPE
    return torch.profiler.record_function(name)


class RMSNorm(nn.Module):
    """Root-mean-square norm as Llama's reference code writes it: float32 inside, then scaled by a weight."""

    def __init__(self, hidden_size: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(positive_int("hidden_size", hidden_size)))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(dtype)


class StaticLayerCache:
    """One layer's slot of a :class:`StaticCache`: its key and value buffers, and the cache they belong to."""

    def __init__(self, k: torch.Tensor, v: torch.Tensor, cache: StaticCache) -> None:
        self.k, self.v, self.cache = k, v, cache


class StaticCache:
    """Keys and values of every layer in fixed buffers, the position held on the device: shapes and addresses
    never change, so a CUDA graph can capture a decode step. :meth:`prepare` computes each step's masks once."""

    def __init__(self, config: DecoderConfig, batch: int, max_len: int, device=None, dtype=None) -> None:
        cfg = get_config(config)
        positive_int("batch", batch)
        if positive_int("max_len", max_len) > cfg.max_position_embeddings:
            raise ValueError(
                f"max_len {max_len} exceeds max_position_embeddings ({cfg.max_position_embeddings}) of config {cfg.name}"
            )
        shape = (batch, cfg.kv_heads, max_len, cfg.dim_per_head)
        self.k = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(cfg.num_hidden_layers)]
        self.v = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(cfg.num_hidden_layers)]
        self.position = torch.zeros((), dtype=torch.long, device=device)
        self.slots = [StaticLayerCache(k, v, self) for k, v in zip(self.k, self.v)]
        self.batch, self.max_len = batch, max_len
        self.positions = self.cos = self.sin = self.visible = None  # this step's, set by prepare()

    def prepare(self, length: int, rotary: RotaryEmbedding, dtype: torch.dtype) -> None:
        """The step's positions, rotary cos and sin (``[length, head_dim]``) and, for a decode step, its mask."""
        device = self.position.device
        self.positions = torch.arange(length, device=device) if length > 1 else self.position.view(1)
        self.cos = rotary.cos.index_select(0, self.positions).to(dtype)
        self.sin = rotary.sin.index_select(0, self.positions).to(dtype)
        # one new token sees every filled position: a mask over the whole buffer keeps the shapes fixed
        self.visible = None if length > 1 else torch.arange(self.max_len, device=device) <= self.position

    def reset(self) -> None:
        """Back to position 0 (the buffers are reused; a prefill overwrites them)."""
        self.position.zero_()

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.k, *self.v))


def attend_static(attn: CausalSelfAttention, x: torch.Tensor, slot: StaticLayerCache) -> torch.Tensor:
    """The attention block's forward against a :class:`StaticCache` slot (only the cache handling differs)."""
    q, k, v = attn.project_qkv(x)
    return attn.o_proj(attend_cached(attn, q, k, v, slot))


def attend_cached(
    attn: CausalSelfAttention, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, slot: StaticLayerCache
) -> torch.Tensor:
    """:func:`attend_static` between the projections: RoPE, the cache write, attention over the cache; the
    heads merged back to ``[b, s, heads * head_dim]`` for ``o_proj``."""
    b, s = q.shape[0], q.shape[2]
    step = slot.cache
    q, k = apply_rope(q, step.cos, step.sin), apply_rope(k, step.cos, step.sin)
    slot.k.index_copy_(2, step.positions, k)
    slot.v.index_copy_(2, step.positions, v)
    if s > 1:  # prefill: positions 0 .. s-1, causal attention within the prompt
        out = attn.attend(q, k, v)
    elif attn.attn_impl == "manual":
        out = manual_attention(q, slot.k, slot.v, causal=True, mask=~step.visible.view(1, -1))
    elif attn.attn_impl == "course":  # split-KV decode kernel: reads the position on the device, skips the rest
        from ..kernels.decode_attention import decode_attention_step  # Triton only when asked for

        out = decode_attention_step(q, slot.k, slot.v, step.position)
    else:  # a partly filled buffer needs SDPA's mask
        gqa = {"enable_gqa": True} if attn.num_kv_heads != attn.num_heads else {}
        out = F.scaled_dot_product_attention(q, slot.k, slot.v, attn_mask=step.visible.view(1, 1, 1, -1), **gqa)
    return out.transpose(1, 2).reshape(b, s, attn.num_heads * attn.head_dim)


class DecoderBlock(nn.Module):
    """``x + attention(norm(x))``, then ``x + mlp(norm(x))``."""

    def __init__(self, config: DecoderConfig) -> None:
        super().__init__()
        self.input_norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.attention = CausalSelfAttention(config)
        self.mlp_norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp: nn.Module = SimpleGeGLUMLP(config.hidden_size, config.intermediate_size)

    def forward(self, x: torch.Tensor, cache: StaticLayerCache | None = None) -> torch.Tensor:
        with part("norm"):
            h = self.input_norm(x)
        with part("attention"):
            h = self.attention(h) if cache is None else attend_static(self.attention, h, cache)
        with part("residual"):
            x = x + h
        with part("norm"):
            h = self.mlp_norm(x)
        with part("mlp"):
            h = self.mlp(h)
        with part("residual"):
            return x + h


class Decoder(nn.Module):
    """The whole model: ``Decoder(config)(tokens)`` -> logits; with a cache the tokens continue the cached ones."""

    def __init__(self, config: DecoderConfig | str) -> None:
        super().__init__()
        cfg = get_config(config)
        self.config = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderBlock(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        nn.init.normal_(self.embed_tokens.weight, std=0.02)  # small: the tied head's logits stay moderate

    def new_cache(self, batch: int, max_len: int) -> StaticCache:
        """A cache for `batch` sequences of up to `max_len` positions, on the model's device and dtype."""
        w = self.embed_tokens.weight
        return StaticCache(self.config, batch, max_len, device=w.device, dtype=w.dtype)

    def forward(self, tokens: torch.Tensor, cache: StaticCache | None = None, last_only: bool = False) -> torch.Tensor:
        if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.dtype not in (torch.long, torch.int):
            shape = tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else type(tokens).__name__
            raise ValueError(f"tokens must be a [batch, seq] tensor of token ids (torch.long), got {shape}")
        slots: list[Any] = cache.slots if cache is not None else [None] * len(self.layers)
        with part("embedding"):
            x = self.embed_tokens(tokens)
        if isinstance(cache, StaticCache):
            with part("attention"):  # the step's positions, rotary tables and mask, shared by every layer
                cache.prepare(tokens.shape[1], self.layers[0].attention.rotary, x.dtype)
        for block, slot in zip(self.layers, slots):
            x = block(x, slot)
        if isinstance(cache, StaticCache):
            if tokens.shape[1] > 1:
                cache.position.fill_(tokens.shape[1])
            else:
                cache.position.add_(1)
        if last_only:  # generation needs the next token only: the LM head on the last position
            x = x[:, -1:]
        with part("norm"):
            x = self.norm(x)
        with part("lm_head"):
            return F.linear(x, self.embed_tokens.weight)

    def loss(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross-entropy of the logits of `tokens` against `targets` (:func:`next_token_loss`)."""
        return next_token_loss(self(tokens), targets)

    def extra_repr(self) -> str:
        return self.config.describe()


def next_token_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``logits`` against ``targets`` in float32: a function of the logits, so a wrapped
    model (DDP) trains the same way."""
    if logits.dim() != 3 or targets.shape != logits.shape[:2]:
        raise ValueError(
            f"logits must be [batch, seq, vocab] and targets [batch, seq], got {tuple(logits.shape)} and {tuple(targets.shape)}"
        )
    with part("loss"):
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def build_model(
    config: DecoderConfig | str = "tiny",
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
    seed: int = 0,
) -> Decoder:
    """A :class:`Decoder` with random weights (the same for one `seed` on one kind of device: a GPU draws
    others); default CUDA in bf16, else CPU in float32."""
    from ..measure.workload import default_dtype, workload_device

    dev = workload_device(device)
    dt = dtype or default_dtype(dev)
    if not isinstance(dt, torch.dtype) or not dt.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype such as torch.bfloat16, got {dt!r}")
    torch.manual_seed(seed)
    with dev:
        model = Decoder(config)
    return model.to(dtype=dt)


def random_tokens(config: DecoderConfig | str, batch: int, seq: int, device=None, seed: int = 0) -> torch.Tensor:
    """``[batch, seq]`` random token ids (a batch of prompts, or training data), reproducible from `seed`."""
    cfg = get_config(config)
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, cfg.vocab_size, (positive_int("batch", batch), positive_int("seq", seq)), generator=g)
    return ids.to(device or "cpu")
