"""What attention must compute and move: FLOPs, the score matrix, and the bytes of each plan.

- :class:`AttentionShape`: batch, heads, sequence lengths, head dim (and key/value heads for GQA).
- :func:`visible_pairs`, :func:`attention_flops`: the (query, key) pairs a mask keeps, and the
  FLOPs of the two matrix products over them: ``4 * batch * heads * head_dim * pairs``
  (``q @ k.T`` and ``p @ v``, one multiply and one add per term). Causal masking keeps
  ``seq * (seq + 1) / 2`` of the ``seq**2`` pairs: half the FLOPs, plus the diagonal.
- :func:`score_matrix_bytes`: one ``[batch, heads, seq_q, seq_k]`` score matrix.
- :func:`fused_attention_bytes`: the least a fused kernel moves (read q, k, v once, write o once).
- :func:`manual_attention_plan`: the kernels of the hand-written attention, each with the bytes
  it reads and writes: the score matrix goes to memory and back several times.
"""

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
        raise TypeError(f"shape must be a helpers.AttentionShape, got {type(shape).__name__}")
    return shape


def visible_pairs(seq_q: int, seq_k: int, mask: str = "causal", window: int | None = None) -> int:
    """How many (query, key) pairs a mask keeps, per (batch, head).

    ``"none"``: all ``seq_q * seq_k``. ``"causal"``: query i sees keys j <= i + seq_k - seq_q (the
    diagonal at the bottom right). ``"sliding_window"``: causal, and only the last `window` keys
    (j > i + seq_k - seq_q - window).
    """
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
    """FLOPs of ``q @ k.T`` and ``p @ v`` over the visible pairs: 4 x batch x heads x head_dim x pairs.

    The softmax's exponentials and sums are left out (a few per score, against 4 x head_dim).
    """
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
    """The kernels of :func:`helpers.manual_attention` on a GPU, in order, with the bytes each must move.

    One row per kernel: the two batched products, the scaling, the out-of-place ``masked_fill``
    (a copy of the scores, then the fill in place: read it in a CPU trace as ``aten::clone`` under
    ``aten::masked_fill``) and the softmax. Columns: ``step``, ``aten_op`` (the operator of the step; the clone's kernel is launched by the
    ``aten::copy_`` inside it), ``reads``, ``writes`` (what,
    in words), ``bytes`` (reads + writes, each tensor once), ``score_passes`` (how many times the
    step reads or writes a score-sized matrix) and ``flops`` (the two products only). The mask is
    a precomputed ``[seq_q, seq_k]`` bool tensor, broadcast over batch and heads (read once).
    """
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


# A kernel is launched by the innermost operator: the clone's copy by aten::copy_ inside aten::clone.
_LAUNCHER_ALIASES = {"aten::copy_": "aten::clone"}


def plan_kernel_costs(
    kernels: pd.DataFrame, shape: AttentionShape, dtype: torch.dtype | str, causal: bool = True
) -> pd.DataFrame:
    """Each kernel of one hand-written call (``helpers.kernel_table``) with the bytes and FLOPs of its plan step.

    Kernels are matched to :func:`manual_attention_plan`'s steps, in order, by the operator that
    launched them. Returns ``name`` (the step), ``kernel`` (short name), ``duration_us``, ``bytes``,
    ``flops``; kernels no step explains (a memset) are left out and counted in ``attrs["unmatched"]``.
    Pass the result's rows to ``helpers.roofline_frame``.
    """
    missing = {"short_name", "duration_us", "launched_by"} - set(kernels.columns)
    if missing:
        raise ValueError(f"kernels must be a helpers.kernel_table(...) frame; missing columns {sorted(missing)}")
    plan = manual_attention_plan(shape, dtype, causal)
    unused = list(plan.itertuples())
    rows, unmatched = [], 0
    for k in kernels.itertuples():
        if getattr(k, "kind", "kernel") != "kernel":  # memsets and copies the libraries add: no plan step
            unmatched += 1
            continue
        op = _LAUNCHER_ALIASES.get(str(k.launched_by), str(k.launched_by))
        step = next((p for p in unused if p.aten_op == op), None)
        if step is None:
            unmatched += 1
            continue
        unused.remove(step)
        flops = None if pd.isna(step.flops) else int(step.flops)
        rows.append(
            {
                "name": step.step,
                "kernel": k.short_name,
                "duration_us": float(k.duration_us),
                "bytes": int(step.bytes),
                "flops": flops,
            }
        )
    out = pd.DataFrame(rows, columns=["name", "kernel", "duration_us", "bytes", "flops"])
    out["flops"] = out["flops"].astype(object).where(out["flops"].notna(), None)  # None, not NaN: no FLOPs counted
    out.attrs["unmatched"] = unmatched
    out.attrs["steps_without_kernel"] = [p.step for p in unused]
    return out
