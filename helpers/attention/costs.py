"""What attention must compute and move, counted from shapes alone so a profiled kernel can be judged against it."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from ..checks import positive_int
from ..measure.roofline import dtype_size

MASKS = ("none", "causal", "sliding_window")


@dataclass(frozen=True)
class AttentionShape:
    """Sizes of one attention call: q [batch, heads, seq_q, head_dim], k/v [batch, kv_heads, seq_k, head_dim]."""

    batch: int
    heads: int
    seq: int
    head_dim: int
    kv_heads: int | None = None
    seq_k: int | None = None

    def __post_init__(self) -> None:
        for name in ("batch", "heads", "seq", "head_dim"):
            positive_int(name, getattr(self, name))
        positive_int("kv_heads", self.kv)
        positive_int("seq_k", self.keys)
        if self.heads % self.kv:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv})")

    @property
    def kv(self) -> int:
        return self.heads if self.kv_heads is None else self.kv_heads

    @property
    def keys(self) -> int:
        return self.seq if self.seq_k is None else self.seq_k

    @property
    def hidden(self) -> int:
        """heads x head_dim: the width of the block's activations."""
        return self.heads * self.head_dim

    def describe(self) -> str:
        kv = f", {self.kv} kv heads" if self.kv != self.heads else ""
        keys = f", {self.keys} keys" if self.keys != self.seq else ""
        return f"batch {self.batch}, {self.heads} heads{kv}, seq {self.seq}{keys}, head dim {self.head_dim}"


def _check_shape(shape: object) -> AttentionShape:
    if not isinstance(shape, AttentionShape):
        raise TypeError(f"shape must be an AttentionShape (helpers.nb07.AttentionShape), got {type(shape).__name__}")
    return shape


def visible_pairs(seq_q: int, seq_k: int, mask: str = "causal", window: int | None = None) -> int:
    """(query, key) pairs a mask keeps per (batch, head): ``"causal"`` (diagonal bottom right), ``"sliding_window"``, ``"none"``."""
    seq_q, seq_k = positive_int("seq_q", seq_q), positive_int("seq_k", seq_k)
    if mask not in MASKS:
        raise ValueError(f"mask must be one of {MASKS}, got {mask!r}")
    if mask == "none":
        return seq_q * seq_k
    # Row i sees min(max(i + seq_k - seq_q + 1, 0), cap) keys, cap = seq_k (or the window when
    # smaller): a clipped arithmetic series, summed in closed form (any length, no memory).
    cap = seq_k if mask == "causal" else min(seq_k, positive_int("window", window))
    return _sum_clipped(seq_k - seq_q + 1, seq_k, cap)


def _sum_clipped(first: int, last: int, cap: int) -> int:
    """Sum of min(max(x, 0), cap) over the integers x = first .. last."""
    lo, hi = max(first, 1), min(last, cap)
    inside = (lo + hi) * (hi - lo + 1) // 2 if hi >= lo else 0
    above = max(0, last - max(first, cap + 1) + 1)
    return inside + cap * above


def attention_flops(shape: AttentionShape, mask: str = "causal", window: int | None = None) -> int:
    """FLOPs of ``q @ k.T`` and ``p @ v`` over the visible pairs (the softmax's few per score left out)."""
    s = _check_shape(shape)
    return 4 * s.batch * s.heads * s.head_dim * visible_pairs(s.seq, s.keys, mask, window)


def score_matrix_bytes(shape: AttentionShape, dtype: torch.dtype | str) -> int:
    """Bytes of one score matrix [batch, heads, seq_q, seq_k] in `dtype`."""
    s = _check_shape(shape)
    return s.batch * s.heads * s.seq * s.keys * dtype_size(dtype)


def fused_attention_bytes(shape: AttentionShape, dtype: torch.dtype | str) -> int:
    """The least any attention kernel moves: read q, k and v once, write o once."""
    s = _check_shape(shape)
    q_or_o = s.batch * s.heads * s.seq * s.head_dim
    k_or_v = s.batch * s.kv * s.keys * s.head_dim
    return (2 * q_or_o + 2 * k_or_v) * dtype_size(dtype)


def manual_attention_plan(shape: AttentionShape, dtype: torch.dtype | str, causal: bool = True) -> pd.DataFrame:
    """The kernels of :func:`manual_attention` on a GPU in order (the out-of-place ``masked_fill`` is a clone then
    a fill), with the bytes each moves once, its score-sized passes and FLOPs."""
    s = _check_shape(shape)
    size = dtype_size(dtype)
    S = score_matrix_bytes(s, dtype)
    q_bytes = s.batch * s.heads * s.seq * s.head_dim * size
    kv_bytes = s.batch * s.heads * s.keys * s.head_dim * size  # K/V as the products see them (GQA repeated)
    mask_bytes = s.seq * s.keys  # one byte per bool
    pairs_flops = 2 * s.batch * s.heads * s.head_dim * s.seq * s.keys  # each product, over every pair
    rows = [
        ("scores = q @ k.T", "aten::bmm", "q, k", "scores", q_bytes + kv_bytes + S, 1, pairs_flops),
        ("scores * scale", "aten::mul", "scores", "scores", 2 * S, 2, None),
    ]
    if causal:
        # Tensor.masked_fill (out of place) is clone + masked_fill_: the scores are copied first.
        rows.append(("masked_fill: clone", "aten::clone", "scores", "scores copy", 2 * S, 2, None))
        rows.append(
            ("masked_fill_(future, -inf)", "aten::masked_fill_", "scores, mask", "scores", 2 * S + mask_bytes, 2, None)
        )
    rows += [
        ("softmax", "aten::_softmax", "scores", "probs", 2 * S, 2, None),
        ("probs @ v", "aten::bmm", "probs, v", "out", S + kv_bytes + q_bytes, 1, pairs_flops),
    ]
    frame = pd.DataFrame(rows, columns=["step", "aten_op", "reads", "writes", "bytes", "score_passes", "flops"])
    frame.attrs["score_matrix_bytes"] = S
    return frame
