"""Each diagnosis rule on a small hand-built trace with a planted problem, and on real traces."""

from __future__ import annotations

import gzip
import json

import pytest

import helpers
from helpers.diagnose import Findings, diagnose, findings, rules_gpu, rules_host
from helpers.diagnose.findings import Context
from helpers.trace.categories import RECORDER_WAIT
from tests.diagnose.synthetic import Kineto
from tests.support import data_file

ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::{}<float>, std::array<char*, 2ul> >(int)"


def _ctx(k: Kineto, tmp_path) -> Context:
    return Context(k.load(tmp_path))


def test_gpu_idle_because_the_cpu_is_late(tmp_path):
    k = Kineto()
    k.step(1, 0, 1000)
    for i in range(10):  # 2 us kernels, one every 100 us: the GPU idles 98 % of the time
        k.cpu("aten::add", 100 * i, 90)
        k.launch(ELEMENTWISE.format("AddFunctor"), 100 * i + 40, 50, 100 * i + 92, 2)
    [f] = rules_host.gpu_idle_cpu_bound(_ctx(k, tmp_path))
    assert f["rule"] == "gpu_idle_cpu_bound" and f["lesson"] == "08" and f["confidence"] == "high"
    assert 800 < f["time_us"] < 1000
    assert 800 < f["saving_upper_bound_us"] <= 1000


def test_host_sync_and_the_idle_gpu_after_it(tmp_path):
    k = Kineto()
    k.step(1, 0, 600)
    k.cpu("aten::mm", 0, 20)
    k.launch("ampere_sgemm_128x64_nn", 5, 10, 20, 300)
    k.cpu("aten::item", 30, 300)
    k.cpu("aten::_local_scalar_dense", 31, 298)
    c = k.runtime("cudaStreamSynchronize", 40, 285)
    k.sync_record("Stream Sync", c, 40, 285, stream=7)
    k.cpu("aten::add", 400, 50)
    k.launch(ELEMENTWISE.format("AddFunctor"), 420, 20, 445, 5)  # the GPU idles 325 -> 445
    [f] = rules_host.host_sync(_ctx(k, tmp_path))
    assert "aten::item" in f["evidence"] and f["lesson"] == "10"
    # without the wait the host reaches the add 285 us earlier, and its kernel runs right after the GEMM (ending
    # at 325 instead of 450): 125 us saved, which the moved-wait bound gives within the 5 us it spends waiting
    assert f["saving_upper_bound_us"] == pytest.approx(125, abs=6)


def test_a_wait_that_the_next_synchronising_point_takes_over_saves_nothing(tmp_path):
    """.item() just before a pageable copy (which waits for the GPU too): removed, its wait moves to the copy.
    The recorder's own wait is no such point: without the profiler nothing waits there."""

    def steps(recorder: bool) -> Kineto:
        k = Kineto()
        for n in range(3):
            t = 1000.0 * n
            _item_waits_for_a_gemm(k, n, t, 990)
            if recorder:  # the recorder's wait, then the next step's host work from t + 1000
                k.x(RECORDER_WAIT, "user_annotation", t + 829, 8)
                k.runtime("cudaDeviceSynchronize", t + 830, 5)
            else:
                k.launch("Memcpy HtoD (Pageable -> Device)", t + 830, 20, t + 835, 10, call="cudaMemcpyAsync",
                         cat="gpu_memcpy")  # fmt: skip
        return k

    found = diagnose(steps(recorder=False).load(tmp_path, "copy.json"))
    sync = found[found["rule"] == "host_sync"]
    assert sync.empty or float(sync["saving_upper_bound_us"].iloc[0]) <= 10
    # before the recorder's wait the program's .item() costs the host time up to the next step's work
    found = diagnose(steps(recorder=True).load(tmp_path, "recorder.json"))
    [f] = found[found["rule"] == "host_sync"].itertuples()
    assert f.saving_upper_bound_us > 100


def _item_waits_for_a_gemm(k: Kineto, n: int, t: float, step_us: float) -> None:
    """Step `n` from `t`: an 800 us GEMM, then .item() waiting for it (its synchronise returns at t + 825)."""
    k.step(n + 1, t, step_us)
    k.cpu("aten::mm", t, 20)
    k.launch("ampere_sgemm_128x64_nn", t + 5, 10, t + 20, 800)
    k.cpu("aten::item", t + 30, 796)
    k.runtime("cudaStreamSynchronize", t + 31, 794)


