"""Roofline helpers: formulas against the blog's numbers, achieved() maths, CPU ceilings, figure."""

from __future__ import annotations

import dataclasses
import json
import math
import time

import pandas as pd
import plotly.graph_objects as go
import pytest
import torch
from support import H200_REFERENCE

from helpers.measure.ceiling_gemms import best_fp8_matmul_rate, fp8_supported
from helpers.measure.ceilings import Ceilings, ceilings_from_dict, measure_ceilings
from helpers.measure.roofline import (
    ACHIEVED_KEYS,
    achieved,
    dtype_size,
    elementwise_bytes,
    gemm_bytes,
    gemm_flops,
    roofline_figure,
    roofline_frame,
)
from helpers.mlp.plans import geglu_bytes, geglu_mlp_flops
from helpers.paths import REPO_ROOT

M, DIM, HIDDEN = 64 * 128, 768, 3072  # the blog's shape: batch 64 x seq 128 tokens


# --- formulas -------------------------------------------------------------------------------------


def test_geglu_bytes_blog_shape() -> None:
    # read gate + up, write out: 3 tensors of 8192 x 3072 bf16
    assert geglu_bytes(M, HIDDEN, torch.bfloat16) == 3 * 8192 * 3072 * 2 == 150_994_944
    assert round(geglu_bytes(M, HIDDEN, "bf16") / 1e6) == 151


def test_geglu_mlp_flops_blog_shape() -> None:
    assert geglu_mlp_flops(M, DIM, HIDDEN) == 3 * 2 * 8192 * 768 * 3072 == 115_964_116_992
    assert round(geglu_mlp_flops(M, DIM, HIDDEN) / 1e9) == 116


def test_gemm_formulas() -> None:
    assert gemm_flops(2, 3, 4) == 48
    assert gemm_bytes(2, 3, 4, "fp32") == (2 * 4 + 4 * 3 + 2 * 3) * 4
    assert gemm_bytes(8192, 3072, 768, torch.bfloat16) == (8192 * 768 + 768 * 3072 + 8192 * 3072) * 2


def test_elementwise_bytes_and_dtype_names() -> None:
    assert elementwise_bytes(1000, "fp16", reads=1, writes=1) == 4000
    assert elementwise_bytes(10, torch.float32, 2, 0) == 80
    assert dtype_size("bfloat16") == dtype_size("torch.bfloat16") == dtype_size(torch.bfloat16) == 2
    assert dtype_size("float64") == 8


@pytest.mark.parametrize(
    "call, exc",
    [
        (lambda: gemm_flops(0, 1, 1), ValueError),
        (lambda: gemm_flops(-2, 1, 1), ValueError),
        (lambda: gemm_flops(2.0, 1, 1), TypeError),
        (lambda: gemm_flops(True, 1, 1), TypeError),
        (lambda: gemm_bytes(1, 1, 1, "bf17"), ValueError),
        (lambda: gemm_bytes(1, 1, 1, 2), TypeError),
        (lambda: elementwise_bytes(10, "bf16", 0, 0), ValueError),
        (lambda: elementwise_bytes(10, "bf16", -1, 1), ValueError),
        (lambda: geglu_bytes(8192, "3072", "bf16"), TypeError),
        (lambda: geglu_mlp_flops(8192, 768, 0), ValueError),
    ],
)
def test_formula_bad_inputs(call, exc) -> None:
    with pytest.raises(exc):
        call()


# --- reference ceilings and achieved() ------------------------------------------------------------

# The maths below is checked against fixed ceilings (the numbers of an old H200 run), not against
# H200_REFERENCE, which changes whenever the ceilings are re-measured.
CEIL = dataclasses.replace(
    H200_REFERENCE,
    copy_bytes_per_s=4.14e12,
    matmul_flop_per_s=673e12,
    read_bytes_per_s=None,  # the roof is then the copy bandwidth alone: fixed numbers, whatever is recorded
    write_bytes_per_s=None,
    recorded="2026-11-29",
)


