"""The decoder benchmark (python -m benchmarks decoder): the CPU smoke run end to end, its budget, a resumed run."""

from __future__ import annotations

import json

import pytest

import helpers
from benchmarks.__main__ import main as benchmarks_main
from benchmarks.decoder import main
from benchmarks.decoder.configurations import ORDER, QUICK, RUNS
from benchmarks.decoder.run import run
from helpers.decoder.config import DecoderConfig
from helpers.triton_env import triton_mode


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("decoder") / "decoder_cpu.json"
    assert benchmarks_main(["decoder", "--device", "cpu", "--quick", "--out", str(out)]) == 0
    return out


def test_every_configuration_the_benchmark_runs_exists():
    assert set(ORDER) == set(RUNS) and set(QUICK) <= set(RUNS)


def test_smoke_run_measures_what_it_says_and_stores_its_tables(smoke):
    data = json.loads(smoke.read_text())
    assert data["complete"] and data["provenance"]["device"].startswith("CPU")
    rows = {(r["configuration"], r["use"]): r for r in data["rows"]}
    assert set(rows) == {(n, u) for n, uses in QUICK.items() for u in (uses or RUNS[n].uses)}
    # on a CPU the course's kernels run in Triton's interpreter; where Triton compiles for a GPU they cannot
    # take the CPU's tensors, and the row says so
    course_here = triton_mode() == "cpu"
    bad = [r for r in rows.values() if r["status"] != "ok" and (course_here or "course" not in r["configuration"])]
    assert not bad, bad
    assert data["weight_bytes"] == DecoderConfig(**data["config"]).weight_bytes(4)  # float32 on a CPU
    results = helpers.load_results(smoke)
    assert set(results.tables) == {"setup", "configurations", "graph_prediction", "exercise", "failures", "targets"}
    table = results.table("configurations").set_index("configuration")
    assert table.index[0] == "eager"
    assert table.loc["recompute", "train_step_ms"] == rows[("recompute", "train")]["step_ms"]
    floor = results.value("setup", "decode_floor_us")  # a CPU run is judged against its own ceilings
    assert table.loc["eager", "pct_of_floor"] == pytest.approx(100 * floor / rows[("eager", "decode")]["step_us"])
    targets = results.table("targets")
    assert len(targets) == 6 and targets.loc[1, "met"] is None  # no graph on a CPU
    assert results.table("graph_prediction").empty and results.table("exercise").empty  # --quick


def test_cli_refuses_h200_file_names_on_a_cpu(tmp_path, capsys):
    assert main(["--device", "cpu", "--quick", "--out", str(tmp_path / "h200_decoder.json")]) == 2
    assert "H200 results only" in capsys.readouterr().err


def test_unknown_configurations_are_refused():
    with pytest.raises(ValueError, match="unknown configurations"):
        run("cpu", configurations=["warp-speed"], log=lambda _m: None)


def test_a_spent_budget_skips_with_the_reason():
    result = run("cpu", quick=True, budget_s=0.0, log=lambda _m: None)
    assert result["rows"] and all(r["status"] == "skipped" for r in result["rows"])
    assert {r["reason"] for r in result["rows"]} == {"time budget used up"}


def test_a_resumed_run_keeps_what_was_measured(smoke):
    before = json.loads(smoke.read_text())
    again = run("cpu", quick=True, log=lambda _m: None, previous=before)
    assert again["resumed_from"]["rows_kept"] == sum(r["status"] == "ok" for r in before["rows"])
    assert again["rows"] == before["rows"]
    with pytest.raises(ValueError, match="fresh file"):
        run("cpu", quick=True, log=lambda _m: None, previous={**before, "dtype": "bfloat16"})
