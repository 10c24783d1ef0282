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
  hand-tuned kernel loader, the variants benchmark and its results;
- ``helpers.attention``: the attention block: model (QKV, heads, RoPE, KV cache), costs, SDPA
  backends, FlexAttention, workloads, the sequence sweep, the benchmark and its results;
- ``helpers.decoder``: a whole model, a Llama-style decoder built from the two: configs, caches,
  layer swaps, generation and CUDA graphs, a training step, time by model part from a trace, the
  benchmark and its results;
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
    "REPO_ROOT": ("paths", "REPO_ROOT"),
    "TRACES_DIR": ("paths", "TRACES_DIR"),
    "LOCAL_TRACES_DIR": ("paths", "LOCAL_TRACES_DIR"),
    "reference_trace_path": ("paths", "reference_trace_path"),
    "triton_mode": ("triton_env", "triton_mode"),
    # -- reading traces (no torch)
    "Trace": ("trace.model", "Trace"),
    "TraceInfo": ("trace.model", "TraceInfo"),
    "NoKernelsError": ("trace.model", "NoKernelsError"),
    "load_trace": ("trace.model", "load_trace"),
    "decode_kernel": ("trace.kernel_names", "decode_kernel"),
    "decode_kernels": ("trace.kernel_names", "decode_kernels"),
    "KERNEL_FAMILIES": ("trace.kernel_names", "FAMILIES"),
    "compare": ("trace.compare", "compare"),
    "compare_kernels": ("trace.compare", "compare_kernels"),
    "kernel_breakdown": ("trace.compare", "kernel_breakdown"),
    "work_items": ("trace.compare", "work_items"),
    "trace_cards": ("trace.queries", "trace_cards"),
    "kernel_table": ("trace.queries", "kernel_table"),
    "kernels_per_forward": ("trace.queries", "kernels_per_forward"),
    "kernels_under": ("trace.queries", "kernels_under"),
    "chain_tree": ("trace.queries", "chain_tree"),
    "op_costs": ("trace.queries", "op_costs"),
    "op_call_times": ("trace.queries", "op_call_times"),
    "launch_calls": ("trace.queries", "launch_calls"),
    "op_input": ("trace.queries", "op_input"),
    "mm_dims": ("trace.queries", "mm_dims"),
    "device_properties": ("trace.queries", "device_properties"),
    "load_traces": ("trace.ranks", "load_traces"),
    "combine_ranks": ("trace.ranks", "combine_ranks"),
    "MultiRankTrace": ("trace.ranks", "MultiRankTrace"),
    "overlap": ("trace.overlap", "overlap"),
    "idle_gaps": ("trace.overlap", "idle_gaps"),
    "rank_summary": ("trace.overlap", "rank_summary"),
    "achieved_flops": ("trace.flops", "achieved_flops"),
    # -- measuring here
    "profile": ("measure.profile", "profile"),
    "key_averages_frame": ("measure.profile", "key_averages_frame"),
    "infer_device": ("measure.profile", "infer_device"),
    "time_per_call": ("measure.timing", "time_per_call"),
    "time_end_to_end": ("measure.timing", "time_end_to_end"),
    "time_graphed": ("measure.timing", "time_graphed"),
    "relative_error": ("measure.numerics", "relative_error"),
    "Ceilings": ("measure.ceilings", "Ceilings"),
    "measure_ceilings": ("measure.ceilings", "measure_ceilings"),
    "H200_REFERENCE": ("measure.ceilings", "H200_REFERENCE"),
    "ceilings_for": ("lessons.results", "ceilings_for"),
    "reference_ceilings": ("lessons.results", "reference_ceilings"),
    "load_results": ("lessons.results", "load_results"),
    "kernel_floors": ("measure.kernel_floors", "kernel_floors"),
    "gemm_flops": ("measure.roofline", "gemm_flops"),
    "gemm_bytes": ("measure.roofline", "gemm_bytes"),
    "elementwise_bytes": ("measure.roofline", "elementwise_bytes"),
    "achieved": ("measure.roofline", "achieved"),
    "roofline_frame": ("measure.roofline", "roofline_frame"),
    "roofline_figure": ("measure.roofline", "roofline_figure"),
    "tile_waves": ("measure.roofline", "tile_waves"),
    "peak_memory": ("measure.memory", "peak_memory"),
    "memory_timeline": ("measure.memory", "memory_timeline"),
    "profile_memory": ("measure.memory", "profile_memory"),
    "memory_peaks": ("measure.memory", "memory_peaks"),
    "memory_figure": ("measure.memory", "memory_figure"),
    "allocator_history": ("measure.memory", "allocator_history"),
    "time_first_call": ("measure.compile_costs", "time_first_call"),
    "first_calls": ("measure.compile_costs", "first_calls"),
    "batch_inputs": ("measure.compile_counts", "batch_inputs"),
    "shape_sweep": ("measure.compile_counts", "shape_sweep"),
    "sweep_summary": ("measure.compile_counts", "sweep_summary"),
    "CompileCounter": ("measure.compile_counts", "CompileCounter"),
    "call_split": ("measure.compile_costs", "call_split"),
    "compile_wrapper_rows": ("measure.compile_costs", "compile_wrapper_rows"),
    # -- the course's kernels
    "geglu": ("kernels.geglu_pointwise", "geglu"),
    "gate_up_geglu": ("kernels.gate_up", "gate_up_geglu"),
    "gate_up_forward": ("kernels.gate_up", "gate_up_forward"),
    "gate_up_plans": ("kernels.launch_plans", "plans_table"),
    "pack_gate_up": ("kernels.gate_up", "pack_gate_up"),
    "unpack_gate_up": ("kernels.gate_up", "unpack_gate_up"),
    "gate_up_config_table": ("kernels.gate_up_tuning", "config_table"),
    "flash_attention": ("kernels.flash_attention", "flash_attention"),
    "attention_reference": ("kernels.flash_attention", "attention_reference"),
    "FlashAttentionFunction": ("kernels.flash_attention", "FlashAttentionFunction"),
    "CourseFlashAttention": ("kernels.flash_attention", "CourseFlashAttention"),
    "FlashConfig": ("kernels.flash_attention_tuning", "FlashConfig"),
    "flash_config_table": ("kernels.flash_attention_tuning", "config_table"),
    "flash_tuning_log": ("kernels.flash_attention_tuning", "tuning_log"),
    "GeGLU": ("kernels.modules", "GeGLU"),
    "CourseGeGLUMLP": ("kernels.modules", "CourseGeGLUMLP"),
    "FusedGeGLUMLP": ("kernels.modules", "FusedGeGLUMLP"),
    # -- the GeGLU MLP
    "MLPShape": ("mlp.model", "MLPShape"),
    "BLOG_SHAPE": ("mlp.model", "BLOG_SHAPE"),
    "CPU_SHAPE": ("mlp.model", "CPU_SHAPE"),
    "MLPConfig": ("mlp.model", "MLPConfig"),
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
    "kernel_role": ("mlp.plans", "kernel_role"),
    "geglu_bytes": ("mlp.plans", "geglu_bytes"),
    "geglu_mlp_flops": ("mlp.plans", "geglu_mlp_flops"),
    "VARIANTS": ("mlp.variants", "VARIANTS"),
    "VariantUnavailable": ("mlp.variants", "VariantUnavailable"),
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
    "TRAINING_VARIANTS": ("mlp.variants", "TRAINING_VARIANTS"),
    "build_training_variant": ("mlp.variants", "build_training"),
    "saved_bytes": ("mlp.bench_measure", "saved_bytes"),
    "MLP_BENCH_SHAPES": ("mlp.bench_shapes", "SHAPES"),
    "check_mlp_targets": ("mlp.targets", "check_targets"),
    "LIVE_VARIANTS": ("mlp.bench", "LIVE_VARIANTS"),
    "run_variants_benchmark": ("mlp.bench", "run"),
    "load_benchmark_results": ("mlp.results", "load_results"),
    "BenchResults": ("mlp.results", "BenchResults"),
    # -- the attention block
    "AttentionConfig": ("attention.model", "AttentionConfig"),
    "CausalSelfAttention": ("attention.model", "CausalSelfAttention"),
    "KVCache": ("attention.model", "KVCache"),
    "manual_attention": ("attention.model", "manual_attention"),
    "future_mask": ("attention.model", "future_mask"),
    "apply_rope": ("attention.model", "apply_rope"),
    "AttentionShape": ("attention.costs", "AttentionShape"),
    "visible_pairs": ("attention.costs", "visible_pairs"),
    "attention_flops": ("attention.costs", "attention_flops"),
    "score_matrix_bytes": ("attention.costs", "score_matrix_bytes"),
    "fused_attention_bytes": ("attention.costs", "fused_attention_bytes"),
    "manual_attention_plan": ("attention.costs", "manual_attention_plan"),
    "plan_kernel_costs": ("attention.costs", "plan_kernel_costs"),
    "SDPA_OPS": ("attention.backends", "SDPA_OPS"),
    "sdpa_backends": ("attention.backends", "sdpa_backends"),
    "sdpa_fn": ("attention.backends", "sdpa_fn"),
    "force_sdpa_backend": ("attention.backends", "force_backend"),
    "backend_in_trace": ("attention.backends", "backend_in_trace"),
    "flex_fn": ("attention.flex", "flex_fn"),
    "flex_block_mask": ("attention.flex", "block_mask"),
    "attention_workloads": ("attention.workloads", ""),
    "score_sweep": ("attention.sweep", "score_sweep"),
    "run_attention_benchmark": ("attention.bench", "run"),
    "load_attention_results": ("attention.results", "load_attention_results"),
    "AttentionResults": ("attention.results", "AttentionResults"),
    # -- the whole model (a decoder built from the attention block and the MLP)
    "DecoderConfig": ("decoder.config", "DecoderConfig"),
    "DECODER_CONFIGS": ("decoder.config", "CONFIGS"),
    "decoder_configs_table": ("decoder.config", "configs_table"),
    "Decoder": ("decoder.model", "Decoder"),
    "build_model": ("decoder.model", "build_model"),
    "random_tokens": ("decoder.model", "random_tokens"),
    "next_token_loss": ("decoder.model", "next_token_loss"),
    "MODEL_PARTS": ("decoder.model", "PARTS"),
    "swap_layers": ("decoder.layers", "swap_layers"),
    "compile_blocks": ("decoder.layers", "compile_blocks"),
    "describe_layers": ("decoder.layers", "describe_layers"),
    "Generator": ("decoder.generate", "Generator"),
    "generate_dynamic": ("decoder.generate", "generate_dynamic"),
    "decode_timing": ("decoder.generate", "decode_timing"),
    "prefill_timing": ("decoder.generate", "prefill_timing"),
    "weight_read_floor_us": ("decoder.generate", "weight_read_floor_us"),
    "TrainingStep": ("decoder.training", "TrainingStep"),
    "make_optimizer": ("decoder.training", "make_optimizer"),
    "step_timing": ("decoder.training", "step_timing"),
    "step_peak_memory": ("decoder.training", "step_peak_memory"),
    "part_breakdown": ("decoder.breakdown", "part_breakdown"),
    "kernel_parts": ("decoder.breakdown", "kernel_parts"),
    "idle_share": ("decoder.breakdown", "idle_share"),
    "queue_latency_us": ("decoder.breakdown", "queue_latency_us"),
    "graph_prediction": ("decoder.breakdown", "graph_prediction"),
    "DECODER_CONFIGURATIONS": ("decoder.configurations", "CONFIGURATIONS"),
    "measure_configuration": ("decoder.configurations", "measure"),
    "decoder_workloads": ("decoder.workloads", ""),
    "run_decoder_benchmark": ("decoder.bench", "run"),
    "load_decoder_results": ("decoder.results", "load_decoder_results"),
    "DecoderResults": ("decoder.results", "DecoderResults"),
    # -- lessons: each notebook's own namespace (helpers.nb07.check, ...), then what several share
    **{f"nb{n:02d}": (f"lessons.nb{n:02d}", "") for n in range(10)},
    "exercises": ("lessons.exercises", ""),
    "on_gpu": ("lessons.display", "on_gpu"),
    "lesson_path": ("lessons.display", "lesson_path"),
    "environment_report": ("lessons.display", "environment_report"),
    "side_by_side": ("lessons.display", "side_by_side"),
    "reference_trace": ("lessons.display", "reference_trace"),
    "kernel_source": ("lessons.display", "kernel_source"),
    "layout_table": ("lessons.strides", "layout_table"),
    "storage_index": ("lessons.strides", "storage_index"),
    "strides_figure": ("lessons.strides", "strides_figure"),
    "busiest_op": ("lessons.open_exercises", "busiest_op"),
    "check_geglu_kernel": ("lessons.kernel_exercises", "check_geglu_kernel"),
    "kernel_device": ("lessons.kernel_exercises", "kernel_device"),
    "time_geglu_kernel": ("lessons.kernel_exercises", "time_geglu_kernel"),
    "check_attention_kernel": ("lessons.attention_exercises", "check_attention_kernel"),
    "check_attention_prediction": ("lessons.attention_exercises", "check_attention_prediction"),
    "gpu_view": ("lessons.attention_exercises", "gpu_view"),
    "reference_view": ("lessons.decoder_lesson", "reference_view"),
    "breakdown_figure": ("lessons.decoder_lesson", "breakdown_figure"),
    "gemm_layouts": ("lessons.decoder_lesson", "gemm_layouts"),
    "bottleneck": ("lessons.decoder_lesson", "bottleneck"),
    "check_variant": ("lessons.decoder_lesson", "check_variant"),
    "decoder_fixes": ("lessons.decoder_lesson", "decoder_fixes"),
}

__all__ = sorted(_EXPORTS)


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
