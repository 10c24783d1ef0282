"""The named ways to run the decoder that notebook 08 compares, and how each is measured.

A :class:`Configuration` says how the model is built (which MLP layer, which attention, fused
QKV, recomputation, compiled blocks) and how it runs (decode steps replayed from a CUDA graph, an
SDPA backend forced). :func:`measure` builds one and measures what it applies to:

- ``prefill``: one forward of a batch of prompts filling the KV cache; prompt tokens per second;
- ``decode``: decode steps issued back to back after a prefill; time per step, tokens per second;
- ``train``: a training step (forward, backward, fused AdamW); time, tokens per second, peak memory.

Every configuration starts from the same random weights (:func:`helpers.decoder.model.build_model`
with one seed). :data:`CONFIGURATIONS` lists them eager first, in the order of the final table.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

from ..attention.backends import force_backend
from ..checks import positive_int
from .config import DecoderConfig, get_config
from .generate import Generator, decode_timing, prefill_timing
from .layers import compile_blocks, swap_layers
from .model import Decoder, build_model, random_tokens
from .training import TrainingStep, step_peak_memory, step_timing

USES = ("prefill", "decode", "train")


@dataclass(frozen=True)
class Configuration:
    """How the decoder is built and run; see the module docstring."""

    name: str
    what: str
    uses: tuple[str, ...] = USES
    mlp: str = "eager"
    attention: str = "sdpa"
    fused_qkv: bool = False
    recompute: bool = False
    compiled: bool = False
    graph: bool = False
    sdpa_backend: str | None = None

    def build(self, config: DecoderConfig | str, device=None, dtype=None, seed: int = 0) -> Decoder:
        """A fresh model with this configuration's layers (compiled blocks when `compiled`)."""
        model = build_model(config, device, dtype, seed)
        swap_layers(model, mlp=self.mlp, attention=self.attention, fused_qkv=self.fused_qkv, recompute=self.recompute)
        return compile_blocks(model) if self.compiled else model

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """The context every call of this configuration runs in (a forced SDPA backend, or nothing)."""
        with force_backend(self.sdpa_backend) if self.sdpa_backend else contextlib.nullcontext():
            yield

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _c(name: str, what: str, uses: tuple[str, ...], **how: Any) -> Configuration:
    return Configuration(name=name, what=what, uses=uses, **how)


COURSE = {"mlp": "fused", "fused_qkv": True}  # the course's layers: fused gate+up MLP kernel, one QKV GEMM
CONFIGURATIONS: dict[str, Configuration] = {
    c.name: c
    for c in (
        _c("eager", "the model as written: eager PyTorch, SDPA (PyTorch's choice of backend)", USES),
        _c("eager+graph", "eager, each decode step replayed from a CUDA graph", ("decode",), graph=True),
        _c("compile", "torch.compile of every block (regional)", USES, compiled=True),
        _c(
            "compile+graph",
            "compiled blocks, each decode step replayed from a CUDA graph",
            ("decode",),
            compiled=True,
            graph=True,
        ),
        _c("course", "the course's layers: one QKV GEMM, the fused gate+up GeGLU MLP kernel", USES, **COURSE),
        _c("course+graph", "the course's layers, decode replayed from a CUDA graph", ("decode",), graph=True, **COURSE),
        _c(
            "course+compile",
            "the course's layers inside compiled blocks (the kernels run as they are)",
            ("prefill", "train"),
            compiled=True,
            **COURSE,
        ),
        _c(
            "course+compile+graph",
            "the course's layers in compiled blocks, decode replayed from a CUDA graph",
            ("decode",),
            compiled=True,
            graph=True,
            **COURSE,
        ),
        _c(
            "course-concat+compile+graph",
            "gate and up in one cuBLAS GEMM with the course's GeGLU kernel, one QKV GEMM, compiled blocks, "
            "decode replayed from a CUDA graph",
            ("decode",),
            compiled=True,
            graph=True,
            mlp="course",
            fused_qkv=True,
        ),
        _c(
            "course+flash",
            "the course's layers and its flash-attention kernel",
            ("prefill", "train"),
            attention="course",
            **COURSE,
        ),
        _c(
            "recompute",
            "eager, each MLP recomputed in the backward (torch.utils.checkpoint)",
            ("train",),
            recompute=True,
        ),
        _c(
            "course+recompute",
            "the course's layers, the fused MLP in its recompute mode",
            ("train",),
            recompute=True,
            **COURSE,
        ),
        _c("sdpa-flash", "eager, SDPA forced to FlashAttention-2", ("prefill",), sdpa_backend="flash"),
        _c(
            "sdpa-efficient",
            "eager, SDPA forced to the memory-efficient kernel",
            ("prefill",),
            sdpa_backend="efficient",
        ),
        _c("sdpa-cudnn", "eager, SDPA forced to cuDNN attention", ("prefill",), sdpa_backend="cudnn"),
        _c(
            "sdpa-math",
            "eager, SDPA forced to the math composite (the score matrix in memory)",
            ("prefill",),
            sdpa_backend="math",
        ),
    )
}


