"""The decoder benchmark: the CPU smoke run end to end, its targets logic, its results tables."""

from __future__ import annotations

import json

import pytest
from support import load_benchmark

import helpers
from helpers.decoder import bench
from helpers.decoder.results import DecoderResults


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    cli = load_benchmark("decoder")
    out = tmp_path_factory.mktemp("decoder") / "decoder_cpu.json"
    assert cli.main(["--device", "cpu", "--quick", "--out", str(out)]) == 0
    return json.loads(out.read_text())


def test_smoke_run_measures_what_it_says(smoke):
    assert smoke["complete"] and smoke["provenance"]["device"].startswith("CPU")
    rows = {(r["configuration"], r["use"]): r for r in smoke["rows"]}
    assert set(rows) == {
        (n, u) for n, uses in bench.QUICK.items() for u in (uses or helpers.DECODER_CONFIGURATIONS[n].uses)
    }
    assert all(r["status"] == "ok" for r in rows.values()), [r for r in rows.values() if r["status"] != "ok"]
    eager = rows[("eager", "decode")]
    assert eager["pct_of_floor"] == pytest.approx(100 * smoke["decode_floor_us"] / eager["step_us"])
    cfg = helpers.DecoderConfig(**smoke["config"])
    assert smoke["weight_bytes"] == cfg.weight_bytes(4)  # float32 on a CPU
    table = DecoderResults(smoke).table()
    assert table["configuration"].iloc[0] == "eager"
    assert table.set_index("configuration").loc["recompute", "train_step_ms"] == rows[("recompute", "train")]["step_ms"]
    assert len(smoke["targets"]) == 6 and smoke["targets"][1]["met"] is None  # no graph on a CPU


def test_cli_refuses_h200_file_names_on_a_cpu(tmp_path, capsys):
    cli = load_benchmark("decoder")
    assert cli.main(["--device", "cpu", "--quick", "--out", str(tmp_path / "h200_decoder.json")]) == 2
    assert "H200 results only" in capsys.readouterr().err


def _row(conf, use, **numbers):
    return {"configuration": conf, "use": use, "status": "ok", **numbers}


def test_targets_against_known_numbers():
    result = {
        "sizes": {"decode_batch": 1},
        "decode_floor_us": 500.0,
        "graph_prediction": {"status": "ok", "predicted_us": 1300.0},
        "rows": [
            _row("eager", "decode", step_us=4600.0, pct_of_floor=500 / 46),
            _row("eager+graph", "decode", step_us=1200.0, pct_of_floor=500 / 12),
            _row("compile+graph", "decode", step_us=800.0, pct_of_floor=62.5),
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
    t = {r["target"].split(":")[0].split(" >=")[0]: r for r in bench.targets(result)}
    decode = next(r for r in bench.targets(result) if r["target"].startswith("decode"))
    assert decode["met"] and decode["value"] == 62.5 and "compile+graph" in decode["detail"]
    graph = next(r for r in bench.targets(result) if "CUDA-graph" in r["target"])
    assert graph["met"] and graph["value"] == pytest.approx(1300 / 1200 - 1, abs=1e-3)
    assert t["prefill"]["met"] and t["prefill"]["value"] == pytest.approx(125 / 120, abs=1e-3)
    assert t["train"]["met"] is False  # faster than eager but slower than compile alone
    memory = [r for r in bench.targets(result) if r["target"].startswith("peak")]
    assert memory[0]["met"] and memory[0]["value"] == pytest.approx(0.65)
    assert memory[1]["met"] is None  # the failed run is not a result


def test_results_reading_and_bad_input(smoke, tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(smoke))
    results = helpers.load_decoder_results(path)
    assert "CPU" in results.label and not results.on_gpu
    assert results.failures().empty and results.graph_prediction() is None and results.exercise() is None
    assert results.value("eager", "train", "step_ms") > 0 and results.value("eager", "train", "nope") is None
    with pytest.raises(FileNotFoundError, match="benchmarks/decoder.py"):
        helpers.load_decoder_results(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="decoder benchmark"):
        DecoderResults({"benchmark": "mlp"})
    with pytest.raises(ValueError, match="unknown configurations"):
        bench.run("cpu", configurations=["warp-speed"], log=lambda _m: None)


def test_decoder_recipes_record_on_a_cpu_and_skip_graphs(tmp_path, capsys):
    from record_reference_traces import RECIPES, main

    ours = [r for r in RECIPES if r.name.startswith("decoder_")]
    assert {r.name for r in ours} == set(helpers.decoder_workloads.GPU_VIEWS)
    assert main(["--device", "cpu", "--only", "decoder_decode", "decoder_decode_graph", "--out", str(tmp_path)]) == 0
    assert "skipped: recorded on a GPU only" in capsys.readouterr().out
    trace = helpers.load_trace(tmp_path / "cpu_decoder_decode.json.gz")
    assert len(trace.steps) == 3 and trace.info.extra["shapes"]["configuration"] == "eager"
    assert not (tmp_path / "cpu_decoder_decode_graph.json.gz").exists()


def test_a_spent_budget_skips_with_the_reason():
    result = bench.run("cpu", quick=True, budget_s=0.0, log=lambda _m: None)
    assert result["rows"] and all(r["status"] == "skipped" for r in result["rows"])
    assert {r["reason"] for r in result["rows"]} == {"time budget used up"}
    assert all(t["met"] is None for t in result["targets"])
