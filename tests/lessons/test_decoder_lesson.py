"""Notebook 08's views and checks: figures, GEMM layouts by phase, the transfer exercise."""

from __future__ import annotations

import pytest
import torch
from support import synthetic_decoder_trace

import helpers

NVJET = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_{}"


@pytest.fixture(scope="module")
def cpu_variant():
    # one thread, as notebook 08 runs on a CPU: on a shared machine a descheduled OpenMP thread can
    # stall one GEMM for milliseconds and reorder the parts
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        built = helpers.decoder_workloads.variant_x("cpu")
        return helpers.profile(built.fn, *built.inputs, steps=3, warmup=1, label="variant X")
    finally:
        torch.set_num_threads(threads)


def test_gemm_layouts_split_forward_and_backward(tmp_path):
    names = {"gemm_a": NVJET.format("TNT"), "gemm_b": NVJET.format("TNT"), "gemm_bwd": NVJET.format("NNT")}
    layouts = helpers.gemm_layouts(synthetic_decoder_trace(tmp_path / "t.json.gz", names))
    by_phase = {p: set(g["layout"]) for p, g in layouts.groupby("phase")}
    assert by_phase == {"forward": {"TN"}, "backward": {"NN"}}
    fwd = layouts.set_index("phase").loc["forward"]
    assert fwd["kernels"] == 2 and fwd["time_us"] == pytest.approx(30 + 50)  # per step, gemm_a + gemm_b


def test_the_variant_exercise_is_checked_against_its_trace(cpu_variant):
    parts = helpers.part_breakdown(cpu_variant)
    assert helpers.bottleneck(parts) == "lm_head"  # the CPU stand-in keeps the variant's point
    right = helpers.check_variant(cpu_variant, "lm_head", "last logits", 2.0, measured_speedup=2.1)
    assert [f.status for f in right] == ["right"] * 3
    wrong = helpers.check_variant(cpu_variant, "mlp", "compile", 5.0, measured_speedup=2.0)
    assert [f.status for f in wrong] == ["wrong"] * 3
    missing = helpers.check_variant(cpu_variant, None, None, None, measured_speedup=None)
    assert [f.status for f in missing] == ["not answered yet"] * 2  # no measurement: no speedup check
    with pytest.raises(ValueError, match="fix must be one of"):
        helpers.check_variant(cpu_variant, "lm_head", "a faster GPU", 2.0, 2.0)


def test_figure_and_reference_views(cpu_variant):
    parts = helpers.part_breakdown(cpu_variant)
    fig = helpers.breakdown_figure(parts)
    assert list(fig.data[0].y) == parts["part"].tolist()[::-1]
    with pytest.raises(TypeError, match="part_breakdown"):
        helpers.breakdown_figure(pd_frame_without_parts())
    assert helpers.reference_view("no_such_view") is None
    with pytest.raises(TypeError, match="view name"):
        helpers.reference_view(3)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no GPU kernels"):
            helpers.gemm_layouts(cpu_variant)


def pd_frame_without_parts():
    import pandas as pd

    return pd.DataFrame({"x": [1]})