def test_h200_reference_is_labelled_as_recorded() -> None:
    # its numbers and provenance: tests/measure/test_ceilings.py
    assert H200_REFERENCE.source == "reference"
    assert "recorded reference" in H200_REFERENCE.method and "recorded reference" in H200_REFERENCE.label


def test_ceilings_round_trip_through_json() -> None:
    assert ceilings_from_dict(json.loads(json.dumps(H200_REFERENCE.as_dict()))) == H200_REFERENCE
    text = json.dumps(CEIL.as_dict())
    again = ceilings_from_dict(json.loads(text))
    assert again == CEIL
    frame = again.to_frame()
    assert frame.loc["copy bandwidth", "value"] == pytest.approx(4.14)
    assert frame.loc["source", "value"] == "reference"


def test_fp8_matmul_ceiling_is_optional_and_round_trips() -> None:
    stored = json.loads((REPO_ROOT / "benchmarks" / "results" / "h200_ceilings.json").read_text())["ceilings"]
    assert "fp8_matmul_flop_per_s" not in stored  # a file recorded before the FP8 ceiling still loads
    old = ceilings_from_dict({**stored, "source": "reference"})
    assert old.fp8_matmul_flop_per_s is None and old.to_frame().loc["FP8 matmul rate", "value"] is None
    fp8 = dataclasses.replace(CEIL, fp8_matmul_flop_per_s=1.43e15)
    again = ceilings_from_dict(json.loads(json.dumps(fp8.as_dict())))
    assert again == fp8 and again.to_frame().loc["FP8 matmul rate", "value"] == pytest.approx(1430.0)
    with pytest.raises(ValueError):
        ceilings_from_dict({**CEIL.as_dict(), "fp8_matmul_flop_per_s": 0.0})


def test_fp8_matmul_ceiling_is_not_measured_where_fp8_gemms_do_not_run() -> None:
    assert not fp8_supported(torch.device("cpu"))
    assert best_fp8_matmul_rate(torch.device("cpu"), repeats=1, warmup=0) is None
    assert measure_ceilings("cpu").fp8_matmul_flop_per_s is None


def test_ceilings_from_dict_rejects_bad_dicts() -> None:
    d = CEIL.as_dict()
    with pytest.raises(ValueError, match="missing keys"):
        ceilings_from_dict({k: v for k, v in d.items() if k != "copy_bytes_per_s"})
    with pytest.raises(ValueError, match="unknown keys"):
        ceilings_from_dict({**d, "copy_bw": 1.0})
    with pytest.raises(ValueError):
        ceilings_from_dict({**d, "matmul_flop_per_s": -1.0})
    with pytest.raises(ValueError):
        ceilings_from_dict({**d, "source": "guess"})
    with pytest.raises(TypeError):
        ceilings_from_dict([("device", "x")])  # type: ignore[arg-type]


def test_geglu_floor_at_h200_bandwidth() -> None:
    # NOTES: Inductor's fused kernel took 37.1 us for 151 MB; floor 36.5 us; 98 % of bandwidth
    r = achieved(37.1, bytes_moved=geglu_bytes(M, HIDDEN, "bf16"), ceilings=CEIL)
    assert set(r) == set(ACHIEVED_KEYS)
    assert r["memory_floor_us"] == pytest.approx(36.5, abs=0.05)
    assert r["floor_us"] == r["memory_floor_us"]
    assert r["bound_by"] == "memory"
    assert r["achieved_tbps"] == pytest.approx(150_994_944 / 37.1e-6 / 1e12)
    assert r["pct_of_bandwidth"] == pytest.approx(98.3, abs=0.05)
    assert r["pct_of_floor"] == pytest.approx(36.472 / 37.1 * 100, rel=1e-3)
    assert r["achieved_tflops"] is None and r["compute_floor_us"] is None and r["arithmetic_intensity"] is None


