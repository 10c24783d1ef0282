"""The stored tables of h200_decoder.json: what notebook 08 shows is what the file stores, judged
against the course's one ceiling set; the benchmark's targets are computed here, never in the lesson."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

import helpers
import helpers.lessons.results
from benchmarks.common import RESULTS_DIR, store_tables
from benchmarks.decoder.tables import judged_ceilings, tables, targets
from helpers.decoder.generate import weight_read_floor_us
from helpers.paths import NOTEBOOKS_DIR

PATH = RESULTS_DIR / "h200_decoder.json"
NOTEBOOK = NOTEBOOKS_DIR / "08_whole_model.ipynb"


def _notebook_code() -> str:
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


def test_the_stored_tables_are_the_ones_the_raw_measurements_give():
    data = json.loads(PATH.read_text())
    assert data["tables"] == store_tables(data, tables(data))["tables"]  # `python -m benchmarks rejudge decoder`


def test_the_tables_notebook_08_shows_are_the_files_rows():
    stored = json.loads(PATH.read_text())["tables"]
    results = helpers.load_results("h200_decoder")
    code = _notebook_code()
    shown = set(re.findall(r"\.table\(\"(\w+)\"\)", code)) | set(re.findall(r"\.value\(\"(\w+)\"", code))
    # the decoder's tables, and the decode split of the decode-floor benchmark
    assert shown == {"setup", "configurations", "exercise", "failures", "causes"}
    floor = helpers.load_results("h200_decode_floor")
    floor_stored = json.loads(PATH.with_name("h200_decode_floor.json").read_text())["tables"]
    for name in shown:
        res, saved = (floor, floor_stored) if name == "causes" else (results, stored)
        frame = res.table(name)
        assert frame.columns.tolist() == saved[name]["columns"]
        rows = [[None if pd.isna(v) else v for v in row] for row in frame.itertuples(index=False, name=None)]
        assert rows == saved[name]["rows"], name
    assert "targets" not in code and not re.search(r"\bmet\b", code)  # the benchmark's targets stay out of the lesson


def test_an_h200_recording_is_judged_against_the_reference_ceilings():
    data = json.loads(PATH.read_text())
    reference = helpers.lessons.results.reference_ceilings()
    assert judged_ceilings(data) is reference
    results = helpers.load_results("h200_decoder")
    floor = results.value("setup", "decode_floor_us")
    assert floor == pytest.approx(weight_read_floor_us(int(data["weight_bytes"]), reference))
    eager = results.value("configurations", "decode_us", configuration="eager")
    assert results.value("configurations", "pct_of_floor", configuration="eager") == pytest.approx(100 * floor / eager)
    # the session's own ceilings stay in the file, close to the reference
    assert data["ceilings"]["copy_bytes_per_s"] == pytest.approx(reference.copy_bytes_per_s, rel=0.05)
    assert results.value("exercise", "speedup") == pytest.approx(data["exercise"]["speedup"])
    assert results.value("graph_prediction", "predicted_us") == data["graph_prediction"]["predicted_us"]


def _row(conf, use, **numbers):
    return {"configuration": conf, "use": use, "status": "ok", **numbers}


def test_targets_against_known_numbers():
    data = {
        "sizes": {"decode_batch": 1},
        "graph_prediction": {"status": "ok", "predicted_us": 1300.0},
        "rows": [
            _row("eager", "decode", step_us=4600.0),
            _row("eager+graph", "decode", step_us=1200.0),
            _row("compile+graph", "decode", step_us=800.0),
            _row("eager", "prefill", tokens_per_s=100.0),
            _row("compile", "prefill", tokens_per_s=120.0),
            _row("course", "prefill", tokens_per_s=110.0),
            _row("course+compile", "prefill", tokens_per_s=125.0),
            _row("eager", "train", step_ms=300.0, peak_gb=40.0),
            _row("compile", "train", step_ms=250.0),
            _row("course+compile", "train", step_ms=260.0),
            _row("recompute", "train", step_ms=330.0, peak_gb=26.0),
            {"configuration": "course+recompute", "use": "train", "status": "failed", "reason": "x"},
        ],
    }
    from benchmarks.decoder.tables import configurations_table

    t = targets(data, configurations_table(data, floor_us=500.0), floor_us=500.0)
    decode, graph, prefill, train, memory, failed = t.to_dict("records")
    assert decode["met"] and decode["value"] == 62.5 and "compile+graph" in decode["detail"]
    assert graph["met"] and graph["value"] == pytest.approx(1300 / 1200 - 1, abs=1e-3)
    assert prefill["met"] and prefill["value"] == pytest.approx(125 / 120, abs=1e-3)
    assert train["met"] is False  # faster than eager but slower than compile alone
    assert memory["met"] and memory["value"] == pytest.approx(0.65)
    assert failed["met"] is None  # the failed run is not a result
