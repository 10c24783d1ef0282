"""Lesson 04's checkers, probed with the taught answer, a naive one and the tempting wrong one.

Expected values come from what the notebook measures: the H200 reference traces, Dynamo's
decisions (counted with the `eager` backend, seconds on a CPU) and timing rounds.
"""

from __future__ import annotations

import pytest
import torch

import helpers
from helpers import nb04
from helpers.lessons.exercises import RIGHT, TIE, WRONG, Tie
from helpers.measure.compile_costs import FirstCall


@pytest.fixture(autouse=True)
def fresh_book():
    nb04.reset()
    yield
    nb04.reset()


@pytest.fixture(scope="module")
def h200():
    return {
        "eager": helpers.load_trace(helpers.reference_trace_path("h200_mlp_eager")),
        "compiled": helpers.load_trace(helpers.reference_trace_path("h200_mlp_compiled")),
    }


def _probe(key, expected, taught, *wrong, **kw):
    assert nb04.check(key, taught, expected, **kw).status == RIGHT
    for answer in wrong:
        fb = nb04.check(key, answer, expected, **kw)
        assert fb.status == WRONG, (key, answer, fb)
        assert nb04.EXERCISES.book[key].explain.split(":")[0] not in fb.message  # no explanation after a wrong answer


def test_kernel_questions_on_the_h200_traces(h200):
    kernels = {k: helpers.kernel_table(t) for k, t in h200.items()}
    gemms = {k: list(v.loc[v["family"] == "gemm", "name"]) for k, v in kernels.items()}
    # taught: same cuBLAS kernels; tempting: "compile changes every kernel"; naive: a word, not a bool
    _probe("same_gemm_kernels", gemms["eager"] == gemms["compiled"], True, False, "same")
    # taught 4; naive 5 (eager's count); tempting 3 (everything fused into the GEMMs)
    _probe("compiled_kernels_per_forward", helpers.kernels_per_forward(h200["compiled"]), 4, 5, 3)


def test_the_operator_left_of_the_chain(h200):
    trace = h200["compiled"]
    call = next(n for n in trace.ops(include_annotations=True)["name"] if n.startswith("## Call CompiledFxGraph"))
    tree = trace.chain(call)
    left = ", ".join(sorted({n for n in tree.loc[tree["depth"] == 1, "name"] if n.startswith("aten::")}))
    _probe("left_of_the_chain", left, "aten::mm", "aten::linear", "aten::matmul")


def test_megabytes_saved_by_fusion(h200):
    t = helpers.geglu_table(h200).set_index("variant")
    saved = float(t.loc["eager", "MB moved"] - t.loc["compiled", "MB moved"])
    one = float(t.loc["eager", "MB moved"] / t.loc["eager", "tensors moved"])
    details = {"tensor_mb": one}
    # taught: two passes; naive: one tensor; tempting: the fused kernel's own three passes
    _probe("saved_mb", saved, 2 * one, one, 3 * one, details=details)
    assert f"{one:.1f} MB" in nb04.check("saved_mb", 2 * one, saved, details=details).message


def test_end_to_end_is_graded_only_beyond_the_spread():
    apart = {"compiled": [210.0, 211.5, 212.0, 210.4, 213.0], "eager": [240.0, 241.0, 239.5, 242.0, 240.7]}
    assert nb04.first_is_faster(apart) is True
    why = {"why": nb04.end_to_end_why({"eager": "GPU", "compiled": "GPU"})}
    _probe("compiled_faster_end_to_end", nb04.first_is_faster(apart), True, False, details=why)
    # one slow round (another program on the machine) does not make a tie: the middle half of the rounds decides
    one_slow = {"compiled": [210.0, 215.0, 250.0, 212.0, 211.0], "eager": [240.0, 241.0, 239.5, 242.0, 240.7]}
    assert nb04.first_is_faster(one_slow) is True
    # a shared GPU where compile's rounds spread over eager's: both answers are accepted, and why
    noisy = {"compiled": [210.0, 238.0, 245.0, 241.0, 212.0], "eager": [240.0, 241.0, 239.5, 242.0, 240.7]}
    tie = nb04.first_is_faster(noisy)
    assert isinstance(tie, Tie)
    for answer in (True, False):
        fb = nb04.check("compiled_faster_end_to_end", answer, tie, details=why)
        assert fb.status == TIE and fb.message.startswith("Both answers are accepted") and "middle half" in fb.message
    assert nb04.check("compiled_faster_end_to_end", "yes", tie, details=why).status == WRONG
    # a recording with one number per variant cannot show its spread: a tie that says so
    single = nb04.first_is_faster({"compiled": [210.9], "eager": [240.7]})
    assert isinstance(single, Tie) and "one number per variant" in single.why


def test_first_is_faster_errors():
    with pytest.raises(ValueError, match="exactly two"):
        nb04.first_is_faster({"a": [1.0, 2.0, 3.0]})
    with pytest.raises(ValueError, match="finite"):
        nb04.first_is_faster({"a": [1.0, 2.0, float("nan")], "b": [1.0, 2.0, 3.0]})