def test_mlp_compute_floor() -> None:
    flops = geglu_mlp_flops(M, DIM, HIDDEN)
    r = achieved(232.0, flops=flops, ceilings=CEIL)
    assert r["compute_floor_us"] == pytest.approx(172.3, abs=0.1)  # 116 GFLOP at 673 TFLOP/s
    assert r["bound_by"] == "compute"
    assert r["achieved_tflops"] == pytest.approx(flops / 232e-6 / 1e12)
    assert r["pct_of_peak_flops"] == pytest.approx(r["achieved_tflops"] / 673 * 100)


def test_bound_by_picks_the_larger_floor() -> None:
    # a GEMM: 8192x3072x768 bf16 is far above the H200 ridge point (~163 FLOP/byte)
    b, f = gemm_bytes(M, HIDDEN, DIM, "bf16"), gemm_flops(M, HIDDEN, DIM)
    r = achieved(56.2, b, f, ceilings=CEIL)
    assert r["arithmetic_intensity"] == pytest.approx(f / b)
    assert r["arithmetic_intensity"] > CEIL.ridge_flop_per_byte
    assert r["bound_by"] == "compute"
    assert r["floor_us"] == pytest.approx(max(r["memory_floor_us"], r["compute_floor_us"]))
    # the same bytes with few FLOPs: memory bound
    assert achieved(56.2, b, 1e6, ceilings=CEIL)["bound_by"] == "memory"


def test_achieved_bad_inputs() -> None:
    with pytest.raises(ValueError, match="bytes_moved, flops"):
        achieved(10.0, ceilings=CEIL)
    with pytest.raises(ValueError):
        achieved(0.0, 100, ceilings=CEIL)
    with pytest.raises(ValueError):
        achieved(float("nan"), 100, ceilings=CEIL)
    with pytest.raises(ValueError):
        achieved(10.0, -5, ceilings=CEIL)
    with pytest.raises(TypeError):
        achieved("10", 100, ceilings=CEIL)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        achieved(10.0, 100, ceilings={"copy_bytes_per_s": 1})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        achieved(10.0, 100)  # type: ignore[call-arg]  # ceilings is required


# --- frame and figure -------------------------------------------------------------------------------


def _rows() -> list:
    gb = geglu_bytes(M, HIDDEN, "bf16")
    return [
        ("gate GEMM", 56.2, gemm_bytes(M, HIDDEN, DIM, "bf16"), gemm_flops(M, HIDDEN, DIM)),
        {"name": "inductor gelu*mul", "duration_us": 37.1, "bytes": gb, "flops": 10 * M * HIDDEN},
        ("eager gelu", 29.9, elementwise_bytes(M * HIDDEN, "bf16", 1, 1), None),
    ]


def test_roofline_frame() -> None:
    df = roofline_frame(_rows(), CEIL)
    assert list(df.columns) == ["name", *ACHIEVED_KEYS]
    assert list(df["name"]) == ["gate GEMM", "inductor gelu*mul", "eager gelu"]
    assert df.loc[1, "floor_us"] == pytest.approx(36.47, abs=0.01)
    assert df.loc[0, "bound_by"] == "compute" and df.loc[2, "bound_by"] == "memory"
    assert pd.isna(df.loc[2, "arithmetic_intensity"])


def test_roofline_frame_bad_rows() -> None:
    with pytest.raises(ValueError, match="row 0"):
        roofline_frame([("only", "three", 3)], CEIL)
    with pytest.raises(ValueError, match="row 1"):
        roofline_frame([("ok", 1.0, 10, None), ("bad", -1.0, 10, None)], CEIL)
    with pytest.raises(ValueError, match="name"):
        roofline_frame([("", 1.0, 10, None)], CEIL)


