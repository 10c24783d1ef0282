"""Layer 1: read and model a trace (imports no torch): files, events and their links, :class:`Trace`,
kernel names, queries, kernel breakdown, timeline, several ranks, overlap and achieved FLOP/s.
"""

from __future__ import annotations

import importlib
from typing import Any

# The engine's public names for any Kineto trace (``from helpers import trace``; ``trace.load_traces(...)``):
# name -> module. The lessons' names are in ``helpers`` itself.
_API: dict[str, str] = {
    "Trace": "model", "load_trace": "model", "NoKernelsError": "model",
    "load_traces": "ranks", "combine_ranks": "ranks", "MultiRankTrace": "ranks",
    "decode_kernel": "kernel_names", "decode_kernels": "kernel_names",
    "kernel_breakdown": "work",
    "idle_gaps": "overlap",
    "communication_per_step": "collectives", "rank_table": "collectives",
    "achieved_flops": "flops",
}  # fmt: skip
__all__ = sorted(_API)


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(
            f"module 'helpers.trace' has no attribute {name!r}; its public names: {', '.join(__all__)}"
        )
    return getattr(importlib.import_module(f".{_API[name]}", __name__), name)
