"""The decoder workloads notebook 08, the benchmark and the recording script profile, defined once.

Each builder returns a :class:`helpers.measure.workload.Built`: call ``fn(*inputs)`` (or hand it to
:func:`helpers.profile`). On a GPU the 1B model (:data:`~helpers.decoder.config.CONFIGS` ``"1b"``)
in bf16 at the benchmark's sizes; on a CPU the small model (4 layers, hidden 256) in float32 at
small sizes: large enough that its GEMMs, not the dispatch of its operators, dominate a prefill.

- :func:`prefill`: one prefill of a batch of prompts (the KV cache filled, the first tokens chosen);
- :func:`decode`: one decode step, the cache already filled by a prefill (each call adds a token;
  with a CUDA-graph configuration the step is captured before the first call);
- :func:`training`: one training step (forward, backward, fused AdamW), gradients on even when
  called under ``torch.no_grad`` (as the profiler helpers do by default).

:data:`GPU_VIEWS` names the workloads whose H200 traces ship in ``traces/`` (few layers for the
training step, to keep the files small); :data:`VARIANT_X` is the model of the transfer exercise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from ..measure.workload import Built, default_dtype, workload_device
from .config import CONFIGS, DecoderConfig, get_config
from .configurations import CPU_SIZES, GPU_SIZES, Configuration, Sizes, get_configuration, gpu_sizes
from .generate import Generator
from .model import random_tokens
from .training import TrainingStep

# The transfer exercise's model: the 1B model's widths, 4 layers, Llama 3's vocabulary of 128,256 tokens.
VARIANT_X = CONFIGS["1b"].with_(vocab_size=128256, num_hidden_layers=4, name="variant X")
# Its CPU stand-in: the small widths with a 64,000-token vocabulary.
VARIANT_X_CPU = CONFIGS["small"].with_(vocab_size=64000, name="variant X (CPU)")
TRAINING_VIEW_LAYERS = 4  # the training reference traces keep 4 of the 1B model's 16 layers (small files)


def default_sizes(device: torch.device | str | None = None) -> Sizes:
    """The workload sizes for `device`: on a GPU the benchmark's, with a training batch that fits its
    memory (:func:`gpu_sizes`: 16 x 1024 tokens on an H200, 4 on a 24 GB L4); small ones on a CPU."""
    dev = workload_device(device)
    if dev.type != "cuda":
        return CPU_SIZES
    return gpu_sizes(torch.cuda.get_device_properties(dev).total_memory)


def _setup(device, config, sizes) -> tuple[torch.device, torch.dtype, DecoderConfig, Sizes]:
    dev = workload_device(device)
    cfg = get_config(config or ("1b" if dev.type == "cuda" else "small"))
    return dev, default_dtype(dev), cfg, sizes or default_sizes(dev)


def prefill(
    device=None,
    config: DecoderConfig | str | None = None,
    sizes: Sizes | None = None,
    configuration: str | Configuration = "eager",
    prefill_logits: str = "all",
    seed: int = 0,
) -> Built:
    """One prefill of ``[prefill_batch, prompt_len]`` prompts; ``fn(prompts)`` returns the first new tokens."""
    dev, dt, cfg, sz = _setup(device, config, sizes)
    conf = get_configuration(configuration)
    model = conf.build(cfg, dev, dt, seed).eval()
    gen = Generator(model, sz.prefill_batch, sz.prompt_len + 1, prefill_logits=prefill_logits)
    prompts = random_tokens(cfg, sz.prefill_batch, sz.prompt_len, device=dev, seed=seed)

    def run_prefill(tokens: torch.Tensor) -> torch.Tensor:
        with conf.running():
            return gen.prefill(tokens)

    details = {"config": cfg.name, "configuration": conf.name, "batch": sz.prefill_batch, "prompt_len": sz.prompt_len}
    return Built(f"prefill_{conf.name}", run_prefill, (prompts,), dev, dt, cfg, {**details, "logits": prefill_logits})


def decode(
    device=None,
    config: DecoderConfig | str | None = None,
    sizes: Sizes | None = None,
    configuration: str | Configuration = "eager",
    room: int = 64,
    seed: int = 0,
) -> Built:
    """One decode step after a prefill of ``[decode_batch, decode_prompt_len]``; `room` more steps fit."""
    dev, dt, cfg, sz = _setup(device, config, sizes)
    conf = get_configuration(configuration)
    model = conf.build(cfg, dev, dt, seed).eval()
    gen = Generator(model, sz.decode_batch, sz.decode_prompt_len + room, graph=conf.graph, compiled_prefill=False)
    prompts = random_tokens(cfg, sz.decode_batch, sz.decode_prompt_len, device=dev, seed=seed)
    gen.prefill(prompts)
    if conf.graph:
        gen.capture()

    def decode_step(token: torch.Tensor) -> torch.Tensor:
        return gen.step()

    details = {
        "config": cfg.name,
        "configuration": conf.name,
        "batch": sz.decode_batch,
        "prompt_len": sz.decode_prompt_len,
    }
    return Built(f"decode_{conf.name}", decode_step, (gen.token,), dev, dt, cfg, details)


def training(
    device=None,
    config: DecoderConfig | str | None = None,
    sizes: Sizes | None = None,
    configuration: str | Configuration = "eager",
    optimizer: str = "fused",
    seed: int = 0,
) -> Built:
    """One training step on ``[train_batch, train_seq]`` tokens; ``fn(tokens)`` returns the loss."""
    dev, dt, cfg, sz = _setup(device, config, sizes)
    conf = get_configuration(configuration)
    model = conf.build(cfg, dev, dt, seed)
    step = TrainingStep(model, sz.train_batch, sz.train_seq, optimizer=optimizer, seed=seed)

    def training_step(tokens: torch.Tensor) -> torch.Tensor:
        with torch.enable_grad(), conf.running():
            return step()

    details = {
        "config": cfg.name,
        "configuration": conf.name,
        "batch": sz.train_batch,
        "seq": sz.train_seq,
        "optimizer": optimizer,
    }
    return Built(f"train_{conf.name}", training_step, (step.tokens,), dev, dt, cfg, details)


def variant_x(device=None, sizes: Sizes | None = None, prefill_logits: str = "all") -> Built:
    """The transfer exercise: a prefill of the variant model (its make-up is for the learner to find)."""
    dev = workload_device(device)
    return prefill(dev, VARIANT_X if dev.type == "cuda" else VARIANT_X_CPU, sizes, prefill_logits=prefill_logits)


def training_view(device=None, configuration: str | Configuration = "eager", optimizer: str = "fused") -> Built:
    """The training step notebook 08 profiles: on a GPU the 1B model's widths with 4 layers and 4 x 1024
    tokens (small traces, quick memory profiles), on a CPU the small model at the CPU sizes."""
    dev = workload_device(device)
    if dev.type != "cuda":
        return training(dev, configuration=configuration, optimizer=optimizer)
    cfg = CONFIGS["1b"].with_(num_hidden_layers=TRAINING_VIEW_LAYERS, name=f"1b, {TRAINING_VIEW_LAYERS} layers")
    return training(dev, cfg, replace(GPU_SIZES, train_batch=4), configuration=configuration, optimizer=optimizer)


@dataclass(frozen=True)
class View:
    """A workload whose H200 trace ships in ``traces/h200_<name>.json.gz``: how to build it, what it shows."""

    build: Callable[[torch.device], Built]
    what: str
    gpu_only: bool = False  # CUDA graphs: nothing to record on a CPU
    steps: int = 3


GPU_VIEWS: dict[str, View] = {
    "decoder_prefill": View(lambda d: prefill(d), "prefill of 4 x 1024 prompt tokens, 1B decoder, eager (notebook 08)"),
    "decoder_decode": View(
        lambda d: decode(d), "one decode step at batch 1 after a 128-token prompt, eager (notebook 08)"
    ),
    "decoder_decode_graph": View(
        lambda d: decode(d, configuration="eager+graph"),
        "the same decode step replayed from a CUDA graph (notebook 08)",
        gpu_only=True,
    ),
    "decoder_decode_compiled_graph": View(
        lambda d: decode(d, configuration="compile+graph"),
        "the decode step of compiled blocks replayed from a CUDA graph (notebook 08)",
        gpu_only=True,
    ),
    "decoder_train": View(
        lambda d: training_view(d),
        f"a training step (fused AdamW) of the 1B model's widths with {TRAINING_VIEW_LAYERS} layers, 4 x 1024 tokens "
        "(notebook 08)",
    ),
    "decoder_variant_x": View(lambda d: variant_x(d), "the transfer exercise's model variant, prefill (notebook 08)"),
}
