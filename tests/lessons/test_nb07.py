"""Lesson 07's own code (helpers.nb07): the learner's kernel, their predictions, the views, the benchmark's tables.

The kernels below are what a learner writes in notebook 07 (the scaffold of the notebook with
three versions of the online-softmax update: right, missing the rescaling, and not written yet).
They run in Triton's interpreter here.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch
import triton
import triton.language as tl

import helpers
import helpers.lessons.exercises
import helpers.lessons.results
import helpers.measure.roofline
from helpers import nb07
from helpers.attention.costs import AttentionShape
from helpers.lessons.exercises import Tie

LOG2E = 1.4426950408889634


@triton.jit
def right_update(qk, qk_scale, m_i, l_i, acc, v):
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    p = tl.math.exp2(qk * qk_scale - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def no_rescale_update(qk, qk_scale, m_i, l_i, acc, v):
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    p = tl.math.exp2(qk * qk_scale - m_new[:, None])
    return m_new, l_i + tl.sum(p, 1), acc + tl.dot(p.to(v.dtype), v)


@triton.jit
def skeleton_update(qk, qk_scale, m_i, l_i, acc, v):
    return m_i, l_i, acc


@triton.jit
def scaffold_kernel(
    Q, K, V, Out, SEQ, qk_scale, UPDATE: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK: tl.constexpr, CAUSAL: tl.constexpr
):
    start_m = tl.program_id(0) * BLOCK
    base = tl.program_id(1).to(tl.int64) * SEQ * HEAD_DIM
    offs_m = start_m + tl.arange(0, BLOCK)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_m[:, None] < SEQ, other=0.0)
    m_i = tl.full([BLOCK], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK], tl.float32)
    acc = tl.zeros([BLOCK, HEAD_DIM], tl.float32)
    end = SEQ
    if CAUSAL:
        end = tl.minimum(start_m + BLOCK, SEQ)
    for start_n in range(0, end, BLOCK):
        offs_n = start_n + tl.arange(0, BLOCK)
        kv = base + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
        k = tl.load(K + kv, mask=offs_n[:, None] < SEQ, other=0.0)
        v = tl.load(V + kv, mask=offs_n[:, None] < SEQ, other=0.0)
        keep = offs_n[None, :] < SEQ
        if CAUSAL:
            keep = keep & (offs_n[None, :] <= offs_m[:, None])
        qk = tl.where(keep, tl.dot(q, tl.trans(k)), -1.0e30)
        if UPDATE == 0:
            m_i, l_i, acc = right_update(qk, qk_scale, m_i, l_i, acc, v)
        elif UPDATE == 1:
            m_i, l_i, acc = no_rescale_update(qk, qk_scale, m_i, l_i, acc, v)
        else:
            m_i, l_i, acc = skeleton_update(qk, qk_scale, m_i, l_i, acc, v)
    out = acc / l_i[:, None]
    tl.store(
        Out + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :],
        out.to(Out.dtype.element_ty),
        mask=offs_m[:, None] < SEQ,
    )


def launcher(update: int):
    def my_attention(q, k, v, out, causal):
        b, h, s, d = q.shape
        block = 16
        scaffold_kernel[(triton.cdiv(s, block), b * h)](
            q, k, v, out, s, d**-0.5 * LOG2E, UPDATE=update, HEAD_DIM=d, BLOCK=block, CAUSAL=causal
        )

    return my_attention


def test_a_right_kernel_passes() -> None:
    fb = nb07.check_attention_kernel(launcher(0))
    assert fb.ok, fb


def test_a_kernel_that_forgets_to_rescale_is_wrong_and_only_then_hinted() -> None:
    fb = nb07.check_attention_kernel(launcher(1))
    assert fb.status == "wrong" and "alpha" in fb.message and "Hint:" in fb.message
    assert "Hint:" not in nb07.check_attention_kernel(launcher(0)).message
    assert "alpha" in nb07.hint("kernel").message  # on request


def test_the_skeleton_is_not_answered_yet() -> None:
    assert nb07.check_attention_kernel(launcher(2)).status == "not answered yet"
    fb = nb07.check_attention_kernel(None)
    assert fb.status == "not answered yet" and "Hint" not in fb.message and "nb07.hint('kernel')" in fb.message
    assert nb07.EXERCISES.results["kernel"] is fb  # recorded in the lesson's book


def test_a_raising_kernel_is_feedback_not_a_traceback() -> None:
    def broken(q, k, v, out, causal):
        raise IndexError("offsets out of range")

    fb = nb07.check_attention_kernel(broken)
    assert fb.status == "wrong" and "IndexError" in fb.message
    with pytest.raises(TypeError, match="launcher"):
        nb07.check_attention_kernel("my_attention")


def test_a_kernel_that_misses_rows_is_caught() -> None:
    def half(q, k, v, out, causal):
        launcher(0)(q, k, v, out, causal)
        out[..., -1:, :] = float("nan")  # the ragged last tile never stored

    fb = nb07.check_attention_kernel(half)
    assert fb.status == "wrong" and "NaN" in fb.message


def test_predictions_are_checked_on_a_live_profile() -> None:
    shape = AttentionShape(batch=1, heads=2, seq=40, head_dim=16)
    itemsize = 2 if torch.cuda.is_available() else 4  # bf16 on a GPU, float32 on a CPU
    right = nb07.check_attention_prediction(shape, 1 * 2 * 40 * 40 * itemsize, 6)
    assert all(f.ok for f in right), right
    assert "GQA" in right[1].message  # the explanation says when the count changes
    wrong = nb07.check_attention_prediction(shape, 40 * 40 * itemsize, 5)
    assert [f.status for f in wrong] == ["wrong", "wrong"]
    assert str(40 * 40 * itemsize * 2) not in wrong[0].message  # a wrong answer does not reveal the measurement
    assert all(f.status == "not answered yet" for f in nb07.check_attention_prediction(None, None, None))
    with pytest.raises(ValueError, match="pick a shape under"):
        nb07.check_attention_prediction(AttentionShape(batch=64, heads=64, seq=4096, head_dim=64), 1, 1)


def test_gpu_view_is_live_recorded_or_absent() -> None:
    view = nb07.gpu_view("attention_manual")
    if view is not None:  # recorded on the H200 (or live on a GPU)
        assert view.kernels().shape[0] > 0
    with pytest.raises(ValueError, match="unknown view"):
        nb07.gpu_view("attention_everything")


def test_the_gpu_count_of_the_prediction_is_six_on_a_real_h200_trace():
    """On a GPU the check counts kernels and copies: the clone inside masked_fill is a memcpy, not a kernel, and
    cuBLAS's workspace memsets are left out; so the H200's manual attention gives the same 6 as a CPU's operators."""
    trace = helpers.load_trace(helpers.reference_trace_path("h200_attention_manual"))
    assert helpers.kernels_per_forward(trace) == 5
    assert helpers.kernels_per_forward(trace, kinds=("kernel", "memcpy")) == 6


