"""python -m benchmarks ddp: the CPU smoke run, runs launched already (--runs), the time budget, failures, --repredict."""

from __future__ import annotations

import json

import pytest

from benchmarks import ddp
from benchmarks.ddp import run as runner
from helpers.lessons.results import load_results
from helpers.paths import REPO_ROOT as ROOT


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp_benchmark")
    args = ["--device", "cpu", "--quick", "--configurations", "ddp_bucket25,ddp_straggler", "--out", str(out)]
    assert ddp.main(args) == 0
    return out


def test_the_cpu_smoke_run_writes_results_traces_and_the_lessons_tables(smoke):
    path = smoke / "benchmarks" / "results" / "cpu_ddp.json"
    result = json.loads(path.read_text())
    assert result["complete"] and result["provenance"]["ranks"] == 2 and result["provenance"]["torch"]
    entry = result["runs"]["ddp_bucket25"]
    assert entry["status"] == "ok", entry
    assert entry["summary"]["backend"] == "gloo" and "analysis" in entry
    folder = smoke / entry["folder"]
    assert sorted(p.name for p in folder.glob("rank*.json.gz")) == ["rank0.json.gz", "rank1.json.gz"]
    stored = load_results(path)
    assert set(stored.tables) == {"runs", "communication", "overlap", "predictions", "targets"}
    assert list(stored.table("runs")["configuration"]) == ["ddp_bucket25", "ddp_straggler"]
    assert stored.value("communication", "collectives_per_step", configuration="ddp_bucket25") > 2
    assert stored.table("overlap").empty  # gloo: no device timeline
    straggler = stored.value("predictions", "status", to="ddp_bucket25")
    assert straggler == "predicted" and stored.value("runs", "straggler_rank", configuration="ddp_straggler") in (0, 1)


def test_runs_launched_already_are_read_as_the_benchmark_reads_its_own(smoke, tmp_path, capsys):
    runs = tmp_path / "runs"
    runs.mkdir()
    for name in ("ddp_bucket25", "ddp_straggler"):  # the layout notebook 09 writes: one folder per configuration
        (runs / name).symlink_to(smoke / "traces" / f"cpu2_{name}")
    assert ddp.main(["--runs", str(runs)]) == 0
    live = load_results(runs / "ddp.json")
    recorded = load_results(smoke / "benchmarks" / "results" / "cpu_ddp.json")
    assert "measured live" in live.label and live.tables == recorded.tables
    for table in ("communication", "predictions"):
        assert (
            live.table(table)
            .drop(columns=["reason"], errors="ignore")
            .equals(recorded.table(table).drop(columns=["reason"], errors="ignore"))
        ), table
    assert ddp.main(["--runs", str(tmp_path)]) == 2 and "no finished run" in capsys.readouterr().err


def test_the_budget_and_failures_are_recorded_never_raised(tmp_path, monkeypatch):
    calls = []

    def fails(name, **kwargs):
        calls.append(name)
        raise RuntimeError("NCCL error: unhandled system error")

    monkeypatch.setattr(runner, "launch_run", fails)
    stages = []
    result = runner.run(
        "cpu",
        tmp_path,
        quick=True,
        names=["ddp_bucket25", "fsdp_prefetch"],
        log=lambda m: None,
        on_stage=lambda r: stages.append(dict(r["runs"])),
    )
    assert [r["status"] for r in result["runs"].values()] == ["failed", "failed"]
    assert "NCCL error" in result["runs"]["ddp_bucket25"]["reason"] and len(stages) == 2
    assert result["complete"] and result["predictions"] == []
    skipped = runner.run("cpu", tmp_path, quick=True, budget_s=10, log=lambda m: None)
    assert {r["status"] for r in skipped["runs"].values()} == {"skipped"} and len(calls) == 2
    with pytest.raises(ValueError, match="unknown configuration"):
        runner.run("cpu", tmp_path, names=["ddp_bucket7"])
    assert any("failed" in line for line in runner.summary_lines(result))
    tables = ddp.tables(result)  # the stored tables of a run where nothing ran
    assert list(tables["runs"][0]["status"]) == ["failed", "failed"] and tables["predictions"][0].empty


def test_repredict_makes_the_predictions_again_from_the_committed_traces(tmp_path, capsys):
    """`--repredict` on a copy of the recorded 2-GPU results: same predictions from the same traces, the old
    ones kept with the note; refused without a note or on a file that is not these results."""
    source = json.loads((ROOT / "benchmarks" / "results" / "h200x2_ddp.json").read_text())
    copy = tmp_path / "h200x2_ddp.json"
    copy.write_text(json.dumps(source))
    assert ddp.main(["--repredict", str(copy)]) == 2 and "--note" in capsys.readouterr().err
    assert ddp.main(["--repredict", str(copy), "--note", "a test"]) == 0
    again = json.loads(copy.read_text())
    for new, old in zip(again["predictions"], source["predictions"], strict=True):
        assert new["prediction"] == old["prediction"] and new["met"] == old["met"]
        assert new["predicted_change_ms"] == pytest.approx(old["predicted_change_ms"], rel=1e-9)
    assert again["predictions_before"] == {
        "note": "a test",
        "predictions": source["predictions"],
        "before": source["predictions_before"],
    }
    assert "NOT met" in capsys.readouterr().out  # the targets are printed by the benchmark
    with pytest.raises(ValueError, match="ddp benchmark's JSON"):
        runner.repredict({"shapes": {}}, ROOT, "x")
