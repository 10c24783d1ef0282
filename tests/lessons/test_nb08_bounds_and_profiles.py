"""Lesson 08 read as a learner: each fix's bound beside its measurement, profiled numbers beside unprofiled ones,
the optimizer's launches as a GPU issues them, and the answers a check cell must not show before a guess."""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest
import torch

import helpers
from helpers import nb08
from helpers.paths import NOTEBOOKS_DIR

LESSON = NOTEBOOKS_DIR / "08_whole_model.ipynb"


@pytest.fixture(scope="module")
def h200():
    traces = {n: nb08.reference_trace(f"h200_decoder_{n}", missing_ok=True) for n in ("prefill", "decode", "train")}
    if any(t is None for t in traces.values()):
        pytest.skip("the H200 reference traces of lesson 08 are not in this checkout")
    return {**traces, "results": helpers.load_results("h200_decoder")}


def _configs(h200):
    return h200["results"].table("configurations").set_index("configuration")


def test_every_fix_stays_within_the_bound_its_trace_sets(h200):
    bounds = nb08.fix_bounds(h200["prefill"], h200["decode"], h200["results"])
    assert bounds["holds"].tolist() == [True] * len(bounds)
    compile_, graphs = bounds.loc["torch.compile"], bounds.loc["CUDA graphs"]
    # compile is bounded by the GEMMs and attention kernels, which it keeps; it reaches well under the bound
    assert compile_["bound"] == "at most" and compile_["measured"] < 0.85 * compile_["predicted"]
    # the graph prediction is an upper bound on time, so a lower bound on the speedup (section 4's number)
    model = nb08.graph_prediction(h200["decode"], h200["prefill"])
    assert graphs["predicted"] == pytest.approx(_configs(h200).loc["eager", "decode_us"] / model["predicted_us"])
    assert graphs["bound"] == "at least"
    recompute = bounds.loc["recompute the MLPs"]
    assert recompute["measured"] == pytest.approx(recompute["predicted"], rel=0.02)  # four tensors per layer


def test_fix_bounds_refuses_a_trace_without_gpu_kernels(h200):
    built = nb08.workloads.prefill("cpu", config="tiny")
    cpu = helpers.profile(built.fn, *built.inputs, steps=1, warmup=0, label="prefill")
    with pytest.raises(ValueError, match="no GPU kernels"):
        nb08.fix_bounds(cpu, h200["decode"], h200["results"])


def test_the_summarys_claims_on_the_recorded_run(h200):
    """Section 7's bullets are static text: they must hold on the committed H200 run."""
    c = _configs(h200)
    tps = c["prefill_tokens_per_s"]
    for backend in ("sdpa-flash", "sdpa-efficient", "sdpa-cudnn"):  # "within a few percent of eager"
        assert abs(tps[backend] / tps["eager"] - 1) < 0.08, backend
    assert tps["eager"] / tps["sdpa-math"] > 2  # "the prefill takes over twice as long"
    assert c.loc["course", "train_step_ms"] >= c.loc["eager", "train_step_ms"]  # "no faster than eager"
    assert c.loc["course", "decode_us"] > c.loc["eager", "decode_us"]  # eager decode: slower than eager
    assert c.loc["course+graph", "decode_us"] == pytest.approx(c.loc["eager+graph", "decode_us"], rel=0.03)
    assert c.loc["recompute", "train_step_ms"] > c.loc["eager", "train_step_ms"]
    assert c.loc["recompute", "train_peak_gb"] < c.loc["eager", "train_peak_gb"]


def test_the_fused_optimizer_takes_more_than_one_kernel_on_a_gpu(h200):
    """The explanation no longer says "one kernel per group": the H200 trace launches several per step."""
    k = nb08.kernel_parts(h200["train"])
    fused = k[(k["part"] == "optimizer") & (k["launched_by"] == "aten::_fused_adamw_")]
    assert fused.groupby("step").size().min() > 1
    explain = nb08.EXERCISES.book["optimizer"].explain
    assert "one kernel per group" not in explain and "chunk" in explain


def test_the_training_workload_exposes_its_step_and_optimizer_time():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        built = nb08.workloads.training("cpu", config="tiny", optimizer="fused")
        assert isinstance(built.fn.step, nb08.TrainingStep)
        assert built.details["parameter_tensors"] == len(list(built.fn.step.model.parameters()))
        assert nb08.optimizer_step_us(built, repeats=2) > 0
        with pytest.raises(TypeError, match="training workload"):
            nb08.optimizer_step_us(nb08.workloads.prefill("cpu", config="tiny"))
    finally:
        torch.set_num_threads(threads)


def test_a_speedup_of_the_wrong_kind_is_called_so(h200):
    variant = nb08.reference_trace("h200_decoder_variant_x", missing_ok=True)
    if variant is None:
        pytest.skip("the H200 variant trace is not in this checkout")
    nb08.reset()
    for measured in (1.46, [1.40, 1.46, 1.50]):
        fb = nb08.check_variant(variant, "lm_head", "last logits", "1.4", measured)[2]
        assert fb.status == "wrong" and "expected a number" in fb.message, fb.message
        assert nb08.check_variant(variant, "lm_head", "last logits", 1.42, measured)[2].status == "right"
        assert nb08.check_variant(variant, "lm_head", "last logits", True, measured)[2].status == "wrong"


def test_a_cpu_memory_total_counts_only_what_was_allocated_while_recording(tmp_path):
    """Section 6's warning on a CPU: memory allocated before a memory profile is not in its running total."""
    script = f"""
import json, torch
held = torch.ones(4 * 2**20)  # 16 MiB allocated before the profile
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as p:
    y = torch.ones(2**18)  # 1 MiB
p.export_chrome_trace({str(tmp_path / "t.json")!r})
ev = json.load(open({str(tmp_path / "t.json")!r}))["traceEvents"]
print(max(e["args"]["Total Allocated"] for e in ev if e.get("name") == "[memory]"))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120)
    total = int(out.stdout.strip().splitlines()[-1])
    assert 2**20 <= total < 2 * 2**20  # the 16 MiB held before is not counted


def _code(nb) -> list[str]:
    return [c.source for c in nb.cells if c.cell_type == "code"]


def test_the_graph_table_waits_for_a_right_prediction_or_a_request(learner_copies):
    nb = nbformat.read(learner_copies / LESSON.name, as_version=4)
    (cell,) = [s for s in _code(nb) if "nb08.graph_table(" in s]
    gate = 'if not nb08.answered("graph_step")'
    assert cell.index(gate) < cell.index("nb08.graph_table(")
    assert cell.index(gate) < cell.index("Inside a profiled replayed step")
    (variant,) = [s for s in _code(nb) if "nb08.check_variant(" in s]  # the measured speedup waits the same way
    assert variant.index("nb08.check_variant(") < variant.index(
        'nb08.evidence("variant_speedup", Markdown(measured_text))'
    )


def test_profiled_numbers_stand_beside_unprofiled_ones():
    nb = nbformat.read(LESSON, as_version=4)
    code = "\n".join(_code(nb))
    for needle in (
        "prefill_unprofiled_us = helpers.time_per_call(",  # section 2's CPU prefill
        "gpu_prefill_unprofiled_us",  # the GPU prefill whose gaps give the queue latency
        "(profiled_step_us - eager_step_us) / recorded",  # the decode operators
        '"step, no profiler (us)"',  # the replayed steps
        "train_ms.append(helpers.time_per_call(train.fn",  # the training step, in turns with its profiled rounds
        '"optimizer.step(), no profiler (us)"',  # the optimizers
    ):
        assert needle in code, needle