def get_configuration(configuration: str | Configuration) -> Configuration:
    """A :class:`Configuration` by name (see :data:`CONFIGURATIONS`), or the one given."""
    if isinstance(configuration, Configuration):
        return configuration
    if configuration not in CONFIGURATIONS:
        raise ValueError(f"unknown configuration {configuration!r}; known: {', '.join(CONFIGURATIONS)}")
    return CONFIGURATIONS[configuration]


@dataclass(frozen=True)
class Sizes:
    """The workload sizes of a measurement: prefill, decode and training batches."""

    prefill_batch: int = 4
    prompt_len: int = 1024
    decode_batch: int = 1
    decode_prompt_len: int = 128
    decode_steps: int = 50
    train_batch: int = 16
    train_seq: int = 1024

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            positive_int(name, value)

    def decode_max_len(self) -> int:
        return self.decode_prompt_len + 2 * self.decode_steps + 8


GPU_SIZES = Sizes()

# Training memory of the 1b preset (benchmarks/results/h200_decoder.json, eager, 16 x 1024 tokens):
# 43.6 GB at its peak. What does not grow with the batch is bf16 weights, gradients and AdamW's two
# states, 8 bytes per parameter (9.1 GB); the rest, about 2.2 GB per sequence of 1024 tokens, does.
TRAIN_STATE_BYTES_PER_PARAMETER = 8
TRAIN_BYTES_PER_1024_TOKENS = 2.2e9
MEMORY_USE = 0.8  # of the GPU's memory a training step may plan on (the allocator, cuBLAS workspaces, CUDA)


def gpu_sizes(total_memory_bytes: int) -> Sizes:
    """:data:`GPU_SIZES` with the training batch halved until the 1b preset's training step (the model a
    GPU trains in notebook 08) is expected to fit in 80% of `total_memory_bytes`. An H200 or any 80 GB GPU
    keeps 16 x 1024 tokens, a 40 GB A100 gets 8, a 24 GB L4 4. Below about 14 GB even one sequence does
    not fit: the batch stays 1 and the training rows say they failed.
    """
    positive_int("total_memory_bytes", total_memory_bytes)
    state = TRAIN_STATE_BYTES_PER_PARAMETER * get_config("1b").num_parameters()
    per_sequence = TRAIN_BYTES_PER_1024_TOKENS * GPU_SIZES.train_seq / 1024
    batch = GPU_SIZES.train_batch
    while batch > 1 and state + batch * per_sequence > MEMORY_USE * total_memory_bytes:
        batch //= 2
    return replace(GPU_SIZES, train_batch=batch)


CPU_SIZES = Sizes(prefill_batch=2, prompt_len=64, decode_prompt_len=16, decode_steps=10, train_batch=4, train_seq=128)


