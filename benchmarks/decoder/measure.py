"""How the decoder benchmark measures one configuration, the graph prediction and the transfer exercise.

- ``prefill``: one forward of a batch of prompts filling the KV cache; prompt tokens per second;
- ``decode``: decode steps issued back to back after a prefill; time per step, tokens per second;
- ``train``: a training step (forward, backward, fused AdamW); time, tokens per second, peak memory.

Every configuration starts from the same random weights (one seed).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

import torch

from helpers.decoder.breakdown import graph_prediction, part_breakdown
from helpers.decoder.config import DecoderConfig, get_config
from helpers.decoder.generate import Generator, decode_timing, prefill_timing
from helpers.decoder.model import Decoder, random_tokens
from helpers.decoder.training import TrainingStep
from helpers.decoder.workloads import VARIANT_X, Sizes, decode, prefill
from helpers.measure.device import synchronize
from helpers.measure.profile import profile
from helpers.measure.timing import time_per_call

from .configurations import RUNS, Run


def _free() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _row(run: Run, use: str, status: str, **numbers: Any) -> dict[str, Any]:
    return {"configuration": run.name, "use": use, "status": status, **numbers}


def describe(row: dict[str, Any]) -> str:
    """One measurement as a progress line."""
    if row["status"] != "ok":
        return f"{row['configuration']:22s} {row['use']:8s} {row['status']}: {row.get('reason', '')}"
    value = {"prefill": "prefill_us", "decode": "step_us", "train": "step_ms"}[row["use"]]
    unit = "ms" if value.endswith("ms") else "us"
    return (
        f"{row['configuration']:22s} {row['use']:8s} {row[value]:10.1f} {unit}  {row['tokens_per_s']:12,.0f} tokens/s"
    )


def measure(
    run: Run | str,
    config: DecoderConfig | str,
    sizes: Sizes,
    device=None,
    dtype=None,
    uses: tuple[str, ...] | None = None,
    log: Callable[[str], None] | None = None,
    deadline: float | None = None,
    compile_reserve_s: float = 0.0,
) -> list[dict[str, Any]]:
    """Build `run`'s configuration on `device` and measure each of its uses; one dict per use.

    ``status`` is "ok", "failed" (with its ``reason``) or "skipped" (does not apply here, or the time
    is up: uses not started by `deadline`, a ``time.perf_counter()`` value, are skipped; a compiled
    configuration's uses also need `compile_reserve_s` left). A failure does not stop the other uses.
    """
    run = RUNS[run] if isinstance(run, str) else run
    conf, cfg = run.configuration, get_config(config)
    wanted = [u for u in (uses or run.uses) if u in run.uses]
    rows: list[dict[str, Any]] = []
    try:
        model = conf.build(cfg, device, dtype)
    except Exception as err:  # noqa: BLE001 - recorded, the run goes on
        return [_row(run, u, "failed", reason=f"build: {type(err).__name__}: {err}") for u in wanted]
    dev = model.embed_tokens.weight.device
    for use in wanted:
        if deadline is not None and deadline - time.perf_counter() < (compile_reserve_s if conf.compiled else 0.0):
            rows.append(_row(run, use, "skipped", reason="time budget used up"))
            continue
        if conf.graph and dev.type != "cuda":
            rows.append(_row(run, use, "skipped", reason="CUDA graphs need a CUDA GPU"))
            continue
        try:
            with conf.running():
                numbers = _MEASURES[use](model, cfg, sizes, conf.graph)
            rows.append(_row(run, use, "ok", **numbers))
        except Exception as err:  # noqa: BLE001 - recorded, the run goes on
            rows.append(_row(run, use, "failed", reason=f"{type(err).__name__}: {str(err).strip()[:400]}"))
        if log:
            log(describe(rows[-1]))
        _free()
    del model
    _free()
    return rows


def _prefill(model: Decoder, cfg: DecoderConfig, sizes: Sizes, graph: bool) -> dict[str, Any]:
    gen = Generator(model, sizes.prefill_batch, sizes.prompt_len + 1)
    prompts = random_tokens(cfg, sizes.prefill_batch, sizes.prompt_len, device=gen.device)
    return prefill_timing(gen, prompts)


def _decode(model: Decoder, cfg: DecoderConfig, sizes: Sizes, graph: bool) -> dict[str, Any]:
    # only decode steps are timed: a compiled model's prefill runs eagerly (no compile for its shape)
    gen = Generator(model, sizes.decode_batch, sizes.decode_max_len(), graph=graph, compiled_prefill=False)
    prompts = random_tokens(cfg, sizes.decode_batch, sizes.decode_prompt_len, device=gen.device)
    out = decode_timing(gen, prompts, steps=sizes.decode_steps)
    del gen
    return out


def _train(model: Decoder, cfg: DecoderConfig, sizes: Sizes, graph: bool) -> dict[str, Any]:
    step = TrainingStep(model, sizes.train_batch, sizes.train_seq, optimizer="fused")
    out = step_timing(step)
    out["tokens"] = step.tokens_per_step
    if step.tokens.device.type == "cuda":
        out.update(step_peak_memory(step))
    del step
    return out


_MEASURES = {"prefill": _prefill, "decode": _decode, "train": _train}


def step_timing(step: TrainingStep, repeats: int = 5, warmup: int = 2) -> dict[str, Any]:
    """Median time of one training step (synchronised) and tokens per second."""
    seconds = time_per_call(lambda _t: step(), step.tokens, repeats=repeats, warmup=warmup, grad=True)
    return {"step_ms": seconds * 1e3, "tokens_per_s": step.tokens_per_step / seconds}


def step_peak_memory(step: TrainingStep, warmup: int = 1) -> dict[str, float]:
    """Peak memory of one training step on a GPU, in GB, after `warmup` steps (AdamW's state exists).

    ``peak_gb``: the most allocated during the step; ``resident_gb``: allocated before it;
    ``step_extra_gb``: what the step itself adds.
    """
    device = step.tokens.device
    if device.type != "cuda":
        raise ValueError(
            "step_peak_memory reads the CUDA allocator; on a CPU use helpers.measure.memory.profile_memory(step)"
        )
    for _ in range(warmup):
        step()
    synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    step()
    synchronize(device)
    peak = torch.cuda.max_memory_allocated(device)
    return {"peak_gb": peak / 1e9, "resident_gb": before / 1e9, "step_extra_gb": (peak - before) / 1e9}


def predict_graph(dev: torch.device, cfg, sizes: Sizes, log: Callable[[str], None]) -> dict[str, Any]:
    """Profile eager prefill and decode, predict the graphed decode step (before it is measured)."""
    try:
        pre = prefill(dev, cfg, sizes)
        pre_trace = profile(pre.fn, *pre.inputs, steps=2, warmup=1, label="prefill")
        dec = decode(dev, cfg, sizes)
        dec_trace = profile(dec.fn, *dec.inputs, steps=5, warmup=2, label="decode")
        out: dict[str, Any] = {"status": "ok", **graph_prediction(dec_trace, pre_trace)}
        out["decode_breakdown"] = part_breakdown(dec_trace).to_dict("records")
        out["prefill_breakdown"] = part_breakdown(pre_trace).to_dict("records")
        log(
            f"graph prediction: eager window {out['eager_window_us']:.0f} us, kernels {out['kernel_us']:.0f} us "
            f"({out['kernels']:.0f}), latency {out['latency_us']:.2f} us -> predicted {out['predicted_us']:.0f} us"
        )
        return out
    except Exception as err:  # noqa: BLE001 - recorded, the run goes on
        log(f"graph prediction failed: {type(err).__name__}: {err}")
        return {"status": "failed", "reason": f"{type(err).__name__}: {str(err)[:400]}"}


def exercise(dev: torch.device, sizes: Sizes, log: Callable[[str], None]) -> dict[str, Any]:
    """The transfer exercise's variant: prefill with every position's logits, then with the last one's only."""
    out: dict[str, Any] = {"variant": VARIANT_X.as_dict()}
    try:
        for logits in ("all", "last"):
            built = prefill(dev, VARIANT_X, sizes, prefill_logits=logits)
            out[f"prefill_{logits}_us"] = time_per_call(built.fn, *built.inputs, repeats=10, warmup=2) * 1e6
            del built
        out["speedup"] = out["prefill_all_us"] / out["prefill_last_us"]
        out["status"] = "ok"
        log(f"exercise variant: prefill {out['prefill_all_us']:.0f} us -> {out['prefill_last_us']:.0f} us with the fix")
    except Exception as err:  # noqa: BLE001 - recorded
        out.update(status="failed", reason=f"{type(err).__name__}: {str(err)[:400]}")
    return out
