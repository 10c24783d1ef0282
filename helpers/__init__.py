"""Helpers for the course "Reading PyTorch profiles": the names the notebooks use, in one place.

The package is built in layers; each imports only the ones above it in this list:

- ``helpers.paths``, ``helpers.checks``, ``helpers.triton_env``: where files are, argument checks,
  whether Triton compiles or interprets (no torch);
- ``helpers.trace``: read and model a trace: files, events, :class:`Trace`, kernel names, queries,
  comparison, timeline (no torch);
- ``helpers.measure``: run things here: :func:`profile`, timing, device facts, ceilings and
  rooflines, compile costs;
- ``helpers.kernels``: the course's own Triton kernels and the layers built on them;
- ``helpers.mlp``: the course's subject, the GeGLU MLP: model, workloads, plans, variants, the
  hand-tuned kernel loader;
- ``helpers.attention``: the attention block: model (QKV, heads, RoPE, KV cache), costs, SDPA
  backends, FlexAttention, workloads;
- ``helpers.decoder``: a whole model, a Llama-style decoder built from the two: configs, caches,
  layer swaps, generation and CUDA graphs, a training step, time by model part from a trace;
- ``helpers.distributed``: several ranks: a data-parallel training step of the decoder under DDP or
  FSDP2, launched with torchrun from a notebook, read back from its per-rank traces;
- ``helpers.lessons``: what a notebook shows and checks: display helpers, exercises.

Notebooks import only ``helpers`` and use the names below (a test enforces it). Names are loaded
on first use, so ``import helpers`` followed by :func:`load_trace` never imports torch.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from . import triton_env as _triton_env  # noqa: F401  (first: decides Triton's mode before anything imports it)

# Kineto prints a "USDT ... profiler_start/stop" line to stderr around every profile, which would stand in most
# cells of a lesson; level 6 silences its own log (Python warnings are untouched). Set KINETO_LOG_LEVEL=0 to debug.
os.environ.setdefault("KINETO_LOG_LEVEL", "6")

# name -> (module, attribute); the attribute "" exports the module itself.
_EXPORTS: dict[str, tuple[str, str]] = {
    # -- where things are
    "reference_trace_path": ("paths", "reference_trace_path"),
    # -- reading traces (no torch)
    "load_trace": ("trace.model", "load_trace"),
    "decode_kernel": ("trace.kernel_names", "decode_kernel"),
    "decode_kernels": ("trace.kernel_names", "decode_kernels"),
    "trace_cards": ("trace.queries", "trace_cards"),
    "kernel_table": ("trace.queries", "kernel_table"),
    "kernels_per_forward": ("trace.queries", "kernels_per_forward"),
    "chain_tree": ("trace.dispatch_tree", "chain_tree"),
    "op_call_times": ("trace.queries", "op_call_times"),
    "op_input": ("trace.queries", "op_input"),
    # -- measuring here
    "profile": ("measure.profile", "profile"),
    "time_per_call": ("measure.timing", "time_per_call"),
    "time_end_to_end": ("measure.timing", "time_end_to_end"),
    "relative_error": ("measure.numerics", "relative_error"),
    "measure_ceilings": ("measure.ceilings", "measure_ceilings"),
    "ceilings_for": ("measure.ceilings", "ceilings_for"),
    "load_results": ("lessons.results", "load_results"),
    "kernel_floors": ("measure.kernel_floors", "kernel_floors"),
    "tile_waves": ("measure.roofline", "tile_waves"),
    "batch_inputs": ("measure.compile_counts", "batch_inputs"),
    "call_split": ("measure.compile_costs", "call_split"),
    # -- the course's kernels
    # -- the GeGLU MLP
    "MLPShape": ("mlp.model", "MLPShape"),
    "workloads": ("mlp.workloads", ""),
    "geglu_table": ("mlp.fusion", "geglu_table"),
    # -- the attention block (lesson 07's own names are in helpers.nb07)
    # -- the whole model (a decoder built from the attention block and the MLP; the rest is in helpers.nb08)
    "DECODER_CONFIGS": ("decoder.config", "DECODER_CONFIGS"),
    # -- several ranks (lesson 09's own names are in helpers.nb09)
    # -- lessons: each notebook's own namespace (helpers.nb07.check, ...), then what several share
    **{f"nb{n:02d}": (f"lessons.nb{n:02d}", "") for n in range(11)},
    "on_gpu": ("lessons.display", "on_gpu"),
    "lesson_path": ("lessons.display", "lesson_path"),
    "side_by_side": ("lessons.display", "side_by_side"),
    "kernel_source": ("lessons.display", "kernel_source"),
    "busiest_op": ("lessons.open_exercises", "busiest_op"),
}

__all__ = sorted(_EXPORTS)


def _h200_ceilings() -> Any:
    from .lessons.results import reference_ceilings

    return reference_ceilings()


def _configure_engine() -> None:
    """Tell the engine what it must not know by itself: where the course keeps traces, its kernels'
    names, and the recorded ceilings of the H200 its reference traces come from."""
    from . import paths
    from .course_kernel_names import COURSE_KERNELS
    from .trace.registry import register_kernel_names, register_reference_ceilings
    from .trace.saving import configure_saving

    configure_saving(paths.LOCAL_TRACES_DIR, reference_dirs=(paths.TRACES_DIR,))
    register_reference_ceilings("H200", _h200_ceilings)
    register_kernel_names(
        {
            name: {"family": family, "source": "course-triton", "summary": f"The course's own Triton kernel: {what}."}
            | ({"fused_ops": ["gelu", "mul"]} if "geglu" in name else {})
            for name, (family, what) in COURSE_KERNELS.items()
        }
    )


_configure_engine()


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(
            f"module 'helpers' has no attribute {name!r}; the lesson-facing names are listed in helpers.__all__"
        )
    module_name, attr = _EXPORTS[name]
    module = importlib.import_module(f".{module_name}", __name__)
    value = getattr(module, attr) if attr else module
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
