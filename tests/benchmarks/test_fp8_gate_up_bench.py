"""benchmarks/fp8_gate_up.py runs end to end on a tiny shape in Triton's interpreter (timings stubbed)."""

from __future__ import annotations

import pytest
from support import kernel_device


def test_fp8_benchmark_row_has_the_fused_way_and_its_sweep(monkeypatch):
    if kernel_device() == "cuda":
        pytest.skip("on a GPU run the benchmark itself: python -m benchmarks fp8-gate-up")
    import torch
    import triton.testing

    if torch.__version__ < (2, 13):
        pytest.skip(f"torch {torch.__version__}'s CPU _scaled_mm takes per-tensor scales only")
    from benchmarks.fp8_gate_up import TARGET, measure_shape
    from helpers.kernels.fp8_gate_up_fused import FP8_SWEEP

    monkeypatch.setattr(triton.testing, "do_bench", lambda fn, **kw: (fn(), 0.5)[1])  # 0.5 ms per call
    row = measure_shape(40, 64, 48, device="cpu")
    assert row["fp8_fused_us"] == 500.0 and row["fp8_fused_error"] < 0.08
    assert len(row["fp8_fused_sweep"]) == len(FP8_SWEEP) + 1 and row["fp8_fused_sweep"][0]["config"].startswith(
        "default"
    )
    assert all("us" in e and e.get("error", 0.0) < 0.08 for e in row["fp8_fused_sweep"])
    assert row["meets_target"] == (row["fp8_fused_over_bf16_fused"] >= TARGET)
    assert "fp8_quantize_tflops" not in row and row["fp8_quantize_us"] == 500.0


def test_the_recorded_fp8_rates_are_the_stored_table():
    """What lesson 06 shows is what the H100 run stored, derived from its rows by today's code."""
    import json

    import helpers
    from benchmarks.common import RESULTS_DIR, store_tables
    from benchmarks.fp8_gate_up import tables

    data = json.loads((RESULTS_DIR / "h100_fp8_gate_up.json").read_text())
    assert data["tables"] == json.loads(json.dumps(store_tables(data, tables(data))["tables"]))
    rates = helpers.load_results("h100_fp8_gate_up").table("rates")
    big = rates.set_index("shape").loc["M=4096 4096->14336"]
    assert big["fp8_over_bf16"] == data["rows"][1]["fp8_fused_over_bf16_fused"] and big["fp8_rel_error"] < 0.08
