"""Notebook 09's runs as RunOptions fields, defined once for the lesson and ``python -m benchmarks ddp``
(`quick`: the tiny model, the CPU path and the CI smoke run)."""

from __future__ import annotations

from typing import Any

ANCHOR = {"config": "8x2048", "batch": 4, "seq": 1024, "optimizer": "fused", "warmup": 3, "timed_steps": 10}
QUICK = {"config": "tiny", "batch": 2, "seq": 64, "optimizer": "fused", "warmup": 2, "timed_steps": 5}
TRACE = {"profile_steps": 3, "max_trace_mb": 2.9}
# bucket sizes (MB) of the reference model, and their stand-ins for the tiny model
BUCKETS = {"small": 25.0, "large": 200.0, "all": 2000.0}
QUICK_BUCKETS = {"small": 0.05, "large": 0.4, "all": 10.0}
# a straggler's delay per step: about half a step on GPUs; on a small shared CPU several steps, to
# stand out of the noise
STRAGGLER_MS = {"cuda": 20.0, "cpu": 100.0}
ORDER = (
    "ddp_bucket25", "ddp_bucket200", "fsdp_prefetch", "fsdp_no_prefetch", "ddp_straggler", "ddp_one_bucket",
    "fsdp_explicit"
)  # fmt: skip


def configurations(device: str, quick: bool) -> dict[str, dict[str, Any]]:
    """Each run's options by name, in :data:`ORDER` (see :class:`helpers.distributed.options.RunOptions`)."""
    if device not in STRAGGLER_MS:
        raise ValueError(f"device must be 'cuda' or 'cpu', got {device!r}")
    caps = QUICK_BUCKETS if quick else BUCKETS
    base = {**(QUICK if quick else ANCHOR), **TRACE, "device": device}
    straggler = {"straggler_rank": -2, "straggler_ms": STRAGGLER_MS[device], "straggler_kind": "sleep"}
    return {
        "ddp_bucket25": {**base, "mode": "ddp", "bucket_cap_mb": caps["small"]},
        "ddp_bucket200": {**base, "mode": "ddp", "bucket_cap_mb": caps["large"]},
        "fsdp_prefetch": {**base, "mode": "fsdp", "prefetch": "default"},
        "fsdp_no_prefetch": {**base, "mode": "fsdp", "prefetch": "none"},
        "ddp_straggler": {**base, "mode": "ddp", "bucket_cap_mb": caps["small"], **straggler},
        "ddp_one_bucket": {**base, "mode": "ddp", "bucket_cap_mb": caps["all"]},
        "fsdp_explicit": {**base, "mode": "fsdp", "prefetch": "explicit"},
    }
