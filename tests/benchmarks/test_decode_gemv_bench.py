"""python -m benchmarks decode-gemv: the CPU smoke run (Triton's interpreter) writes its rows, table and provenance."""

from __future__ import annotations

import json

from support import run_benchmark_interpreted

from benchmarks.decode_gemv import shapes


def test_smoke_run_writes_rows_with_provenance(tmp_path):
    out = tmp_path / "decode_gemv_cpu.json"
    run_benchmark_interpreted("decode-gemv", "--device", "cpu", "--quick", "--out", str(out))
    data = json.loads(out.read_text())
    assert data["benchmark"] == "decode-gemv" and data["provenance"]["device"].startswith("CPU")
    assert [r["name"] for r in data["rows"]] == ["qkv", "down"]
    for row in data["rows"]:
        assert row["gemv_fused_rel_error"] < 2e-2  # bf16 through the interpreter
        assert all(row[f"{way}_us"] > 0 for way in ("cublas", "torch_unfused", "gemv", "gemv_fused"))
    assert data["tables"]["gemv"]["rows"]


def test_the_shapes_are_the_1b_decoder_s():
    by_name = {s["name"]: (s["N"], s["K"], s["prologue"], s["residual"]) for s in shapes("1b")}
    assert by_name == {
        "qkv": (6144, 2048, "rmsnorm", False),
        "o": (2048, 2048, "none", True),
        "gate_up": (16384, 2048, "rmsnorm", False),
        "down": (2048, 8192, "geglu", True),
        "lm_head": (32000, 2048, "none", False),
    }