def _item_then_host_work(second_item: bool = False) -> Kineto:
    """Three steps: .item() waits for an 800 us GEMM (maybe a second .item() right after), then 180 us of host work
    launching 5 us of GPU work, then a pageable copy (which waits for the GPU too)."""
    k = Kineto()
    for n in range(3):
        t = 2000.0 * n
        _item_waits_for_a_gemm(k, n, t, 1990)
        if second_item:
            k.cpu("aten::item", t + 827, 3)
            k.runtime("cudaStreamSynchronize", t + 827.5, 2)
        k.cpu("aten::add", t + 830, 170)
        k.launch(ELEMENTWISE.format("AddFunctor"), t + 840, 10, t + 855, 5)
        k.launch(
            "Memcpy HtoD (Pageable -> Device)", t + 1005, 20, t + 1010, 10, call="cudaMemcpyAsync", cat="gpu_memcpy"
        )
    return k


def test_a_wait_with_host_work_after_it_saves_what_that_work_could_overlap(tmp_path):
    """Without the wait the host work runs under the GEMM, and the copy waits for the GEMM instead."""
    found = diagnose(_item_then_host_work().load(tmp_path))
    [f] = found[found["rule"] == "host_sync"].itertuples()
    assert f.saving_upper_bound_us == pytest.approx(180, abs=10)


def _steps_ending_in_a_wait(k: Kineto, label: str | None) -> None:
    """Three steps of one 300 us GEMM, each ended by a device synchronise (under `label` when given); the next
    step's launch comes 100 us after the wait returns."""
    for n in range(3):
        t = 500.0 * n
        k.step(n + 1, t, 450)
        k.cpu("aten::mm", t, 20)
        k.launch("ampere_sgemm_128x64_nn", t + 5, 10, t + 20, 300)
        if label:
            k.x(label, "user_annotation", t + 25, 300)
        k.runtime("cudaDeviceSynchronize", t + 30, 290)


def test_the_recorders_own_wait_is_a_note_not_a_sync_finding(tmp_path):
    recorded, program = Kineto(), Kineto()
    _steps_ending_in_a_wait(recorded, RECORDER_WAIT)
    _steps_ending_in_a_wait(program, None)
    found = diagnose(recorded.load(tmp_path, "recorded.json"))
    assert not {"host_sync", "gpu_idle_cpu_bound"} & set(found["rule"])
    assert any(RECORDER_WAIT in note for note in found.attrs["notes"])
    # the same wait made by the program is its finding, and the GPU idle after it with it
    found = diagnose(program.load(tmp_path, "program.json"))
    assert "host_sync" in set(found["rule"])


def test_the_program_keeps_the_gpu_idle_after_the_recorders_wait_that_is_its_own(tmp_path):
    """2 ms of the program's host work between the recorder's 300 us wait and the next launch: the recorder
    accounts for 300 us of each gap at most, the program for the rest."""
    k = Kineto()
    for n in range(3):
        t = 3000.0 * n
        k.step(n + 1, t, 2900)
        k.cpu("aten::mm", t, 20)
        k.launch("ampere_sgemm_128x64_nn", t + 5, 10, t + 20, 300)
        k.x(RECORDER_WAIT, "user_annotation", t + 25, 300)
        k.runtime("cudaDeviceSynchronize", t + 30, 290)
        k.cpu("aten::to", t + 330, 2000)  # the program's own preprocessing before its next launch
    found = diagnose(k.load(tmp_path))
    [idle] = found[found["rule"] == "gpu_idle_cpu_bound"].itertuples()
    gap = 3000 - 320  # from the GEMM's end to the next step's GEMM
    assert idle.time_us == pytest.approx((2 * gap - 2 * 300) / 3, rel=0.05)  # two gaps inside the three steps


def test_helpers_profile_labels_its_wait(tmp_path):
    trace = helpers.profile(lambda: None, steps=2, warmup=0, label="nothing")
    assert (trace.events["name"] == RECORDER_WAIT).sum() == 2  # one per recorded step


