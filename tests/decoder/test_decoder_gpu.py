"""The decoder on a CUDA GPU: graphs replay the eager step exactly, compiled and course layers agree,
the breakdown of a live trace, recomputation's memory. Skipped without a GPU."""

from __future__ import annotations

import pytest
import torch
from support import requires_cuda

import helpers
from helpers.decoder import workloads
from helpers.decoder.breakdown import graph_prediction, part_breakdown
from helpers.decoder.config import DECODER_CONFIGS
from helpers.decoder.generate import Generator
from helpers.decoder.layers import Configuration
from helpers.decoder.model import build_model, random_tokens
from helpers.decoder.training import TrainingStep

pytestmark = requires_cuda
SMALL = DECODER_CONFIGS["small"]
COURSE = {"mlp": "fused", "fused_qkv": True}
CONFIGURATIONS = {
    "compile": Configuration("compile", compiled=True),
    "course": Configuration("course", **COURSE),
    "course+compile": Configuration("course+compile", compiled=True, **COURSE),
    "recompute": Configuration("recompute", recompute=True),
    "course+recompute": Configuration("course+recompute", recompute=True, **COURSE),
}


def _prompts(batch=2, seq=12):
    return random_tokens(SMALL, batch, seq, device="cuda", seed=3)


def test_a_graph_replays_exactly_the_eager_decode():
    model = build_model(SMALL, "cuda", torch.bfloat16).eval()
    eager = Generator(model, 2, 64).generate(_prompts(), 20)
    graphed = Generator(model, 2, 64, graph=True).generate(_prompts(), 20)
    assert torch.equal(eager, graphed)


@pytest.mark.parametrize("how", ["compile", "course", "course+compile"])
def test_other_configurations_keep_the_logits(how):
    ref = build_model(SMALL, "cuda", torch.bfloat16).eval()
    model = CONFIGURATIONS[how].build(SMALL, "cuda", torch.bfloat16).eval()
    with torch.no_grad():
        expected, got = ref(_prompts()), model(_prompts())
    assert helpers.relative_error(got, expected) < 3e-2


def test_breakdown_of_a_live_decode_has_parts_and_idle_time():
    built = workloads.decode("cuda", SMALL)
    trace = helpers.profile(built.fn, *built.inputs, steps=3, label="decode")
    b = part_breakdown(trace).set_index("part")
    assert {"attention", "mlp", "norm", "lm_head"} <= set(b.index)
    assert b.loc["idle: CPU-bound", "share"] > 0.3  # a small model at batch 1: the GPU waits for launches
    pred = graph_prediction(trace)
    assert pred["kernel_us"] < pred["eager_window_us"] and pred["predicted_speedup"] > 1


def test_recomputation_lowers_the_training_peak():
    from benchmarks.decoder.measure import step_peak_memory

    peaks = {}
    for name in ("eager", "recompute", "course+recompute"):
        conf = CONFIGURATIONS.get(name, Configuration(name))
        model = conf.build(SMALL, "cuda", torch.bfloat16)
        peaks[name] = step_peak_memory(TrainingStep(model, 8, 512))["peak_gb"]
        del model
    assert peaks["recompute"] < peaks["eager"] and peaks["course+recompute"] < peaks["eager"]
