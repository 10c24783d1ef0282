"""Notebook 08's own code (helpers.nb08): figures, GEMM layouts by phase, the exercises and the transfer exercise."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
import torch
from support import synthetic_decoder_trace

import helpers
import helpers.lessons.exercises
from helpers import nb08
from helpers.paths import NOTEBOOKS_DIR

NVJET = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_{}"


@pytest.fixture(scope="module")
def cpu_variant():
    # one thread, as notebook 08 runs on a CPU: on a shared machine a descheduled OpenMP thread can
    # stall one GEMM for milliseconds and reorder the parts
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        built = nb08.workloads.variant_x("cpu")
        return helpers.profile(built.fn, *built.inputs, steps=3, warmup=1, label="variant X")
    finally:
        torch.set_num_threads(threads)


def test_gemm_layouts_split_forward_and_backward(tmp_path):
    names = {"gemm_a": NVJET.format("TNT"), "gemm_b": NVJET.format("TNT"), "gemm_bwd": NVJET.format("NNT")}
    layouts = nb08.gemm_layouts(synthetic_decoder_trace(tmp_path / "t.json.gz", names))
    by_phase = {p: set(g["layout"]) for p, g in layouts.groupby("phase")}
    assert by_phase == {"forward": {"TN"}, "backward": {"NN"}}
    fwd = layouts.set_index("phase").loc["forward"]
    assert fwd["kernels"] == 2 and fwd["time_us"] == pytest.approx(30 + 50)  # per step, gemm_a + gemm_b


def test_the_variant_exercise_is_checked_against_its_trace(cpu_variant):
    nb08.reset()
    parts = nb08.part_breakdown(cpu_variant)
    assert nb08.bottleneck(parts) == "lm_head"  # the CPU stand-in keeps the variant's point
    right = nb08.check_variant(cpu_variant, "LM_head", "Last logits", 2.0, measured_speedup=2.1)
    assert [f.status for f in right] == ["right"] * 3  # case and separators do not matter
    wrong = nb08.check_variant(cpu_variant, "mlp", "a faster GPU", 5.0, measured_speedup=2.0)
    assert [f.status for f in wrong] == ["wrong"] * 3  # a fix that is not offered is wrong, not an error
    assert "nb08.fixes()" in wrong[1].message  # the hint, after a wrong answer
    typed = nb08.check_variant(cpu_variant, 3, ["last logits"], "2", measured_speedup=2.0)
    assert [f.status for f in typed] == ["wrong"] * 3 and "expected text" in typed[0].message
    missing = nb08.check_variant(cpu_variant, None, None, None, measured_speedup=None)
    assert [f.status for f in missing] == ["not answered yet"] * 3
    untimed = nb08.check_variant(cpu_variant, "lm_head", "last logits", 1.7, measured_speedup=None)
    assert untimed[2].ok  # nothing measured: any number is accepted, and the feedback says why


def test_every_exercise_of_the_notebook_is_in_the_book():
    nb = json.loads((NOTEBOOKS_DIR / "08_whole_model.ipynb").read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    checked = set(re.findall(r'nb08\.check\(\s*"(\w+)"', code)) | {"variant_part", "variant_fix", "variant_speedup"}
    checked |= {"graph_step"} if "nb08.check_graph_step(" in code else set()  # its own checker
    checked |= {"floor_cause"} if "nb08.check_floor_cause(" in code else set()  # its own checker
    assert checked == set(nb08.EXERCISES.book)
    assert "explain=" not in code and "hint=" not in code and "helpers.lessons.exercises" not in code


def test_explanations_fill_in_their_details():
    nb08.reset()
    fb = nb08.check(
        "optimizer", "Fused", "fused", details={"tensors": 5, "launches": {"for-loop": 60, "foreach": 9, "fused": 1}}
    )
    assert fb.ok and "for-loop issued 60" in fb.message
    fb = nb08.check("prefill_part", "MLP", "mlp", details={"share": 0.6, "config": nb08.DECODER_CONFIGS["small"]})
    assert fb.ok and "60%" in fb.message
    fb = nb08.check("backward_layouts", ["nn", "nt"], {"NN", "NT"})
    assert fb.ok  # a list, any case
    assert "hint" not in nb08.check("gemms", 29, 29).message.lower()  # no hint on a right answer


def test_figure_and_tables(cpu_variant):
    parts = nb08.part_breakdown(cpu_variant)
    fig = nb08.breakdown_figure(parts)
    assert list(fig.data[0].y) == parts["part"].tolist()[::-1]
    with pytest.raises(TypeError, match="part_breakdown"):
        nb08.breakdown_figure(pd.DataFrame({"x": [1]}))
    assert set(nb08.fixes()["fix"]) >= {"last logits", "compile"}
    assert nb08.configs_table()["config"].tolist() == list(nb08.DECODER_CONFIGS)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no GPU kernels"):
            nb08.gemm_layouts(cpu_variant)


def test_the_lesson_runs_the_decoder_benchmark_as_a_program(monkeypatch, tmp_path):
    calls = []

    def fake(args, timeout_s, **kwargs):
        calls.append((args, timeout_s))
        assert kwargs["show"] is nb08.live.benchmark_line_shown  # the log hides section 8's answer and the targets
        out = tmp_path / "live.json"
        out.write_text('{"benchmark": "decoder", "tables": {}}')

    monkeypatch.setattr(nb08, "run_program", fake)
    results = nb08.run_benchmark(("eager", "recompute"), out=tmp_path / "live.json")
    ((args, timeout_s),) = calls
    assert args[:3] == ["-m", "benchmarks", "decoder"] and "eager,recompute" in args and timeout_s < 300
    assert results.tables == [] and results.label.endswith("(measured live)")


def test_the_variant_speedup_is_judged_against_the_spread_of_its_rounds(cpu_variant):
    """Rounds measured in turns: their median is the answer, and a prediction inside their range counts too."""
    rounds = [1.30, 1.36, 1.45]
    statuses = {
        p: nb08.check_variant(cpu_variant, "lm_head", "last logits", p, measured_speedup=rounds)[2].status
        for p in (1.36, 1.20, 1.58, 1.10, 1.70)
    }
    assert statuses == {1.36: "right", 1.20: "right", 1.58: "right", 1.10: "wrong", 1.70: "wrong"}
    with pytest.raises(ValueError, match="positive number"):
        nb08.check_variant(cpu_variant, "lm_head", "last logits", 1.3, measured_speedup=[1.2, float("nan")])
    with pytest.raises(ValueError, match="positive number"):
        nb08.check_variant(cpu_variant, "lm_head", "last logits", 1.3, measured_speedup="fast")
    as_array = nb08.check_variant(cpu_variant, "lm_head", "last logits", 1.36, measured_speedup=np.array(rounds))
    assert as_array[2].status == "right"