def test_score_sweep_measures_what_it_predicts() -> None:
    sweep = nb07.score_sweep([64, 128], device="cpu", heads=2, head_dim=16, repeats=1)
    assert list(sweep["seq"]) == [64, 128]
    assert (sweep["measured_score_mb"] == sweep["predicted_score_mb"]).all()
    assert sweep["measured_score_mb"].iloc[1] == pytest.approx(4 * sweep["measured_score_mb"].iloc[0])
    assert (sweep["manual_peak_mb"] >= sweep["measured_score_mb"]).all()
    with pytest.raises(ValueError, match="over the"):
        nb07.score_sweep([1 << 16], device="cpu", heads=64)
    with pytest.raises(ValueError, match="at least one"):
        nb07.score_sweep([], device="cpu")


def test_faster_of_grades_only_a_difference_outside_the_spread() -> None:
    assert nb07.faster_of({"sdpa": [5.0, 5.2, 5.1], "flex": [1.0, 1.1, 1.2]}) == "flex"
    assert nb07.faster_of({"sdpa": [1.0, 1.1, 1.2], "flex": [5.0, 5.2, 5.1]}) == "sdpa"
    tie = nb07.faster_of({"sdpa": [1.0, 1.3, 1.1], "flex": [1.2, 1.0, 1.4]})
    assert isinstance(tie, Tie) and tie.kind is str
    assert nb07.check("faster_window", "sdpa", tie, details={"kept": 0.1, "skipped": 80}).ok
    rounds = nb07.timing_rounds({"a": lambda x: x + 1, "b": lambda x: x * 2}, torch.ones(4), rounds=3, repeats=1)
    assert set(rounds) == {"a", "b"} and all(len(r) == 3 for r in rounds.values())


def test_every_exercise_explanation_formats_with_its_details() -> None:
    details = {
        "score_mb": {"shape": [1, 2, 3, 3], "itemsize": 4, "dtype": "float32"},
        "faster_window": {"kept": 0.1, "skipped": 80.0},
        "shape_bytes": {"itemsize": 4, "dtype": "float32"},
        "shape_kernels": {"what": "compute operators"},
    }
    for key, ex in nb07.EXERCISES.book.items():
        assert ex.hint, key  # every exercise can hint, after a wrong answer or on request
        ex.explain.format(**details.get(key, {}))


def test_flash_config_table_lists_the_gpu_candidates() -> None:
    table = nb07.flash_config_table()
    assert len(table) >= 4 and (table["kv_smem_kb_at_d128"] > 0).all()


def test_the_benchmark_roofline_is_drawn_from_the_stored_table() -> None:
    res = helpers.load_results("h200_attention")
    fig = nb07.benchmark_roofline(res)
    stored = res.table("roofline")
    markers = [t for t in fig.data if t.mode == "markers"]
    assert [t.name for t in markers] == list(stored["name"])
    assert [t.y[0] for t in markers] == list(stored["achieved_tflops"])
    assert "H200" in fig.layout.title.text


