"""Lesson 05's checkers and views, on the H200 reference traces the CPU path of the lesson reads."""

from __future__ import annotations

import pytest

import helpers
from helpers import nb05
from helpers.lessons.exercises import RIGHT, WRONG

VARIANTS = {"torch.compile": "mlp_compiled", "Liger": "mlp_liger", "course kernel": "mlp_course_kernel"}


@pytest.fixture(autouse=True)
def fresh_book():
    nb05.reset()
    yield
    nb05.reset()


@pytest.fixture(scope="module")
def traces():
    names = {"eager": "mlp_eager", **VARIANTS}
    return {label: helpers.load_trace(helpers.reference_trace_path(f"h200_{n}")) for label, n in names.items()}


def _probe(key, expected, taught, *wrong, **kw):
    assert nb05.check(key, taught, expected, **kw).status == RIGHT
    for answer in wrong:
        assert nb05.check(key, answer, expected, **kw).status == WRONG, (key, answer)


def test_operator_counts_of_the_hand_tuned_layer(traces):
    for label in ("Liger", "course kernel"):
        trace = traces[label]
        ops = trace.ops().set_index("name")
        steps = len(trace.steps)
        mm = int(ops.loc["aten::mm", "calls"]) // steps
        pointwise = int(sum(ops["calls"].get(n, 0) for n in ("aten::gelu", "aten::mul"))) // steps
        # taught 3 GEMMs; tempting: the kernel fused the GEMMs too (1); naive: eager's count of everything (5)
        _probe("mm_per_forward", mm, 3, 1, 5)
        # taught 0; naive: eager's gelu and mul (2); tempting: one fused "gelu" left (1)
        _probe("gelu_mul_per_forward", pointwise, 0, 2, 1)


def test_megabytes_a_fused_kernel_moves(traces):
    g = helpers.geglu_table(traces).set_index("variant")
    row = g.loc["torch.compile"]
    one = float(row["MB moved"] / row["tensors moved"])
    details = {"tensor_mb": one}
    # taught 3 passes; naive: eager's 5; tempting: the two inputs only
    _probe("fused_floor_mb", float(row["MB moved"]), 3 * one, 5 * one, 2 * one, details=details)
    assert f"{one:.1f} MB" in nb05.check("fused_floor_mb", 3 * one, float(row["MB moved"]), details=details).message


def test_ranking_states_only_what_the_steps_separate(traces):
    spread = nb05.geglu_step_spread({k: traces[k] for k in VARIANTS})
    assert list(spread["variant"]) == list(VARIANTS)
    assert (spread["min_us"] <= spread["median_us"]).all() and (spread["median_us"] <= spread["max_us"]).all()
    assert (spread["steps"] == 3).all()
    text = nb05.ranking_sentence(spread)
    fastest = spread.sort_values("median_us")["variant"].iloc[0]
    assert text.startswith(f"**{fastest}**")
    close = spread.assign(
        median_us=[10.0, 10.5, 20.0],
        q1_us=[9.5, 10.3, 19.5],
        q3_us=[10.5, 10.8, 20.5],
        min_us=[9.0, 10.2, 19.0],
        max_us=[11.0, 11.0, 21.0],
    )
    sentence = nb05.ranking_sentence(close)
    assert sentence.count("too close to call") == 1 and "Liger** 10.5 us (10.2-11.0) (too close" in sentence


def test_spread_errors(traces):
    with pytest.raises(TypeError):
        nb05.geglu_step_spread([])
    cpu = helpers.profile(lambda x: x * 2, helpers.workloads.geglu_mlp("cpu").inputs[0], steps=1)
    with pytest.raises(ValueError, match="no kernels"):
        nb05.geglu_step_spread({"cpu": cpu})
    with pytest.raises(ValueError, match="spread"):
        nb05.ranking_sentence(nb05.geglu_step_spread({"Liger": traces["Liger"]}).drop(columns="max_us"))


def test_the_lessons_names_are_reexported_under_their_own_names():
    for name in nb05.__all__:
        obj = getattr(nb05, name)
        own = getattr(obj, "__name__", name)
        assert own == name or not callable(obj), name