def _free() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def measure(
    configuration: Configuration | str,
    config: DecoderConfig | str,
    sizes: Sizes,
    device=None,
    dtype=None,
    uses: tuple[str, ...] | None = None,
    log: Callable[[str], None] | None = None,
    deadline: float | None = None,
    compile_reserve_s: float = 0.0,
) -> list[dict[str, Any]]:
    """Build `configuration` on `device` and measure each of its uses; one dict per use.

    Each dict has ``configuration``, ``use``, ``status`` ("ok", "failed" with its ``reason``, or
    "skipped" when the configuration does not apply here or the time is up) and the use's numbers.
    A failure in one use does not stop the others. `deadline` (a ``time.perf_counter()`` value):
    uses not started by then are skipped; a compiled configuration's uses (each may compile) also
    need `compile_reserve_s` left.
    """
    conf = get_configuration(configuration)
    cfg = get_config(config)
    wanted = [u for u in (uses or conf.uses) if u in conf.uses]
    rows: list[dict[str, Any]] = []
    try:
        model = conf.build(cfg, device, dtype)
    except Exception as err:  # noqa: BLE001 - recorded, the run goes on
        return [_row(conf, u, "failed", reason=f"build: {type(err).__name__}: {err}") for u in wanted]
    dev = model.embed_tokens.weight.device
    for use in wanted:
        if deadline is not None and deadline - time.perf_counter() < (compile_reserve_s if conf.compiled else 0.0):
            rows.append(_row(conf, use, "skipped", reason="time budget used up"))
            continue
        if conf.graph and dev.type != "cuda":
            rows.append(_row(conf, use, "skipped", reason="CUDA graphs need a CUDA GPU"))
            continue
        try:
            with conf.running():
                numbers = _MEASURES[use](model, cfg, sizes, conf)
            rows.append(_row(conf, use, "ok", **numbers))
        except Exception as err:  # noqa: BLE001 - recorded, the run goes on
            rows.append(_row(conf, use, "failed", reason=f"{type(err).__name__}: {str(err).strip()[:400]}"))
        if log:
            log(_describe(rows[-1]))
        _free()
    del model
    _free()
    return rows


def _row(conf: Configuration, use: str, status: str, **numbers: Any) -> dict[str, Any]:
    return {"configuration": conf.name, "use": use, "status": status, **numbers}


def _describe(row: dict[str, Any]) -> str:
    if row["status"] != "ok":
        return f"{row['configuration']:22s} {row['use']:8s} {row['status']}: {row.get('reason', '')}"
    value = {"prefill": "prefill_us", "decode": "step_us", "train": "step_ms"}[row["use"]]
    unit = "ms" if value.endswith("ms") else "us"
    return (
        f"{row['configuration']:22s} {row['use']:8s} {row[value]:10.1f} {unit}  {row['tokens_per_s']:12,.0f} tokens/s"
    )


def _prefill(model: Decoder, cfg: DecoderConfig, sizes: Sizes, conf: Configuration) -> dict[str, Any]:
    gen = Generator(model, sizes.prefill_batch, sizes.prompt_len + 1)
    prompts = random_tokens(cfg, sizes.prefill_batch, sizes.prompt_len, device=gen.device)
    return prefill_timing(gen, prompts)


def _decode(model: Decoder, cfg: DecoderConfig, sizes: Sizes, conf: Configuration) -> dict[str, Any]:
    # only decode steps are timed: a compiled model's prefill runs eagerly (no compile for its shape)
    gen = Generator(model, sizes.decode_batch, sizes.decode_max_len(), graph=conf.graph, compiled_prefill=False)
    prompts = random_tokens(cfg, sizes.decode_batch, sizes.decode_prompt_len, device=gen.device)
    out = decode_timing(gen, prompts, steps=sizes.decode_steps)
    del gen
    return out


def _train(model: Decoder, cfg: DecoderConfig, sizes: Sizes, conf: Configuration) -> dict[str, Any]:
    step = TrainingStep(model, sizes.train_batch, sizes.train_seq, optimizer="fused")
    out = step_timing(step)
    out["tokens"] = step.tokens_per_step
    if step.tokens.device.type == "cuda":
        out.update(step_peak_memory(step))
    del step
    return out


_MEASURES = {"prefill": _prefill, "decode": _decode, "train": _train}