def test_roofline_figure_traces() -> None:
    df = roofline_frame(_rows(), CEIL)
    fig = roofline_figure(df, CEIL)
    assert isinstance(fig, go.Figure)
    names = [t.name for t in fig.data]
    assert names[0].startswith("memory roof") and names[1].startswith("compute roof")
    assert names[2:] == ["gate GEMM", "inductor gelu*mul"]  # one marker per variant that has both
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    # the roofs meet at the ridge point at the compute peak
    mem, comp = fig.data[0], fig.data[1]
    assert mem.x[-1] == pytest.approx(CEIL.ridge_flop_per_byte) == comp.x[0]
    assert mem.y[-1] == pytest.approx(673) and list(comp.y) == pytest.approx([673, 673])
    assert fig.data[2].y[0] == pytest.approx(df.loc[0, "achieved_tflops"])
    assert "gate GEMM" in fig.data[2].hovertemplate
    # the row without FLOPs is named, not silently dropped
    assert any("eager gelu" in a.text for a in fig.layout.annotations)
    assert "recorded reference" in fig.layout.title.text


def test_roofline_figure_bad_inputs() -> None:
    with pytest.raises(TypeError):
        roofline_figure([("x", 1.0, 1, 1)], CEIL)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="columns"):
        roofline_figure(pd.DataFrame({"name": ["x"]}), CEIL)


# --- live CPU measurement -----------------------------------------------------------------------


def test_cpu_ceilings_measured_and_cached() -> None:
    start = time.perf_counter()
    c = measure_ceilings("cpu", refresh=True)
    elapsed = time.perf_counter() - start
    # The sizes are what keep it fast (~0.6-0.9 s on an idle 2-core machine); the wall-clock bound
    # is loose because a shared CI runner can be several times slower, yet it still catches a
    # GPU-sized problem (an 8192^3 float32 matmul alone takes minutes on two cores).
    assert c.copy_bytes == 2 * 128 * 2**20 and c.matmul_shape == (1024, 1024, 1024)
    assert elapsed < 10.0, f"CPU measurement took {elapsed:.2f} s"
    assert isinstance(c, Ceilings)
    assert c.source == "measured" and c.device_type == "cpu"
    assert c.method.startswith("median of 10 timed runs after 2 warm-ups")  # issue 11: not 3 samples of noise
    assert c.torch_version == torch.__version__
    # plausible for anything from a small CI runner to a server: 0.1 GB/s .. 10 TB/s, 0.1 GFLOP/s ..
    # 100 TFLOP/s
    assert 1e8 < c.copy_bytes_per_s < 1e13
    assert 1e8 < c.matmul_flop_per_s < 1e14
    assert c.matmul_dtype == "float32"
    assert c.read_bytes_per_s is not None and 1e8 < c.read_bytes_per_s < 1e13
    assert c.write_bytes_per_s is not None and 1e8 < c.write_bytes_per_s < 1e13
    assert c.bandwidth_bytes_per_s == max(c.copy_bytes_per_s, c.read_bytes_per_s, c.write_bytes_per_s)
    assert math.isclose(c.ridge_flop_per_byte, c.matmul_flop_per_s / c.bandwidth_bytes_per_s)
    # cached per device, whatever spelling names it
    assert measure_ceilings("cpu") is c
    assert measure_ceilings(torch.device("cpu")) is c
    if not torch.cuda.is_available():
        assert measure_ceilings() is c
    again = measure_ceilings("cpu", refresh=True)
    assert again is not c and measure_ceilings("cpu") is again


@pytest.mark.parametrize("bad", ["not-a-device", "meta", "cuda:99" if torch.cuda.is_available() else "cuda"])
def test_measure_ceilings_bad_device(bad: str) -> None:
    with pytest.raises(ValueError):
        measure_ceilings(bad)


def test_measure_ceilings_wrong_type() -> None:
    with pytest.raises(TypeError):
        measure_ceilings(3.5)  # type: ignore[arg-type]
