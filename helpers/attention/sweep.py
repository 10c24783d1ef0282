"""How attention's cost grows with the sequence length, measured here (notebook 07, section 2).

For each sequence length the hand-written attention and PyTorch's SDPA (its own choice of backend)
run on the same inputs, and each is measured three ways: the score matrix the hand-written
version builds (its size read from the profile's recorded input shapes of ``aten::_softmax``), the
time per call, and the peak memory of one call. The predictions from :mod:`helpers.attention.costs`
sit next to them, so a notebook can put the guess and the measurement side by side.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd
import torch

from ..checks import positive_int
from ..measure.memory import peak_memory
from ..measure.profile import profile
from ..measure.timing import time_per_call
from ..measure.workload import default_dtype, workload_device
from ..trace.queries import op_input
from .backends import sdpa_fn
from .costs import AttentionShape, attention_flops, manual_attention_plan, score_matrix_bytes
from .workloads import attention_inputs, manual

# Refuse sweeps whose hand-written attention would need more than this many bytes per score
# matrix: the eager version holds two or three at once.
MAX_SCORE_BYTES = {"cpu": 2**30, "cuda": 16 * 2**30}


def score_sweep(
    seqs: Sequence[int],
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
    batch: int = 1,
    heads: int = 4,
    head_dim: int = 64,
    repeats: int = 5,
    log: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """One row per sequence length: predicted and measured score-matrix MB, time and peak memory.

    Columns: ``seq``, ``predicted_score_mb`` (batch x heads x seq^2 x bytes), ``measured_score_mb``
    (from the recorded shape of the softmax's input), ``plan_mb`` (everything the hand-written
    kernels move, :func:`manual_attention_plan`), ``gflop`` (causal), ``manual_ms`` and ``sdpa_ms``
    (median wall time per call, synchronised), ``manual_peak_mb`` and ``sdpa_peak_mb``.
    `log` is called once per length (progress).
    """
    if not seqs:
        raise ValueError("give at least one sequence length")
    seqs = [positive_int("seq", s) for s in seqs]
    dev = workload_device(device)
    dtype = dtype or default_dtype(dev)
    limit = MAX_SCORE_BYTES[dev.type]
    for seq in seqs:  # every length checked before anything is allocated
        predicted = score_matrix_bytes(AttentionShape(batch=batch, heads=heads, seq=seq, head_dim=head_dim), dtype)
        if predicted > limit:
            raise ValueError(
                f"seq {seq}: one score matrix would be {predicted / 1e9:.1f} GB, over the {limit / 1e9:.1f} GB this "
                "sweep allows here; use shorter sequences, fewer heads or a smaller batch"
            )
    rows = []
    for seq in seqs:
        shape = AttentionShape(batch=batch, heads=heads, seq=seq, head_dim=head_dim)
        built = manual(dev, dtype, shape)
        predicted = score_matrix_bytes(shape, dtype)
        if log:
            log(f"seq {seq}: {shape.describe()}, score matrix {predicted / 1e6:.1f} MB")
        q, k, v = attention_inputs(built.device, built.dtype, shape)
        sdpa = sdpa_fn(None)
        trace = profile(built.fn, q, k, v, steps=1, warmup=1, label=f"manual_{seq}")
        measured = op_input(trace, "aten::_softmax").nbytes
        rows.append(
            {
                "seq": seq,
                "predicted_score_mb": predicted / 1e6,
                "measured_score_mb": measured / 1e6,
                "plan_mb": float(manual_attention_plan(shape, built.dtype)["bytes"].sum()) / 1e6,
                "gflop": attention_flops(shape, "causal") / 1e9,
                "manual_ms": time_per_call(built.fn, q, k, v, repeats=repeats, warmup=1) * 1e3,
                "sdpa_ms": time_per_call(sdpa, q, k, v, repeats=repeats, warmup=1) * 1e3,
                "manual_peak_mb": peak_memory(built.fn, q, k, v) / 1e6,
                "sdpa_peak_mb": peak_memory(sdpa, q, k, v) / 1e6,
            }
        )
    frame = pd.DataFrame(rows)
    frame.attrs["shape"] = f"batch {batch}, {heads} heads, head dim {head_dim}, {built.dtype} on {built.device}"
    return frame