def test_wall_and_kernel_times_sets_the_two_side_by_side() -> None:
    res = helpers.load_results("h200_attention")
    times = nb07.wall_and_kernel_times(res, head_dim=128, seq=4096)
    rows = res.table("rows")
    at = rows[(rows["head_dim"] == 128) & (rows["seq"] == 4096) & (rows["status"] == "ok")]
    assert sorted(times["variant"]) == sorted(at["variant"])
    assert times["time_us"].is_monotonic_increasing
    row = times.set_index("variant").loc["manual-eager"]
    assert row["wall_over_kernel"] == pytest.approx(row["time_us"] / row["kernel_us"])
    assert row["wall_over_kernel"] > 1.05  # its masked_fill copy is a memcpy, outside the kernel sum
    with pytest.raises(ValueError, match="no row at head_dim 96"):
        nb07.wall_and_kernel_times(res, head_dim=96, seq=4096)


def test_run_benchmark_runs_the_program_quietly_and_reads_its_file(monkeypatch, tmp_path, capsys) -> None:
    calls = []
    out = json.loads(json.dumps({"tables": {}, "provenance": {"device": "X"}}))

    def fake(args, timeout_s, progress):
        calls.append((args, timeout_s, progress))
        (tmp_path / "attention_benchmark.json").write_text(json.dumps(out))
        return ""

    monkeypatch.setattr(nb07.readings, "run_program", fake)
    monkeypatch.setattr(nb07, "LOCAL_TRACES_DIR", tmp_path)
    res = nb07.run_benchmark(timeout_s=5)
    assert calls[0][0][:3] == ["-m", "benchmarks", "attention"] and "--out" in calls[0][0]
    assert calls[0][2] is False  # its progress (absolute paths, harness timings) stays off the lesson's screen
    shown = capsys.readouterr().out.strip().splitlines()
    assert len(shown) == 1 and shown[0].startswith("python -m benchmarks attention ran in ")
    assert shown[0].endswith("attention_benchmark.json.")
    assert res.provenance["device"] == "X" and "--ceilings" not in calls[0][0]
    nb07.run_benchmark(timeout_s=5, ceilings=nb07.reference_ceilings())  # the lesson's one set, passed on
    assert calls[1][0][-2] == "--ceilings" and (tmp_path / "attention_ceilings.json").exists()


def test_run_quietly_names_the_file_relative_to_the_repository(monkeypatch, capsys) -> None:
    from helpers.paths import REPO_ROOT

    monkeypatch.setattr(nb07.readings, "run_program", lambda args, timeout_s, progress: "")
    out = REPO_ROOT / "traces" / "local" / "attention_benchmark.json"  # never written: the program is faked
    nb07.readings.run_quietly(["-m", "benchmarks", "attention"], 5, out)
    line = capsys.readouterr().out.strip()
    assert line.endswith("written to traces/local/attention_benchmark.json."), line


def test_plan_kernel_costs_matches_kernels_by_their_launching_operator() -> None:
    # A kernel table as the H200 shows the hand-written attention (names shortened), with a memset.
    kernels = pd.DataFrame(
        {
            "short_name": ["gemm_a", "mul", "copy", "Memset (Device)", "masked_fill", "softmax", "gemm_b"],
            "kind": ["kernel", "kernel", "kernel", "memset", "kernel", "kernel", "kernel"],
            "duration_us": [100.0, 50.0, 60.0, 1.0, 55.0, 70.0, 90.0],
            "launched_by": [
                "aten::bmm",
                "aten::mul",
                "aten::copy_",
                "aten::bmm",
                "aten::masked_fill_",
                "aten::_softmax",
                "aten::bmm",
            ],
        }
    )
    out = nb07.plan_kernel_costs(kernels, AttentionShape(batch=2, heads=3, seq=37, head_dim=16), torch.bfloat16)
    plan = nb07.manual_attention_plan(AttentionShape(batch=2, heads=3, seq=37, head_dim=16), torch.bfloat16)
    assert list(out["name"]) == list(plan["step"])  # every step found its kernel, in order
    assert out.attrs["unmatched"] == 1 and out.attrs["steps_without_kernel"] == []  # the memset
    assert list(out["kernel"]) == ["gemm_a", "mul", "copy", "masked_fill", "softmax", "gemm_b"]
    frame = helpers.measure.roofline.roofline_frame(
        out.to_dict("records"), helpers.lessons.results.reference_ceilings()
    )
    assert set(frame.loc[frame["name"].str.contains("scale|clone|fill|softmax"), "bound_by"]) == {"memory"}
    with pytest.raises(ValueError, match="kernel_table"):
        nb07.plan_kernel_costs(
            pd.DataFrame({"name": []}), AttentionShape(batch=1, heads=1, seq=8, head_dim=8), torch.bfloat16
        )
