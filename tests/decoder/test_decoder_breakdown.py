"""Time by model part from a trace: a hand-built GPU trace with known answers, and real CPU profiles."""

from __future__ import annotations

import pytest
import torch
from support import synthetic_decoder_trace

import helpers
from helpers.decoder import workloads
from helpers.decoder.breakdown import IDLE_ROWS, graph_prediction, idle_share, kernel_parts, part_breakdown
from helpers.decoder.generate import Generator
from helpers.decoder.model import build_model, random_tokens

IDLE = list(IDLE_ROWS.values())


@pytest.fixture(scope="module")
def gpu_trace(tmp_path_factory):
    return synthetic_decoder_trace(tmp_path_factory.mktemp("bd") / "synthetic_gpu.json.gz")


def test_kernels_are_placed_in_their_part_and_step(gpu_trace):
    k = kernel_parts(gpu_trace)
    assert k["part"].tolist() == ["attention", "attention", "mlp", "mlp", "backward", "optimizer"] * 2
    assert k["step"].tolist() == [1] * 6 + [2] * 6  # the backward kernel too, launched from another thread


def test_breakdown_adds_up_with_idle_time_by_cause(gpu_trace):
    frame = part_breakdown(gpu_trace)
    b = frame.set_index("part")
    assert b.attrs["steps"] == 2 and b.attrs["basis"] == "device time"
    assert b.attrs["step_us"] == pytest.approx(745 - 52)  # first kernel start to last kernel end
    expected = {"attention": 50, "mlp": 55, "backward": 40, "optimizer": 10, "idle: CPU-bound": 18 + 135 + 217 + 163}
    for part, us in expected.items():
        assert b.loc[part, "time_us"] == pytest.approx(us), part
    assert b.loc["idle: waiting", "time_us"] == pytest.approx(5)
    assert b["share"].sum() == pytest.approx(1.0)  # one stream: parts and idle tile the step
    assert idle_share(frame) == pytest.approx((533 + 5) / 693)


def test_graph_prediction_keeps_kernels_and_latency(gpu_trace):
    p = graph_prediction(gpu_trace)
    assert p["kernels"] == 6 and p["kernel_us"] == pytest.approx(155)
    assert p["latency_us"] == pytest.approx(5)  # the one waiting gap: the GPU's own latency between kernels
    assert p["predicted_us"] == pytest.approx(155 + 5 * 5)
    assert p["idle_cpu_bound_us"] == pytest.approx(533)
    assert p["predicted_speedup"] == pytest.approx(693 / 180)


def test_cpu_breakdown_of_a_real_decode_step():
    model = build_model("tiny", "cpu")
    gen = Generator(model, 1, 64)
    gen.prefill(random_tokens("tiny", 1, 8))
    trace = helpers.profile(lambda t: gen.step(), gen.token, steps=3, warmup=1, label="decode")
    b = part_breakdown(trace).set_index("part")
    assert b.attrs["basis"] == "CPU time" and b.attrs["steps"] == 3
    assert {"embedding", "norm", "attention", "mlp", "residual", "lm_head"} <= set(b.index)
    assert b["share"].sum() == pytest.approx(1.0)  # the parts' ops and the time outside them fill each step
    # the MLP's forward calls 5 operators per layer (three linears, gelu, mul)
    assert b.loc["mlp", "count"] == 5 * model.config.num_hidden_layers
    # every aten::linear of the step, counted independently from the profiler's own table
    ops = trace.ops().set_index("name")
    linears = ops.loc["aten::linear", "calls"] / 3
    assert linears == 2 * (4 + 3) + 1  # per layer q, k, v, o and gate, up, down; the LM head


def test_cpu_training_step_has_backward_and_optimizer():
    built = workloads.training("cpu")
    trace = helpers.profile(built.fn, *built.inputs, steps=1, warmup=1, label="train")
    b = part_breakdown(trace).set_index("part")
    assert {"backward", "optimizer", "loss"} <= set(b.index)
    assert b.loc["backward", "count"] > b.loc["mlp", "count"]


def test_bad_input():
    with pytest.raises(TypeError, match="a Trace"):
        part_breakdown("trace.json")
    with pytest.raises(TypeError, match="part_breakdown"):
        idle_share([1, 2])
    if torch.cuda.is_available():
        pytest.skip("the next check is about CPU traces")
    cpu = helpers.profile(lambda: torch.ones(3) + 1, steps=1, warmup=0)
    with pytest.raises(ValueError, match="no GPU kernels"):
        graph_prediction(cpu)


@pytest.mark.parametrize("name", ["h200_mlp_eager", "h200_mlp_compiled", "h200_mlp_course_kernel"])
def test_real_h200_traces_without_scopes_tile_their_steps(name):
    """Traces recorded with torch 2.11 on the H200: no model scopes, so every kernel is "other"."""
    try:
        trace = helpers.load_trace(helpers.reference_trace_path(name))
    except FileNotFoundError:
        pytest.skip(f"{name} is not recorded")
    b = part_breakdown(trace).set_index("part")
    kernels = trace.kernels()
    assert set(b.index) - set(IDLE) == {"other"}
    assert b.loc["other", "count"] == pytest.approx(len(kernels) / len(trace.steps))
    assert b["share"].sum() == pytest.approx(1.0, abs=1e-3)  # one stream: kernels and gaps tile each step
