"""Planted training loops the diagnosis never saw while it was written (not notebook 10's): each returns a
step function and the rules that must find its planted problems on a CPU."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def conv_loop(seed: int = 0):
    """A small conv net: SiLU written by hand (neg, exp, add, reciprocal, mul per activation), SGD with momentum
    as a per-parameter for-loop, and the accuracy read with ``.cpu()`` every step (free on a CPU)."""
    torch.manual_seed(seed)
    layers = []
    for i in range(6):
        layers.append(torch.nn.Conv2d(3 if i == 0 else 16, 16, 3, padding=1))
    head = torch.nn.Linear(16, 10)
    params = [p for m in [*layers, head] for p in m.parameters()]
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9, weight_decay=1e-4, foreach=False)
    x = torch.randn(8, 3, 16, 16)
    y = torch.randint(0, 10, (8,))

    def silu_by_hand(t: torch.Tensor) -> torch.Tensor:
        return t * torch.reciprocal(1.0 + torch.exp(-t))

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        h = x
        for conv in layers:
            h = silu_by_hand(conv(h))
        logits = head(h.mean(dim=(2, 3)))
        loss = F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        (logits.argmax(1) == y).float().mean().cpu()

    return step, {"host_pointwise_chains", "unfused_optimizer"}


def attention_loop(seed: int = 0):
    """A transformer block with attention written by hand (q k^T, scale, softmax over [seq, seq], times v), a
    small batch, and a fused optimizer (nothing to fix there)."""
    torch.manual_seed(seed)
    dim, heads, seq = 64, 4, 128
    qkv = torch.nn.Linear(dim, 3 * dim)
    out = torch.nn.Linear(dim, dim)
    mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))
    norm1, norm2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
    params = [p for m in (qkv, out, mlp, norm1, norm2) for p in m.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-4, fused=True)
    x = torch.randn(2, seq, dim)

    def attend(h: torch.Tensor) -> torch.Tensor:
        b, s, _ = h.shape
        q, k, v = qkv(h).view(b, s, 3, heads, dim // heads).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(dim // heads)
        return out((scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, s, dim))

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        h = x
        for _ in range(2):
            h = h + attend(norm1(h))
            h = h + mlp(norm2(h))
        h.square().mean().backward()
        opt.step()

    return step, {"manual_attention"}
