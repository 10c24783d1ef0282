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
from typing import Any

from . import triton_env as _triton_env  # noqa: F401  (first: decides Triton's mode before anything imports it)

# name -> (module, attribute); the attribute "" exports the module itself.
_EXPORTS: dict[str, tuple[str, str]] = {
    # -- where things are
    "reference_trace_path": ("paths", "reference_trace_path"),
    "triton_mode": ("triton_env", "triton_mode"),
    # -- reading traces (no torch)
    "load_trace": ("trace.model", "load_trace"),
    "decode_kernel": ("trace.kernel_names", "decode_kernel"),
    "decode_kernels": ("trace.kernel_names", "decode_kernels"),
    "trace_cards": ("trace.queries", "trace_cards"),
    "kernel_table": ("trace.queries", "kernel_table"),
    "kernels_per_forward": ("trace.queries", "kernels_per_forward"),
    "chain_tree": ("trace.queries", "chain_tree"),
    "op_call_times": ("trace.queries", "op_call_times"),
    "op_input": ("trace.queries", "op_input"),
    # -- measuring here
    "profile": ("measure.profile", "profile"),
    "time_per_call": ("measure.timing", "time_per_call"),
    "time_end_to_end": ("measure.timing", "time_end_to_end"),
    "relative_error": ("measure.numerics", "relative_error"),
    "measure_ceilings": ("measure.ceilings", "measure_ceilings"),
    "ceilings_for": ("measure.ceilings", "ceilings_for"),
    "reference_ceilings": ("lessons.results", "reference_ceilings"),
    "load_results": ("lessons.results", "load_results"),
    "kernel_floors": ("measure.kernel_floors", "kernel_floors"),
    "roofline_frame": ("measure.roofline", "roofline_frame"),
    "tile_waves": ("measure.roofline", "tile_waves"),
    "peak_memory": ("measure.memory", "peak_memory"),
    "profile_memory": ("measure.memory", "profile_memory"),
    "memory_peaks": ("measure.memory", "memory_peaks"),
    "memory_figure": ("measure.memory", "memory_figure"),
    "allocator_history": ("measure.memory", "allocator_history"),
    "time_first_call": ("measure.compile_costs", "time_first_call"),
    "first_calls": ("measure.compile_costs", "first_calls"),
    "batch_inputs": ("measure.compile_counts", "batch_inputs"),
    "shape_sweep": ("measure.compile_counts", "shape_sweep"),
    "sweep_summary": ("measure.compile_counts", "sweep_summary"),
    "call_split": ("measure.compile_costs", "call_split"),
    "compile_wrapper_rows": ("measure.compile_costs", "compile_wrapper_rows"),
    # -- the course's kernels
    "geglu": ("kernels.geglu_pointwise", "geglu"),
    "gate_up_plans": ("kernels.launch_plans", "plans_table"),
    "gate_up_config_table": ("kernels.gate_up_tuning", "config_table"),
    "FusedGeGLUMLP": ("kernels.modules", "FusedGeGLUMLP"),
    # -- the GeGLU MLP
    "MLPShape": ("mlp.model", "MLPShape"),
    "SimpleGeGLUMLP": ("mlp.model", "SimpleGeGLUMLP"),
    "geglu_reference": ("mlp.model", "geglu_reference"),
    "reference_forward": ("mlp.model", "reference_forward"),
    "workloads": ("mlp.workloads", ""),
    "PLANS": ("mlp.plans", "PLANS"),
    "plan_kernels": ("mlp.plans", "plan_kernels"),
    "plan_bytes": ("mlp.plans", "plan_bytes"),
    "plan_floor_us": ("mlp.plans", "plan_floor_us"),
    "plans_frame": ("mlp.plans", "plans_frame"),
    "infer_plan": ("mlp.plans", "infer_plan"),
    "build_variant": ("mlp.variants", "build_variant"),
    "variant_table": ("mlp.variants", "variant_table"),
    "geglu_table": ("mlp.fusion", "geglu_table"),
    "kernels_by_role": ("mlp.fusion", "kernels_by_role"),
    "load_geglu_mlp": ("mlp.hub", "load_geglu_mlp"),
    "KernelLoadError": ("mlp.hub", "KernelLoadError"),
    "kernel_pin": ("mlp.hub_pin", "kernel_pin"),
    "KERNEL_LOCK_FILE": ("mlp.hub_pin", "KERNEL_LOCK_FILE"),
    "hub_status": ("mlp.hub_cache", "hub_status"),
    "cache_dir": ("mlp.hub_cache", "cache_dir"),
    "cached_versions": ("mlp.hub_cache", "cached_versions"),
    "describe_repository": ("mlp.hub_cache", "describe_repository"),
    "raw_get_kernel": ("mlp.hub_cache", "raw_get_kernel"),
    "LIGER_REPO": ("mlp.hub_cache", "LIGER_REPO"),
    "COURSE_KERNEL_REPO": ("mlp.hub_cache", "COURSE_KERNEL_REPO"),
    # -- the attention block (lesson 07's own names are in helpers.nb07)
    # -- the whole model (a decoder built from the attention block and the MLP; the rest is in helpers.nb08)
    "DECODER_CONFIGS": ("decoder.config", "DECODER_CONFIGS"),
    # -- several ranks (lesson 09's own names are in helpers.nb09)
    # -- lessons: each notebook's own namespace (helpers.nb07.check, ...), then what several share
    **{f"nb{n:02d}": (f"lessons.nb{n:02d}", "") for n in range(10)},
    "exercises": ("lessons.exercises", ""),
    "on_gpu": ("lessons.display", "on_gpu"),
    "lesson_path": ("lessons.display", "lesson_path"),
    "side_by_side": ("lessons.display", "side_by_side"),
    "reference_trace": ("lessons.display", "reference_trace"),
    "kernel_source": ("lessons.display", "kernel_source"),
    "busiest_op": ("lessons.open_exercises", "busiest_op"),
    "check_geglu_kernel": ("lessons.kernel_exercises", "check_geglu_kernel"),
    "kernel_device": ("lessons.kernel_exercises", "kernel_device"),
    "time_geglu_kernel": ("lessons.kernel_exercises", "time_geglu_kernel"),
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
