"""The decoder on a CUDA GPU: graphs replay the eager step exactly, compiled and course layers agree,
the breakdown of a live trace, recomputation's memory. Skipped without a GPU."""

from __future__ import annotations

import pytest
import torch
from support import requires_cuda

import helpers

pytestmark = requires_cuda
SMALL = helpers.DECODER_CONFIGS["small"]


def _prompts(batch=2, seq=12):
    return helpers.random_tokens(SMALL, batch, seq, device="cuda", seed=3)


def test_a_graph_replays_exactly_the_eager_decode():
    model = helpers.build_model(SMALL, "cuda", torch.bfloat16).eval()
    eager = helpers.Generator(model, 2, 64).generate(_prompts(), 20)
    graphed = helpers.Generator(model, 2, 64, graph=True).generate(_prompts(), 20)
    assert torch.equal(eager, graphed)


@pytest.mark.parametrize("how", ["compile", "course", "course+compile"])
def test_other_configurations_keep_the_logits(how):
    conf = helpers.DECODER_CONFIGURATIONS[how]
    ref = helpers.build_model(SMALL, "cuda", torch.bfloat16).eval()
    model = conf.build(SMALL, "cuda", torch.bfloat16).eval()
    with torch.no_grad():
        expected, got = ref(_prompts()), model(_prompts())
    assert helpers.relative_error(got, expected) < 3e-2


def test_breakdown_of_a_live_decode_has_parts_and_idle_time():
    built = helpers.decoder_workloads.decode("cuda", SMALL)
    trace = helpers.profile(built.fn, *built.inputs, steps=3, label="decode")
    b = helpers.part_breakdown(trace).set_index("part")
    assert {"attention", "mlp", "norm", "lm_head"} <= set(b.index)
    assert b.loc["idle: CPU-bound", "share"] > 0.3  # a small model at batch 1: the GPU waits for launches
    pred = helpers.graph_prediction(trace)
    assert pred["kernel_us"] < pred["eager_window_us"] and pred["predicted_speedup"] > 1


def test_recomputation_lowers_the_training_peak():
    peaks = {}
    for name in ("eager", "recompute", "course+recompute"):
        model = helpers.DECODER_CONFIGURATIONS[name].build(SMALL, "cuda", torch.bfloat16)
        peaks[name] = helpers.step_peak_memory(helpers.TrainingStep(model, 8, 512))["peak_gb"]
        del model
    assert peaks["recompute"] < peaks["eager"] and peaks["course+recompute"] < peaks["eager"]
