"""The decoder workloads notebook 08, the benchmark and the recording script run, defined once
(GPU: the ``1b`` model in bf16; CPU: the ``small`` model in float32).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import torch

from ..checks import positive_int
from ..measure.workload import Built, default_dtype, workload_device
from .config import DECODER_CONFIGS, DecoderConfig, get_config
from .generate import Generator
from .layers import Configuration
from .model import random_tokens
from .training import TrainingStep


@dataclass(frozen=True)
class Sizes:
    """The workload sizes: prefill, decode and training batches."""

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
# large enough that a CPU prefill's GEMMs, not the dispatch of its operators, dominate
CPU_SIZES = Sizes(prefill_batch=2, prompt_len=64, decode_prompt_len=16, decode_steps=10, train_batch=4, train_seq=128)

# The configurations notebook 08 and the recorded traces run (the benchmark measures more).
CONFIGURATIONS: dict[str, Configuration] = {
    c.name: c
    for c in (
        Configuration("eager"),
        Configuration("eager+graph", graph=True),
        Configuration("compile+graph", compiled=True, graph=True),
        Configuration("recompute", recompute=True),
    )
}


def get_configuration(configuration: str | Configuration) -> Configuration:
    """A :class:`~helpers.decoder.layers.Configuration` by name (see :data:`CONFIGURATIONS`), or the one given."""
    if isinstance(configuration, Configuration):
        return configuration
    if configuration not in CONFIGURATIONS:
        raise ValueError(f"unknown configuration {configuration!r}; known: {', '.join(CONFIGURATIONS)}")
    return CONFIGURATIONS[configuration]


# The transfer exercise's model: the 1B model's widths, 4 layers, Llama 3's vocabulary of 128,256 tokens.
VARIANT_X = DECODER_CONFIGS["1b"].with_(vocab_size=128256, num_hidden_layers=4, name="variant X")
# Its CPU stand-in: the small widths with a 64,000-token vocabulary.
VARIANT_X_CPU = DECODER_CONFIGS["small"].with_(vocab_size=64000, name="variant X (CPU)")
TRAINING_VIEW_LAYERS = 4  # the training reference traces keep 4 of the 1B model's 16 layers (small files)


def default_sizes(device: torch.device | str | None = None) -> Sizes:
    """:data:`GPU_SIZES` on a GPU, :data:`CPU_SIZES` on a CPU."""
    return GPU_SIZES if workload_device(device).type == "cuda" else CPU_SIZES


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

    training_step.step = step  # the TrainingStep itself: notebook 08 times its optimizer alone, unprofiled
    details = {"config": cfg.name, "configuration": conf.name, "batch": sz.train_batch, "seq": sz.train_seq}
    details.update(optimizer=optimizer, parameter_tensors=len(list(model.parameters())))
    return Built(f"train_{conf.name}", training_step, (step.tokens,), dev, dt, cfg, details)


def variant_x(device=None, sizes: Sizes | None = None, prefill_logits: str = "all") -> Built:
    """The transfer exercise: a prefill of the variant model (its make-up is for the learner to find)."""
    dev = workload_device(device)
    return prefill(dev, VARIANT_X if dev.type == "cuda" else VARIANT_X_CPU, sizes, prefill_logits=prefill_logits)


def training_view(device=None, configuration: str | Configuration = "eager", optimizer: str = "fused") -> Built:
    """The training step notebook 08 profiles: on a GPU the 1B widths, 4 layers, 4 x 1024 tokens (small traces)."""
    dev = workload_device(device)
    if dev.type != "cuda":
        return training(dev, configuration=configuration, optimizer=optimizer)
    cfg = DECODER_CONFIGS["1b"].with_(num_hidden_layers=TRAINING_VIEW_LAYERS, name=f"1b, {TRAINING_VIEW_LAYERS} layers")
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
