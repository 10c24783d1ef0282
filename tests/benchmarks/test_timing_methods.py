"""python -m benchmarks timing-methods: its CPU smoke run writes a results file whose stored table the reader returns."""

from __future__ import annotations

import json

from benchmarks.timing_methods import main, tables
from helpers.lessons.results import load_results


def test_the_cpu_smoke_run_stores_its_methods_table(tmp_path):
    out = tmp_path / "cpu_timing.json"
    assert main(["--device", "cpu", "--quick", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    stored = load_results(out).table("methods")
    assert list(stored["variant"]) == ["eager"]
    row = stored.iloc[0]
    assert row["sync_us_min"] <= row["sync_us"] <= row["sync_us_max"]
    assert row["enqueue_us"] > 0 and row["kernel_us"] is None  # no device kernels on a CPU
    assert tables(data)["methods"][0].columns.tolist() == data["tables"]["methods"]["columns"]


def test_refuses_to_file_cpu_numbers_as_h200(tmp_path, capsys):
    import pytest

    with pytest.raises(SystemExit):
        main(["--device", "cpu", "--quick", "--out", str(tmp_path / "h200_timing_methods.json")])
    assert "named for an H200" in capsys.readouterr().err
