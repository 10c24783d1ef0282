"""The memory-peak rule: one operator's outputs dominate the peak (a hand-built trace with [memory] events,
a step recorded now on the CPU, the CPU reference trace where no operator dominates), and its place in the
ranking: a memory finding saves bytes, not time, and never pushes a time finding out of the top 3."""

from __future__ import annotations

import pytest
import torch

import helpers
from helpers.diagnose import diagnose, rules_host
from helpers.diagnose.diagnose import run_rules
from helpers.diagnose.findings import Context
from helpers.paths import TRACES_DIR
from tests.diagnose.synthetic import Kineto

MB = 1_000_000
ELEMENTWISE = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, std::array<char*, 2ul> >(int)"
)


def _training_step(k: Kineto) -> None:
    """A GPU step: a linear whose 60 MB output is saved for the backward, a 20 MB activation, then the backward."""
    k.step(1, 0, 1000)
    k.cpu("aten::linear", 10, 100)
    k.memory(20, 60 * MB, 0x1000, 60 * MB)
    k.cpu("aten::gelu", 200, 50)
    k.memory(210, 20 * MB, 0x2000, 80 * MB)
    k.cpu("autograd::engine::evaluate_function: GeluBackward0", 400, 100)
    k.memory(410, 10 * MB, 0x3000, 90 * MB)  # the peak: 60 + 20 + 10
    k.memory(450, -20 * MB, 0x2000, 70 * MB)
    k.memory(460, -10 * MB, 0x3000, 60 * MB)
    k.memory(900, -60 * MB, 0x1000, 0)


def test_one_operator_dominates_the_peak(tmp_path):
    k = Kineto()
    _training_step(k)
    [f] = rules_host.peak_memory(Context(k.load(tmp_path)))
    assert f["rule"] == "peak_memory" and f["lesson"] == "08"
    assert f["saving_upper_bound_us"] == 0 and f["saving_bytes"] == pytest.approx(60 * MB)
    assert "67 % of the 90.0 MB peak on GPU 0 is held by aten::linear's outputs" in f["evidence"]
    assert "activations" in f["finding"] and "checkpoint" in f["fix"]
    assert f["example"] == "aten::linear" and f["events"] == 1


def test_balanced_peak_and_no_memory_events_find_nothing(tmp_path):
    k = Kineto()
    k.step(1, 0, 1000)
    for i, op in enumerate(["aten::mm", "aten::gelu", "aten::mul"]):  # three equal outputs: none dominates
        k.cpu(op, 100 * i, 50)
        k.memory(100 * i + 10, 10 * MB, 0x1000 * (i + 1), 10 * MB * (i + 1))
    assert rules_host.peak_memory(Context(k.load(tmp_path, "balanced.json"))) == []
    plain = Kineto()
    plain.step(1, 0, 100)
    plain.cpu("aten::mm", 0, 50)
    assert rules_host.peak_memory(Context(plain.load(tmp_path, "plain.json"))) == []


def test_real_reference_trace_with_a_balanced_peak():
    # an inference MLP: gelu, linear and mul each hold a third of the peak
    found = diagnose(TRACES_DIR / "cpu_memory_mlp.json.gz")
    assert "peak_memory" not in set(found["rule"]) and not found.attrs["skipped"]


def test_real_step_recorded_now(tmp_path):
    torch.manual_seed(0)
    x, w = torch.randn(256, 64), torch.randn(8192, 64)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        y = torch.nn.functional.linear(x, w).relu_()  # 8 MB output; inputs were allocated before the trace
        y.sum().item()
    path = tmp_path / "step.json"
    prof.export_chrome_trace(str(path))
    trace = helpers.load_trace(path)
    [f] = [f for f in rules_host.peak_memory(Context(trace)) if f["rule"] == "peak_memory"]
    assert "aten::linear" in f["finding"] and "outputs" in f["finding"] and "no_grad" in f["fix"]
    assert f["saving_bytes"] == pytest.approx(256 * 8192 * 4)
    assert f["example"] in set(trace.events["name"])


def test_memory_finding_ranks_after_time_findings(tmp_path):
    k = Kineto()
    _training_step(k)
    for i in range(3):  # three real time findings: a sync, a pageable copy, a cudaMalloc
        k.cpu("aten::item", 500 + 100 * i, 60)
    c = k.runtime("cudaStreamSynchronize", 505, 50)
    k.sync_record("Stream Sync", c, 505, 50, stream=7)
    k.launch(ELEMENTWISE, 600, 10, 612, 5)
    k.launch("Memcpy HtoD (Pageable -> Device)", 700, 80, 705, 70, call="cudaMemcpyAsync", cat="gpu_memcpy")
    k.runtime("cudaMalloc", 800, 60)
    found, _ = run_rules(k.load(tmp_path))
    time_findings = found[found["saving_upper_bound_us"] > 0]
    assert len(time_findings) >= 3 and "peak_memory" in set(found["rule"])
    first_memory = found.index[found["rule"] == "peak_memory"][0]
    assert first_memory >= len(time_findings)  # after every finding that saves time
    assert set(found.head(3)["rule"]) <= set(time_findings["rule"])
    assert (found.loc[found["rule"] != "peak_memory", "saving_bytes"] == 0).all()
