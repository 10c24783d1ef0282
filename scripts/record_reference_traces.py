"""Record every reference trace the course ships, in one run on a GPU.

    python scripts/record_reference_traces.py --out traces            # on a CUDA machine
    python scripts/record_reference_traces.py --device cpu --out /tmp/x --only linear_bias

Each recipe below builds a workload from helpers.workloads, profiles a few steps with
helpers.profile (no Python stacks, so files stay small) and saves ``<prefix>_<name>.json.gz``
with its provenance (GPU, driver, torch, triton, date, shapes, command) embedded in the file and
listed in ``traces/h200_provenance.json`` beside the traces. Recipes whose optional dependency is missing
(e.g. liger-kernel) are skipped with a message, never faked.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import helpers  # noqa: E402  (first: on a CPU-only machine it switches on Triton's interpreter)
from helpers.attention.workloads import GPU_VIEWS as ATTENTION_VIEWS  # noqa: E402
from helpers.decoder.workloads import GPU_VIEWS as DECODER_VIEWS  # noqa: E402
from helpers.measure.device import provenance, resolve_device  # noqa: E402
from helpers.mlp import workloads as wl  # noqa: E402


@dataclass(frozen=True)
class Recipe:
    name: str
    build: Callable[[torch.device], wl.Built]
    what: str
    steps: int = 3
    warmup: int = 3
    setup: Callable[[], None] | None = None  # e.g. switch on the inductor C++ kernel profile
    memory: bool = False  # record allocations and frees too (profile_memory=True)


def _inductor_cpu_profile() -> None:
    import torch._inductor.config as inductor_config

    inductor_config.cpp.enable_kernel_profile = True


def _gpu_only(build: Callable[[torch.device], wl.Built], why: str) -> Callable[[torch.device], wl.Built]:
    """A recipe recorded on a GPU only: elsewhere it is skipped with `why` (the script skips on ImportError)."""

    def wrapped(device: torch.device) -> wl.Built:
        if device.type != "cuda":
            raise ImportError(f"recorded on a GPU only: {why}")
        return build(device)

    return wrapped


# Every recipe records 3 steps after 3 warm-up calls (kernel times on a GPU vary little from step to
# step; the lessons read medians over the steps). Every trace stays small (kB gzipped; tests allow 3 MB).

# What each of notebook 07's GPU views shows (the workloads themselves are helpers.attention.workloads.GPU_VIEWS).
ATTENTION_WHAT: dict[str, str] = {
    "attention_block": "CausalSelfAttention (q/k/v/o projections, RoPE, SDPA), eager (notebook 07)",
    "attention_block_fused_qkv": "the same block with one fused QKV projection (notebook 07)",
    "attention_manual": "hand-written attention: q @ k.T * scale, masked_fill, softmax, @ v (notebook 07)",
    "attention_sdpa_math": "F.scaled_dot_product_attention forced to MATH (notebook 07)",
    "attention_sdpa_flash": "F.scaled_dot_product_attention forced to FLASH_ATTENTION (notebook 07)",
    "attention_sdpa_efficient": "F.scaled_dot_product_attention forced to EFFICIENT_ATTENTION (notebook 07)",
    "attention_sdpa_cudnn": "F.scaled_dot_product_attention forced to CUDNN_ATTENTION (notebook 07)",
    "attention_manual_compiled": "torch.compile of the hand-written attention (notebook 07)",
    "attention_flex_causal": "torch.compile(flex_attention) with a causal BlockMask (notebook 07)",
    "attention_flex_sliding_window": "torch.compile(flex_attention) with a 256-key sliding-window BlockMask (notebook 07)",
    "attention_course": "the course's Triton flash-attention kernel, helpers.CourseFlashAttention (notebook 07)",
}
# Compiled on a CPU, the generated C++ kernels become profile rows only with the kernel profile on.
_ATTENTION_SETUP = {"attention_manual_compiled", "attention_flex_causal", "attention_flex_sliding_window"}


def _failures_reported(build: Callable[[torch.device], wl.Built]) -> Callable[[torch.device], wl.Built]:
    """A recipe whose any failure (a compile error, a capture refused) is reported, and the next recipes recorded."""

    def wrapped(device: torch.device) -> wl.Built:
        try:
            return build(device)
        except (ImportError, RuntimeError):
            raise
        except Exception as err:  # noqa: BLE001 - the main loop reports RuntimeErrors and goes on
            raise RuntimeError(f"{type(err).__name__}: {err}") from err

    return wrapped


RECIPES: list[Recipe] = [
    Recipe(
        "linear_bias", lambda d: wl.linear_layer(d), "nn.Linear(32, 64, bias=True) on [1024, 32] (notebooks 00, 02)"
    ),
    Recipe("matmul_add", lambda d: wl.matmul_then_add(d), "x @ W.T + b on [1024, 32] (notebook 02)"),
    Recipe(
        "linear_bias_compiled",
        lambda d: wl.compiled(wl.linear_layer(d)),
        "torch.compile(nn.Linear(32, 64)) (notebook 02)",
        setup=_inductor_cpu_profile,
    ),
    Recipe("mlp_eager", lambda d: wl.geglu_mlp(d), "SimpleGeGLUMLP, eager (notebook 03)"),
    Recipe(
        "memory_mlp",
        lambda d: wl.geglu_mlp(d),
        "SimpleGeGLUMLP, eager, with every allocation and free recorded (profile_memory=True): the saved-trace "
        "memory view's test data (memory over time, the peak by operator)",
        steps=3,
        memory=True,
    ),
    Recipe(
        "mlp_compiled",
        lambda d: wl.compiled(wl.geglu_mlp(d)),
        "SimpleGeGLUMLP under torch.compile (notebook 04)",
        setup=_inductor_cpu_profile,
    ),
    Recipe(
        "mlp_compiled_max_autotune",
        _gpu_only(
            lambda d: wl.compiled(wl.geglu_mlp(d), mode="max-autotune-no-cudagraphs"),
            "max-autotune benchmarks Triton GEMM templates on the GPU",
        ),
        "SimpleGeGLUMLP under torch.compile(mode='max-autotune-no-cudagraphs'): notebook 04 attributes "
        "its time kernel by kernel (GEMM templates, the separate pointwise kernel)",
    ),
    Recipe(
        "mlp_liger",
        lambda d: wl.geglu_mlp_hand_tuned(d, sources=("hub", "cache", "package")),
        "SimpleGeGLUMLP's weights in Liger's LigerGEGLUMLP (kernels-community/liger-kernels v1 from the Hub "
        "or its cache, else the liger-kernel package) (notebook 05)",
    ),
    Recipe(
        "mlp_course_kernel",
        lambda d: wl.geglu_mlp_hand_tuned(d, sources=("local",)),
        "SimpleGeGLUMLP's weights in CourseGeGLUMLP: the course's Triton GeGLU kernel loaded from "
        "local_kernels/course-geglu with kernels.get_local_kernel (notebook 05)",
    ),
    Recipe(
        "views_copy",
        lambda d: wl.views_and_copies(d),
        "five views (t, transpose, view, reshape, as_strided) and two copies (contiguous, flatten) "
        "of the MLP's [tokens, dim] activations (notebook 01)",
    ),
    Recipe(
        "transpose_copies",
        lambda d: wl.transpose_copies(d, tiled=True),
        "the same [tokens, dim] tensor copied three ways: x.clone(), ATen's x.t().contiguous(), and "
        "torch.compile's tiled transpose (notebook 01: bandwidth of a transposing copy)",
    ),
    *(
        Recipe(
            name,
            build,
            ATTENTION_WHAT[name],
            setup=_inductor_cpu_profile if name in _ATTENTION_SETUP else None,
        )
        for name, build in ATTENTION_VIEWS.items()
    ),
    # Notebook 08's whole model (helpers.decoder.workloads.GPU_VIEWS): few steps, so each file stays small.
    *(
        Recipe(
            name,
            _failures_reported(
                _gpu_only(view.build, "CUDA graphs replay GPU launches") if view.gpu_only else view.build
            ),
            view.what,
            steps=view.steps,
            warmup=2,
        )
        for name, view in DECODER_VIEWS.items()
    ),
]
MAX_TRACE_BYTES = 3_000_000  # a reference trace a learner downloads with the course


def _gpu_prefix(device: torch.device) -> str:
    if device.type != "cuda":
        return "cpu"
    name = torch.cuda.get_device_name(device).lower()
    for short in ("h200", "h100", "a100", "l4", "a10g", "t4"):
        if short in name:
            return short
    return "gpu"


def _provenance(device: torch.device) -> dict:
    """The measurement's provenance, in the keys reference traces have always carried."""
    prov = provenance(device)
    prov["recorded_on"] = prov.pop("date")[:10]
    return prov


