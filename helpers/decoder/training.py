"""A training step of the decoder: forward, loss, backward, AdamW (``for-loop``, ``foreach`` or ``fused``),
under scopes that :func:`~helpers.decoder.breakdown.part_breakdown` splits by.
"""

from __future__ import annotations

import torch

from ..checks import positive_int, positive_number
from .model import Decoder, next_token_loss, part, random_tokens

OPTIMIZERS = ("for-loop", "foreach", "fused")


def make_optimizer(model: torch.nn.Module, kind: str = "fused", lr: float = 1e-4) -> torch.optim.AdamW:
    """AdamW over `model`'s parameters with the implementation `kind` (see the module docstring)."""
    if kind not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {kind!r}")
    options = {"for-loop": {"foreach": False, "fused": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}
    return torch.optim.AdamW(model.parameters(), lr=positive_number("lr", lr), **options[kind])


def decoder_of(model: torch.nn.Module) -> Decoder:
    """The :class:`Decoder` itself, or the one inside a wrapper with a ``.module`` (DistributedDataParallel)."""
    inner = getattr(model, "module", model)
    if not isinstance(inner, Decoder):
        raise TypeError(
            f"model must be a helpers Decoder (build_model) or a wrapper of one such as "
            f"DistributedDataParallel, got {type(model).__name__}"
        )
    return inner


class TrainingStep:
    """One training step on a fixed random batch: ``step()`` returns the loss; `model` may be a wrapper such as DDP."""

    def __init__(self, model: torch.nn.Module, batch: int, seq: int, optimizer: str = "fused", seed: int = 0) -> None:
        cfg = decoder_of(model).config
        if positive_int("seq", seq) + 1 > cfg.max_position_embeddings:
            raise ValueError(f"seq {seq} exceeds max_position_embeddings ({cfg.max_position_embeddings}) - 1")
        device = decoder_of(model).embed_tokens.weight.device
        data = random_tokens(cfg, positive_int("batch", batch), seq + 1, device=device, seed=seed)
        self.tokens, self.targets = data[:, :-1].contiguous(), data[:, 1:].contiguous()
        self.model = model.train()
        self.optimizer = make_optimizer(model, optimizer)
        self.optimizer_kind = optimizer
        self.batch, self.seq = batch, seq

    def __call__(self) -> torch.Tensor:
        self.optimizer.zero_grad(set_to_none=True)
        loss = next_token_loss(self.model(self.tokens), self.targets)
        with part("backward"):
            loss.backward()
        self.optimizer.step()
        return loss.detach()

    @property
    def tokens_per_step(self) -> int:
        return self.batch * self.seq
