"""python -m benchmarks decode-attention: the CPU smoke run (Triton's interpreter) writes its rows, table and
provenance; on a GPU the caches are the 1b decoder's."""

from __future__ import annotations

import json

from support import run_benchmark_interpreted


def test_smoke_run_writes_rows_with_provenance(tmp_path):
    out = tmp_path / "decode_attention_cpu.json"
    run_benchmark_interpreted("decode-attention", "--device", "cpu", "--quick", "--out", str(out))
    data = json.loads(out.read_text())
    assert data["benchmark"] == "decode-attention" and data["provenance"]["device"].startswith("CPU")
    assert [(r["max_len"], r["fill"]) for r in data["rows"]] == [(40, 8), (40, 40)]
    for row in data["rows"]:
        assert row["course_rel_error"] < 2e-2 and row["sdpa_masked_rel_error"] < 2e-2  # bf16
        assert all(row[f"{way}_us"] > 0 for way in ("sdpa_masked", "course", "sdpa_sliced"))
        assert row["splits"] >= 1 and "sweep" not in row  # the sweep needs a GPU
    assert len(data["tables"]["decode_attention"]["rows"]) == 2


def test_the_gpu_run_measures_the_1b_caches():
    from benchmarks import decode_attention as bench

    assert bench.MAX_LENS == (4096, 300) and bench.FILLS == (256, 1024, 4096)