def record(recipe: Recipe, device: torch.device, out_dir: Path, prefix: str, base_prov: dict) -> dict:
    """Profile one recipe and save it; returns its provenance row."""
    if recipe.setup:
        recipe.setup()
    torch._dynamo.reset()
    built = recipe.build(device)
    trace = helpers.profile(
        built.fn,
        *built.inputs,
        steps=recipe.steps,
        warmup=recipe.warmup,
        label=f"{prefix}_{recipe.name}",
        profile_memory=recipe.memory,
    )
    shapes = {k: v for k, v in built.details.items()}
    extra = {
        **base_prov,
        "what": recipe.what,
        "dtype": str(built.dtype).replace("torch.", ""),
        "shapes": shapes,
        "steps": recipe.steps,
        "warmup": recipe.warmup,
    }
    trace.info.extra.update({k: v for k, v in extra.items() if k not in {"device", "torch", "recorded_on"}})
    target = out_dir / f"{prefix}_{recipe.name}.json.gz"
    # The recording script is the one writer allowed to (re)write reference traces.
    trace.save(target, allow_reference=True)
    kernels = trace.kernels(allow_empty=True)
    return {
        "file": target.name,
        "what": recipe.what,
        "bytes": target.stat().st_size,
        "kernels_per_step": round(len(kernels) / max(len(trace.steps), 1), 2),
        **extra,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=helpers.paths.TRACES_DIR)
    parser.add_argument("--device", default=None, help="cuda (default when present) or cpu")
    parser.add_argument("--only", nargs="*", default=None, help="recipe names to record (default: all)")
    args = parser.parse_args(argv)
    device = resolve_device(args.device)
    args.out.mkdir(parents=True, exist_ok=True)
    prefix = _gpu_prefix(device)
    base = _provenance(device)
    chosen = [r for r in RECIPES if args.only is None or r.name in args.only]
    rows = []
    for i, recipe in enumerate(chosen, 1):
        t0 = time.perf_counter()
        print(f"[{i}/{len(chosen)}] {recipe.name}: {recipe.what} ...", flush=True)
        try:
            rows.append(record(recipe, device, args.out, prefix, base))
        except ImportError as err:
            print(f"    skipped: {err}", flush=True)
            continue
        except RuntimeError as err:  # e.g. an SDPA backend this GPU lacks: record the others
            print(
                f"    failed: {str(err).strip().splitlines()[0][:300] if str(err).strip() else type(err).__name__}",
                flush=True,
            )
            continue
        if rows[-1]["bytes"] > MAX_TRACE_BYTES:
            print(
                f"    warning: {rows[-1]['file']} is over {MAX_TRACE_BYTES / 1e6:.0f} MB: record fewer steps",
                flush=True,
            )
        print(
            f"    saved {rows[-1]['file']} ({rows[-1]['bytes'] / 1e3:.0f} kB, "
            f"{rows[-1]['kernels_per_step']} kernels/step) in {time.perf_counter() - t0:.1f}s",
            flush=True,
        )
    index = args.out / f"{prefix}_provenance.json"
    old = json.loads(index.read_text()) if index.exists() else {}
    old.update({r["file"]: r for r in rows})
    index.write_text(json.dumps(old, indent=1, sort_keys=True, default=str) + "\n")
    print(f"provenance of {len(old)} traces in {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
