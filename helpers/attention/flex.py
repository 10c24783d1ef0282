"""FlexAttention: a mask written in Python, a kernel generated that skips empty tiles and masks partial ones."""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention

from ..checks import positive_int

FLEX_MASKS = ("causal", "sliding_window")


def causal_mask(b, h, q_idx, kv_idx):  # noqa: ANN001 - traced by FlexAttention
    """Query i sees keys j <= i."""
    return q_idx >= kv_idx


def sliding_window_mask(window: int) -> Callable:
    """Causal, and only the last `window` keys: j in (i - window, i]."""
    window = positive_int("window", window)

    def sliding_window(b, h, q_idx, kv_idx):  # noqa: ANN001 - traced by FlexAttention
        return (q_idx >= kv_idx) & (q_idx - kv_idx < window)

    return sliding_window


@functools.cache
def _compiled_flex() -> Callable:
    # One compiled function for the process; dynamic=False: each new shape compiles its own kernel,
    # specialised like the ones a benchmark or a lesson reads (no symbolic sizes in the code).
    return torch.compile(flex_attention, dynamic=False)


def flex_block_mask(
    mask: str, seq_q: int, seq_k: int, device: torch.device | str, window: int | None = None
) -> BlockMask:
    """The BlockMask of a named mask for one (seq_q, seq_k), shared by every batch and head."""
    if mask not in FLEX_MASKS:
        raise ValueError(f"mask must be one of {FLEX_MASKS}, got {mask!r}")
    mask_mod = causal_mask if mask == "causal" else sliding_window_mask(window)
    return create_block_mask(mask_mod, None, None, seq_q, seq_k, device=device)


def flex_fn(mask: str = "causal", window: int | None = None) -> Callable[..., torch.Tensor]:
    """``fn(q, k, v)``: compiled FlexAttention with `mask` (``"causal"`` or ``"sliding_window"``); block masks built once per length."""
    if mask not in FLEX_MASKS:
        raise ValueError(f"mask must be one of {FLEX_MASKS}, got {mask!r}")
    if mask == "sliding_window":
        positive_int("window", window)
    masks: dict[tuple, BlockMask] = {}

    def flex(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        key = (q.shape[-2], k.shape[-2], str(q.device))
        if key not in masks:
            masks[key] = flex_block_mask(mask, q.shape[-2], k.shape[-2], q.device, window)
        gqa = k.shape[1] != q.shape[1]
        return _compiled_flex()(q, k, v, block_mask=masks[key], enable_gqa=gqa)

    flex.__name__ = f"flex_{mask}"
    return flex
