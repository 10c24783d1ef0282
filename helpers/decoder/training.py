"""A training step of the decoder: forward, loss, backward, AdamW; its time and its peak memory.

``step = TrainingStep(model, batch=8, seq=1024, optimizer="fused")`` builds random token data
(next-token targets) and an AdamW optimizer; ``step()`` runs one step and returns the loss.
``optimizer`` picks AdamW's implementation: ``"for-loop"`` (one set of kernels per parameter),
``"foreach"`` (``torch._foreach_*`` ops: a few kernels per *list* of parameters, PyTorch's default
on a GPU) or ``"fused"`` (one fused kernel launch for a whole group of parameters).

The backward runs under ``record_function("backward")`` and AdamW under its own
``Optimizer.step#AdamW.step`` scope, so a trace of a step splits into forward parts, backward
and optimizer (:func:`helpers.decoder.breakdown.part_breakdown`).
"""

from __future__ import annotations

from typing import Any

import torch

from ..checks import positive_int, positive_number
from ..measure.device import synchronize
from ..measure.timing import time_per_call
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
            f"model must be a helpers Decoder (helpers.build_model) or a wrapper of one such as "
            f"DistributedDataParallel, got {type(model).__name__}"
        )
    return inner


class TrainingStep:
    """One training step of `model` on a fixed random batch ``[batch, seq]``: ``step()`` returns the loss (a tensor).

    `model` is a :class:`Decoder` or a wrapper whose forward must run (``DistributedDataParallel``):
    the step calls ``model(tokens)`` and :func:`~helpers.decoder.model.next_token_loss`.
    """

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


def step_timing(step: TrainingStep, repeats: int = 5, warmup: int = 2) -> dict[str, Any]:
    """Median time of one training step (synchronised) and tokens per second."""
    seconds = time_per_call(lambda _t: step(), step.tokens, repeats=repeats, warmup=warmup, grad=True)
    return {"step_ms": seconds * 1e3, "tokens_per_s": step.tokens_per_step / seconds}


def step_peak_memory(step: TrainingStep, warmup: int = 1) -> dict[str, float]:
    """Peak memory of one training step on a GPU (the caching allocator's counters), in GB.

    `warmup` steps run first, so AdamW's state exists. ``peak_gb``: the most allocated at any
    moment of the step; ``resident_gb``: allocated before it (weights, gradients kept by
    ``set_to_none=False`` if any, optimizer state); ``step_extra_gb``: the difference, what the
    step itself adds (activations, gradients, temporaries). On a CPU use
    :func:`helpers.profile_memory`, which has the categories too.
    """
    device = step.tokens.device
    if device.type != "cuda":
        raise ValueError("step_peak_memory reads the CUDA allocator; on a CPU use helpers.profile_memory(step)")
    for _ in range(warmup):
        step()
    synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    step()
    synchronize(device)
    peak = torch.cuda.max_memory_allocated(device)
    return {"peak_gb": peak / 1e9, "resident_gb": before / 1e9, "step_extra_gb": (peak - before) / 1e9}