def test_rounds_time_real_calls_and_the_payback_follows_the_spread():
    x = torch.randn(64, 64)
    rounds = nb04.call_rounds({"eager": lambda t: t @ t, "compiled": lambda t: t + 1}, x, rounds=3, repeats=3)
    assert {k: len(v) for k, v in rounds.items()} == {"eager": 3, "compiled": 3}
    frame = nb04.rounds_frame(rounds).set_index("variant")
    assert (frame["min_us"] <= frame["median_us"]).all() and (frame["median_us"] <= frame["max_us"]).all()
    first = FirstCall(first_s=10.0, later_s=0.001, fx_cache={})
    apart = {"eager": [300.0, 310.0, 305.0], "compiled": [200.0, 205.0, 210.0]}
    assert "pays back after about" in nb04.payback(first, apart)
    overlap = {"eager": [300.0, 310.0, 205.0], "compiled": [200.0, 305.0, 295.0]}  # medians 5 us apart
    assert "Too close to call" in nb04.payback(first, overlap) and "pays back" not in nb04.payback(first, overlap)
    slower = {"eager": [200.0, 205.0, 210.0], "compiled": [300.0, 310.0, 305.0]}
    assert "does not pay back" in nb04.payback(first, slower)
    with pytest.raises(ValueError, match="eager"):
        nb04.payback(first, {"a": [1.0, 2.0, 3.0], "b": [1.0, 2.0, 3.0]})
    with pytest.raises(ValueError, match="at least 3"):
        nb04.call_rounds({"eager": lambda t: t}, x, rounds=2)
    with pytest.raises(TypeError, match="eager: expected a function or module, got str"):
        nb04.end_to_end_rounds({"eager": "t @ t"}, x)
    timed = nb04.end_to_end_rounds({"eager": lambda t: t @ t, "compiled": lambda t: t + 1}, x, rounds=3, iters=2)
    assert {k: {m: len(v) for m, v in d.items()} for k, d in timed.items()} == {
        k: {"nosync_us": 3, "sync_us": 3} for k in ("eager", "compiled")
    }


@pytest.fixture(scope="module")
def mlp():
    return helpers.workloads.geglu_mlp("cpu")


def _sweep(mlp, batches, **kw):
    torch._dynamo.reset()
    try:
        return nb04.shape_sweep(mlp.fn, helpers.batch_inputs(mlp.inputs[0], batches), backend="eager", **kw).compiles
    finally:
        torch._dynamo.reset()


def test_compile_counts_are_dynamos_decisions(mlp):
    b = mlp.shape.batch
    batches = [b, 2 * b, 4 * b, 3 * b, b]
    # taught 2; naive one per call (5); tempting one per shape (4)
    _probe("compiles_default", _sweep(mlp, batches), 2, 5, 4)
    # taught one per distinct shape (4); naive one per call (5); tempting the default's 2
    _probe("compiles_static", _sweep(mlp, batches, dynamic=False), 4, 5, 2)
    # a sequence of the learner's own, with a size of 1
    _probe("my_compiles", _sweep(mlp, [1, 2, 3, 1]), _sweep(mlp, [1, 2, 3, 1]), 4)


def test_other_strides_recompile(mlp):
    x0 = mlp.inputs[0]
    transposed = x0.transpose(0, 1).contiguous().transpose(0, 1)
    torch._dynamo.reset()
    try:
        outcome, sweep, error = nb04.stride_outcome(mlp.fn, x0, transposed)
    finally:
        torch._dynamo.reset()
    assert outcome == "recompile" and sweep is not None and not error
    # the sizes stay fixed: the second graph is named for its dynamic strides, and its time has two decimals
    assert sweep.table["graph"].iloc[1].startswith("dynamic strides (") and "e-0" not in repr(sweep)
    with pytest.raises(ValueError, match="same shape"):
        nb04.stride_outcome(mlp.fn, x0, x0[:1])
    details = {"strides": tuple(x0.stride()), "other_strides": tuple(transposed.stride())}
    _probe("strided_input", outcome, "recompile", "error", "reuse", details=details)
    assert " Recompile " in f" {nb04.check('strided_input', ' Recompile ', outcome, details=details).answer} "


def test_hints_wait_for_a_wrong_answer():
    fb = nb04.check("compiles_default", None, 2)
    assert fb.status == "not answered yet" and "Hint" not in fb.message and "nb04.hint" in fb.message
    assert "Hint" in nb04.check("compiles_default", 3, 2).message
    assert nb04.hint("compiles_default").message.startswith("Hint")


def test_autotune_note_says_whether_the_benchmark_agrees():
    same = nb04.autotune_note(231.9, 232.0, "H200 run")
    assert "as here" in same and "against" not in same
    other = nb04.autotune_note(205.0, 232.0, "H200 run")
    assert "against 205 us here" in other
    with pytest.raises(ValueError, match="bench_us"):
        nb04.autotune_note(200.0, float("nan"), "x")


def test_quiet_dynamo_hides_the_graph_break_warning(caplog):
    def broken(x):
        y = x * 2
        return y / y.abs().max().item()

    torch._dynamo.reset()
    with nb04.quiet_dynamo():
        report = torch._dynamo.explain(broken)(torch.randn(4))
    torch._dynamo.reset()
    assert report.graph_break_count == 1
    assert not [r for r in caplog.records if r.levelname == "WARNING" and "Graph break" in r.getMessage()]
