"""Sentences lessons 00 and 05 build from live numbers, fed synthetic numbers for each branch (GPU and CPU), the
notices the lessons' first cell drops, and the operators-only dispatch tree lesson 03 shows before its guesses."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

from helpers.lessons import display, nb00, nb05


def test_slowest_call_names_no_cause_and_points_at_the_median():
    text = nb00.slowest_call_sentence("aten::linear", 20, 34.2, 112.2, 0.14)
    assert "3.3 times the median" in text and "14%" in text and "read the median" in text
    assert "paused" not in text.split("(")[0]  # no cause asserted; the aside says a pause is one possibility
    calm = nb00.slowest_call_sentence("aten::linear", 20, 34.2, 40.0, 0.06)
    assert "No call stands out" in calm
    with pytest.raises(ValueError):
        nb00.slowest_call_sentence("aten::linear", 20, 34.2, 10.0, 0.06)


def _startup(later_ms: dict[tuple[str, tuple], float]) -> pd.DataFrame:
    return pd.DataFrame([{"variant": v, "input_shape": s, "later_call_s": ms / 1e3} for (v, s), ms in later_ms.items()])


SMALL, BIG = (64, 128, 768), (128, 128, 768)


def test_later_calls_compare_shape_by_shape_and_against_kernels_on_a_gpu():
    startup = _startup(
        {
            ("torch.compile", SMALL): 0.31,
            ("torch.compile", BIG): 0.52,
            ("hand-tuned (local)", SMALL): 0.26,
            ("hand-tuned (local)", BIG): 0.47,
            ("eager", SMALL): 0.29,
            ("eager", BIG): 0.53,
        }  # fmt: skip
    )
    kernels = {"torch.compile": 234.0, "hand-tuned (local)": 223.0, "eager": 255.0}
    text = nb05.later_calls_sentence(startup, kernels, "hand-tuned (local)")
    assert "mean of the two" not in text and f"input {SMALL}" in text and "1.7-1.8x" in text
    assert "310 us against 234 us" in text and "longer than its kernels" in text
    noisy = nb05.later_calls_sentence(startup, {**kernels, "eager": 400.0}, "hand-tuned (local)")
    assert "disagree" in noisy and "longer than its kernels" not in noisy


def test_later_calls_on_a_cpu_blame_the_interpreter_only_when_it_is_slowest():
    slow = _startup({("torch.compile", SMALL): 5.0, ("hand-tuned (local)", SMALL): 90.0, ("eager", SMALL): 6.0})
    assert "interpreter, not the kernel" in nb05.later_calls_sentence(slow, None, "hand-tuned (local)")
    quick = _startup({("torch.compile", SMALL): 5.0, ("hand-tuned (local)", SMALL): 4.0, ("eager", SMALL): 6.0})
    assert "say little about a GPU" in nb05.later_calls_sentence(quick, None, "hand-tuned (local)")


def test_the_compared_variants_are_counted_and_placed():
    live = nb05.compared_sentence(["eager", "torch.compile", "course kernel"], "NVIDIA H100 80GB HBM3", True)
    assert live.startswith("3 variants") and "this GPU (NVIDIA H100" in live and "H200" not in live
    ref = nb05.compared_sentence(["eager", "torch.compile", "Liger", "course kernel"], "NVIDIA H200", False)
    assert ref.startswith("4 variants") and "reference traces of the NVIDIA H200" in ref


def test_startup_view_shows_milliseconds_not_scientific_seconds():
    startup = pd.DataFrame(
        [
            {
                "variant": "eager",
                "input_shape": SMALL,
                "first_call_s": 3.3e-4,
                "graphs_compiled": 0,
                "fx_cache_hits": 0,
                "later_call_s": 2.9e-4,
            }
        ]  # fmt: skip
    )
    view = nb05.startup_view(startup)
    assert list(view.columns) == [
        "variant", "input_shape", "first_call_ms", "graphs_compiled", "fx_cache_hits", "later_call_ms",
    ]  # fmt: skip
    assert view.loc[0, "first_call_ms"] == 0.33 and "e-" not in view.to_string()


def test_the_lessons_first_cell_drops_two_notices_and_keeps_other_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        display.lesson_path()
        warnings.warn(
            "Warning: Profiler clears events at the end of each cycle. Only events from the current cycle ...",
            UserWarning,
            stacklevel=2,
        )
        warnings.warn("IProgress not found. Please update jupyter and ipywidgets.", UserWarning, stacklevel=2)
        warnings.warn("a real warning", UserWarning, stacklevel=2)
    assert [str(w.message) for w in caught] == ["a real warning"]


def test_an_operators_only_tree_leaves_out_every_device_event():
    from helpers import chain_tree, load_trace, reference_trace_path

    trace = load_trace(reference_trace_path("h200_mlp_eager"))
    full, ops = chain_tree(trace, "aten::linear"), chain_tree(trace, "aten::linear", ops_only=True)
    assert set(full.frame["kind"]) > {"op"} and set(ops.frame["kind"]) == {"op"}
    assert "nvjet" not in repr(ops) and "Memset" not in repr(ops) and "operators only" in repr(ops)
    with pytest.raises(TypeError):
        chain_tree(trace, "aten::linear", ops_only="yes")