def test_pageable_copies_and_data_loader(tmp_path):
    k = Kineto()
    k.step(1, 0, 500)
    k.x("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "user_annotation", 0, 200)
    k.cpu("aten::to", 210, 100)
    k.launch("Memcpy HtoD (Pageable -> Device)", 220, 80, 225, 70, call="cudaMemcpyAsync", cat="gpu_memcpy")
    found = {f["rule"]: f for f in rules_host.copies(_ctx(k, tmp_path))}
    assert set(found) == {"pageable_copies", "data_loader"}
    assert found["data_loader"]["saving_upper_bound_us"] == pytest.approx(200)
    assert found["pageable_copies"]["time_us"] == pytest.approx(70)


def test_recompiles_graph_breaks_and_allocator(tmp_path):
    k = Kineto()
    k.step(1, 0, 1000)
    k.cpu("Torch-Compiled Region: 0/1", 0, 200)
    k.cpu("Torch-Compiled Region: 1/0", 400, 200)
    k.runtime("cudaMalloc", 700, 150)
    ctx = _ctx(k, tmp_path)
    rules = {f["rule"] for f in rules_host.compile_events(ctx)}
    assert rules == {"recompilation", "graph_breaks"}
    [alloc] = rules_host.allocator(ctx)
    assert alloc["saving_upper_bound_us"] == pytest.approx(150)
    # a recompile estimates no saving inside the step (it runs before it), yet it is a finding, not a note
    assert "recompilation" in set(diagnose(k.load(tmp_path, "whole.json"))["rule"])


def test_fp32_gemm_and_manual_attention(tmp_path):
    k = Kineto()
    k.step(1, 0, 170)  # the step ends with its last kernel: the GPU sets its length
    k.cpu("aten::bmm", 0, 20, **{"Input Dims": [[64, 256, 64], [64, 64, 256]]})
    k.launch("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3", 5, 10, 20, 100)
    k.cpu("aten::softmax", 30, 20, **{"Input Dims": [[4, 16, 256, 256], [], []]})
    k.launch("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>(float*)", 35, 10, 120, 50)
    found = {
        f["rule"]: f for f in rules_gpu.fp32_gemm(_ctx(k, tmp_path)) + rules_gpu.manual_attention(_ctx(k, tmp_path))
    }
    assert found["fp32_gemm"]["saving_upper_bound_us"] == pytest.approx(100)
    assert found["manual_attention"]["lesson"] == "07"
    assert found["manual_attention"]["saving_upper_bound_us"] == pytest.approx(50)


def test_unfused_elementwise_chain_counts_bytes_moved_twice(tmp_path):
    k = Kineto()
    k.step(1, 0, 210)
    shape = {"Input Dims": [[1024, 1024], [1024, 1024]], "Input type": ["float", "float"]}
    for i, fn in enumerate(["AddFunctor", "MulFunctor", "AddFunctor", "MulFunctor"]):
        k.cpu(f"aten::op{i}", 10 * i, 8, **shape)
        k.launch(ELEMENTWISE.format(fn), 10 * i + 1, 5, 50 + 40 * i, 40)
    [f] = rules_gpu.unfused_elementwise(_ctx(k, tmp_path))
    assert "4 kernels" in f["evidence"]
    assert "25.2 MB" in f["evidence"]  # 3 intermediates of 4 MiB, written and read again
    assert f["saving_upper_bound_us"] == pytest.approx(120)  # the chain minus its longest kernel


def test_unfused_elementwise_on_a_launch_bound_step_saves_the_dispatches(tmp_path):
    """Tiny kernels, each done before the next launch: the path runs through the host, and a fused operator keeps
    one dispatch and launch of the four."""
    k = Kineto()
    k.step(1, 0, 40)
    shape = {"Input Dims": [[64], [64]], "Input type": ["float", "float"]}
    for i, fn in enumerate(["AddFunctor", "MulFunctor", "AddFunctor", "MulFunctor"]):
        k.cpu(f"aten::op{i}", 10 * i, 8, **shape)
        k.launch(ELEMENTWISE.format(fn), 10 * i + 1, 5, 10 * i + 7, 2)
    [f] = rules_gpu.unfused_elementwise(_ctx(k, tmp_path))
    # the last three operators (8 us each) and the Python between the four (2 us each) leave the path
    assert f["saving_upper_bound_us"] == pytest.approx(3 * 8 + 3 * 2)


def test_unfused_elementwise_host_side_counts_a_chain_at_its_typical_cost(tmp_path):
    """The same launch-bound chain in three steps, one of its operators stalled by the machine in the second:
    the saving is the typical step's, not a third of the stall."""
    k = Kineto()
    shape = {"Input Dims": [[64], [64]], "Input type": ["float", "float"]}
    for n in range(3):
        t, stall = 2000.0 * n, 1000.0 if n == 1 else 0.0
        k.step(n + 1, t, 50 + stall)
        at = t
        for i, fn in enumerate(["AddFunctor", "MulFunctor", "AddFunctor", "MulFunctor"]):
            dur = 8 + (stall if i == 2 else 0)
            k.cpu(f"aten::op{i}", at, dur, **shape)
            k.launch(ELEMENTWISE.format(fn), at + 1, 5, at + 7, 2)
            at += dur + 2
        k.cpu("aten::mm", at, 8)
        k.launch("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", at + 1, 5, at + 7, 2)
    [f] = rules_gpu.unfused_elementwise(_ctx(k, tmp_path))
    assert f["saving_upper_bound_us"] == pytest.approx(3 * 8 + 3 * 2, rel=0.1)


def test_unfused_elementwise_names_the_kernels_of_a_chain_no_operator_launched(tmp_path):
    """Kernels replayed from a graph have no operator: the evidence names the kernels, not empty strings."""
    k = Kineto()
    k.step(1, 0, 210)
    for i, fn in enumerate(["AddFunctor", "MulFunctor", "AddFunctor"]):
        k.launch(ELEMENTWISE.format(fn), 10 * i + 1, 5, 50 + 40 * i, 40)
    [f] = rules_gpu.unfused_elementwise(_ctx(k, tmp_path))
    assert "(vectorized_elementwise_kernel<add> -> vectorized_elementwise_kernel<mul> -> " in f["evidence"]


def test_unfused_optimizer(tmp_path):
    k = Kineto()
    k.step(1, 0, 1000)
    k.x("Optimizer.step#SGD.step", "user_annotation", 0, 900)
    for i in range(20):  # per-parameter add_ and mul_
        k.cpu("aten::mul_" if i % 2 else "aten::add_", 40 * i + 5, 30)
        k.launch(ELEMENTWISE.format("MulFunctor"), 40 * i + 10, 20, 40 * i + 32, 2)
    [f] = rules_gpu.unfused_optimizer(_ctx(k, tmp_path))
    assert "per-parameter" in f["finding"] and f["saving_upper_bound_us"] > 0


def _optimizer_steps(k: Kineto, stall_us: float, wrapper: bool = False) -> None:
    """Three launch-bound steps, each an SGD step of 20 per-parameter operators (30 us each on the host); in
    the second, one operator is stalled by `stall_us`. With `wrapper`, an outer optimizer's range holds each."""
    for n in range(3):
        t, stall = 5000.0 * n, stall_us if n == 1 else 0.0
        k.step(n + 1, t, 1000 + stall)
        if wrapper:
            k.x("Optimizer.step#EMA.step", "user_annotation", t, 950 + stall)
        k.x("Optimizer.step#SGD.step", "user_annotation", t, 900 + stall)
        at = t + 5
        for i in range(20):
            dur = 30 + (stall if i == 10 else 0)
            k.cpu("aten::mul_" if i % 2 else "aten::add_", at, dur)
            k.launch(ELEMENTWISE.format("MulFunctor"), at + 5, 20, at + 27, 2)
            at += dur + 10


def test_typical_costs_on_a_trace_whose_path_covers_only_the_last_steps(tmp_path, monkeypatch):
    """Above PATH_EVENT_LIMIT events the critical path covers the last 3 steps: the steps before them have no
    path time and must not pull a typical cost to zero."""
    k = Kineto()
    for n in range(10):
        t = 5000.0 * n
        k.step(n + 1, t, 1000)
        k.x("Optimizer.step#SGD.step", "user_annotation", t, 900)
        at = t + 5
        for i in range(20):
            k.cpu("aten::mul_" if i % 2 else "aten::add_", at, 30)
            k.launch(ELEMENTWISE.format("MulFunctor"), at + 5, 20, at + 27, 2)
            at += 40
    [whole] = rules_gpu.unfused_optimizer(_ctx(k, tmp_path))
    monkeypatch.setattr(findings, "PATH_EVENT_LIMIT", 10)
    ctx = _ctx(k, tmp_path)
    [last3] = rules_gpu.unfused_optimizer(ctx)
    assert any("last 3 of 10 steps" in note for note in ctx.notes)
    assert last3["saving_upper_bound_us"] == pytest.approx(whole["saving_upper_bound_us"], rel=0.01)


def test_unfused_optimizer_counts_each_step_at_its_typical_cost_and_a_wrapper_once(tmp_path):
    calm, stalled, wrapped = Kineto(), Kineto(), Kineto()
    _optimizer_steps(calm, 0.0)
    _optimizer_steps(stalled, 3000.0)
    _optimizer_steps(wrapped, 0.0, wrapper=True)
    [base] = rules_gpu.unfused_optimizer(_ctx(calm, tmp_path))
    assert base["saving_upper_bound_us"] > 500  # twenty operators and their launches on a launch-bound path
    [f] = rules_gpu.unfused_optimizer(_ctx(stalled, tmp_path))
    assert f["saving_upper_bound_us"] == pytest.approx(base["saving_upper_bound_us"], rel=0.05)
    [f] = rules_gpu.unfused_optimizer(_ctx(wrapped, tmp_path))
    # the wrapper's own 50 us of Python once more, not the inner step twice
    assert f["saving_upper_bound_us"] == pytest.approx(base["saving_upper_bound_us"] + 50, rel=0.05)


def test_diagnose_ranks_and_caps_savings(tmp_path):
    trace = helpers.load_trace(helpers.reference_trace_path("h200_attention_sdpa_math"))
    found = diagnose(trace)
    assert isinstance(found, Findings)
    assert found["rule"].iloc[0] == "fp32_gemm"  # the math backend ran its bmm in fp32 at low speed
    assert "manual_attention" in found["rule"].head(3).tolist()
    assert (found["saving_upper_bound_us"] <= found.attrs["step_us"] + 1e-6).all()
    assert found["saving_upper_bound_us"].is_monotonic_decreasing
    assert not found.attrs["skipped"]


@pytest.mark.parametrize(
    ("name", "expected"),
    [("hta__critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz", {"allocator", "pageable_copies"}),
     ("kineto__plugin_samples_resnet50_num_workers_0_worker0.pt.trace.json.gz", {"data_loader", "unfused_optimizer"}),
     ("hta__cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", set())],
)  # fmt: skip
def test_real_third_party_traces(name, expected):
    found = diagnose(data_file(name))
    assert expected <= set(found["rule"])
    assert not found.attrs["skipped"]
    assert (found["saving_upper_bound_us"] >= 0).all()
    assert found["evidence"].str.len().gt(0).all()


@pytest.mark.parametrize(
    ("name", "idle"),
    [("hta__amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz", "fp32_gemm"),  # its GEMMs are off the path
     ("hta__triton_example_triton_example.json.gz", "host_sync")],  # the GPU never waits after its one sync
)  # fmt: skip
def test_a_pattern_that_costs_nothing_is_a_note_not_a_finding(name, idle):
    found = diagnose(data_file(name))
    assert idle not in set(found["rule"])
    assert any(idle in note and "not listed" in note for note in found.attrs["notes"])
    costless = (found["saving_upper_bound_us"] <= 0.001 * found.attrs["step_us"]) & (found["saving_bytes"] <= 0)
    assert not costless.any()


def test_bad_input():
    with pytest.raises(TypeError, match="diagnose needs"):
        diagnose(42)
    with pytest.raises(FileNotFoundError):
        diagnose("/nonexistent/trace.json")


def test_a_real_gpu_trace_whose_step_end_waits_are_the_recorders(tmp_path):
    """The H200 reference traces were recorded before helpers.profile labelled its wait: label the waits as it
    now does, and the sync finding (the recorder's own) goes, while the decoder's real findings stay."""
    for name, stays in [("h200_attention_sdpa_flash", set()), ("h200_decoder_train", {"unfused_elementwise"})]:
        doc = json.loads(gzip.open(helpers.reference_trace_path(name)).read())
        for e in [e for e in doc["traceEvents"] if e.get("name") == "cudaDeviceSynchronize"]:
            doc["traceEvents"].append({"ph": "X", "cat": "user_annotation", "name": RECORDER_WAIT, "pid": e["pid"],
                                       "tid": e["tid"], "ts": e["ts"] - 0.5, "dur": e["dur"] + 1.0, "args": {}})  # fmt: skip
        before = set(diagnose(helpers.reference_trace_path(name))["rule"])
        (tmp_path / name).write_text(json.dumps(doc))
        after = set(diagnose(tmp_path / name)["rule"])
        assert "host_sync" in before and "host_sync" not in after
        assert stays <= after


def test_two_waits_in_a_row_are_removed_together(tmp_path):
    """A second .item() right after the first: the fix removes both, so neither is the point the other's wait
    moves to (each alone would look free)."""
    [f] = diagnose(_item_then_host_work(second_item=True).load(tmp_path))[
        lambda d: d["rule"] == "host_sync"
    ].itertuples()
    assert f.saving_upper_bound_us == pytest.approx(180, abs=12)
