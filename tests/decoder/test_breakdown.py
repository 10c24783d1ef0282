"""Time by model part from a trace: a hand-built GPU trace with known answers, and real CPU profiles."""

from __future__ import annotations

import gzip
import importlib.util
import json

import pytest
import torch

import helpers

idle_analysis = pytest.mark.skipif(
    importlib.util.find_spec("helpers.trace.overlap") is None,
    reason="needs helpers.idle_gaps (helpers/trace/overlap.py of the trace-analysis branch, merged separately)",
)

HOST, GPU = (100, 1), (0, 7)  # (pid, tid) of the main thread and of the GPU stream
BACKWARD_TID = 2  # the autograd engine's thread on a GPU


def _x(name, cat, ts, dur, pid_tid=HOST, **args):
    pid, tid = pid_tid
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}


def _launch(op, ts, op_dur, launch_at, corr, kernel_ts, kernel_dur, tid=HOST[1], kernel="kernel_x"):
    """An op that launches one kernel: the cpu_op, its launch call, the kernel on the GPU stream."""
    return [
        _x(op, "cpu_op", ts, op_dur, (HOST[0], tid), **{"External id": corr}),
        _x("cudaLaunchKernel", "cuda_runtime", launch_at, 5, (HOST[0], tid), correlation=corr, **{"External id": corr}),
        _x(kernel, "kernel", kernel_ts, kernel_dur, GPU, correlation=corr, device=0, stream=7, **{"External id": corr}),
    ]


def one_step(step: int, t0: float) -> list[dict]:
    """One step: attention (2 kernels), mlp (2), backward (1, engine thread), optimizer (1).

    Kernel time per part: attention 50, mlp 55, backward 40, optimizer 10 (us). GPU gaps: 18, 135,
    217, 163 us CPU-bound (the next launch call ended after the GPU ran dry) and 5 us waiting.
    """
    e = [
        _x(f"ProfilerStep#{step}", "user_annotation", t0, 1000),
        _x("attention", "user_annotation", t0 + 10, 190),
        _x("mlp", "user_annotation", t0 + 210, 190),
        _x("Optimizer.step#AdamW.step", "user_annotation", t0 + 700, 100),
        _x("autograd::engine::evaluate_function: MmBackward0", "cpu_op", t0 + 500, 100, (HOST[0], BACKWARD_TID)),
    ]
    c = step * 10
    e += _launch("aten::mm", t0 + 20, 40, t0 + 40, c + 1, t0 + 52, 30, kernel="gemm_a")
    e += _launch("aten::add", t0 + 70, 30, t0 + 90, c + 2, t0 + 100, 20, kernel="add_a")  # launch ends 95 > 82
    e += _launch("aten::mm", t0 + 220, 40, t0 + 245, c + 3, t0 + 255, 50, kernel="gemm_b")  # ends at 305
    e += _launch("aten::mul", t0 + 262, 18, t0 + 265, c + 6, t0 + 310, 5, kernel="mul_b")  # queued: waits 5
    e += _launch("aten::mm", t0 + 510, 80, t0 + 525, c + 4, t0 + 532, 40, tid=BACKWARD_TID, kernel="gemm_bwd")
    e += _launch("aten::_fused_adamw_", t0 + 710, 80, t0 + 725, c + 5, t0 + 735, 10, kernel="adamw")
    return e


@pytest.fixture(scope="module")
def gpu_trace(tmp_path_factory):
    doc = {"traceEvents": one_step(1, 0.0) + one_step(2, 2000.0)}
    path = tmp_path_factory.mktemp("bd") / "synthetic_gpu.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return helpers.load_trace(path)


def test_kernels_are_placed_in_their_part_and_step(gpu_trace):
    k = helpers.kernel_parts(gpu_trace)
    assert k["part"].tolist() == ["attention", "attention", "mlp", "mlp", "backward", "optimizer"] * 2
    assert k["step"].tolist() == [1] * 6 + [2] * 6  # the backward kernel too, launched from another thread


@idle_analysis
def test_breakdown_adds_up_with_idle_time_by_cause(gpu_trace):
    b = helpers.part_breakdown(gpu_trace).set_index("part")
    assert b.attrs["steps"] == 2 and b.attrs["basis"] == "device time"
    assert b.attrs["step_us"] == pytest.approx(745 - 52)  # first kernel start to last kernel end
    expected = {"attention": 50, "mlp": 55, "backward": 40, "optimizer": 10, "idle: CPU-bound": 18 + 135 + 217 + 163}
    for part, us in expected.items():
        assert b.loc[part, "time_us"] == pytest.approx(us), part
    assert b.loc["idle: waiting", "time_us"] == pytest.approx(5)
    assert b["share"].sum() == pytest.approx(1.0)  # one stream: parts and idle tile the step
    assert helpers.idle_share(b) == pytest.approx((533 + 5) / 693)


@idle_analysis
def test_graph_prediction_keeps_kernels_and_latency(gpu_trace):
    p = helpers.graph_prediction(gpu_trace)
    assert p["kernels"] == 6 and p["kernel_us"] == pytest.approx(155)
    assert p["latency_us"] == pytest.approx(5)  # the one waiting gap: the GPU's own latency between kernels
    assert p["predicted_us"] == pytest.approx(155 + 5 * 5)
    assert p["idle_cpu_bound_us"] == pytest.approx(533)
    assert p["predicted_speedup"] == pytest.approx(693 / 180)


def test_cpu_breakdown_of_a_real_decode_step():
    model = helpers.build_model("tiny", "cpu")
    gen = helpers.Generator(model, 1, 64)
    gen.prefill(helpers.random_tokens("tiny", 1, 8))
    trace = helpers.profile(lambda t: gen.step(), gen.token, steps=3, warmup=1, label="decode")
    b = helpers.part_breakdown(trace).set_index("part")
    assert b.attrs["basis"] == "CPU time" and b.attrs["steps"] == 3
    assert {"embedding", "norm", "attention", "mlp", "residual", "lm_head"} <= set(b.index)
    assert b["share"].sum() == pytest.approx(1.0)  # the parts' ops and the time outside them fill each step
    # every aten::linear of the step, counted independently from the profiler's own table
    ops = trace.ops().set_index("name")
    linears = ops.loc["aten::linear", "calls"] / 3
    assert linears == 2 * (4 + 3) + 1  # per layer q, k, v, o and gate, up, down; the LM head


def test_cpu_training_step_has_backward_and_optimizer():
    built = helpers.decoder_workloads.training("cpu")
    trace = helpers.profile(built.fn, *built.inputs, steps=1, warmup=1, label="train")
    b = helpers.part_breakdown(trace).set_index("part")
    assert {"backward", "optimizer", "loss"} <= set(b.index)
    assert b.loc["backward", "count"] > b.loc["mlp", "count"]


def test_bad_input():
    with pytest.raises(TypeError, match="helpers.Trace"):
        helpers.part_breakdown("trace.json")
    with pytest.raises(TypeError, match="part_breakdown"):
        helpers.idle_share([1, 2])
    if torch.cuda.is_available():
        pytest.skip("the next check is about CPU traces")
    cpu = helpers.profile(lambda: torch.ones(3) + 1, steps=1, warmup=0)
    with pytest.raises(ValueError, match="no GPU kernels"):
        helpers.graph_prediction(cpu)
