"""benchmarks/ddp.py: the CPU smoke run of one configuration, the time budget, and a failing configuration."""

from __future__ import annotations

import json

import pytest
from support import load_benchmark

from helpers.distributed import bench
from helpers.paths import REPO_ROOT as ROOT


def test_one_configuration_on_cpu_writes_results_and_traces(tmp_path, capsys):
    cli = load_benchmark("ddp")
    assert cli.main(["--device", "cpu", "--quick", "--configurations", "ddp_bucket25", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "benchmarks" / "results" / "cpu_ddp.json").read_text())
    assert result["complete"] and result["provenance"]["ranks"] == 2 and result["provenance"]["torch"]
    entry = result["runs"]["ddp_bucket25"]
    assert entry["status"] == "ok", entry
    assert entry["summary"]["backend"] == "gloo" and "analysis" in entry
    folder = tmp_path / entry["folder"]
    assert sorted(p.name for p in folder.glob("rank*.json.gz")) == ["rank0.json.gz", "rank1.json.gz"]
    assert "ddp_bucket25" in capsys.readouterr().out


def test_the_budget_and_failures_are_recorded_never_raised(tmp_path, monkeypatch):
    calls = []

    def fails(name, **kwargs):
        calls.append(name)
        raise RuntimeError("NCCL error: unhandled system error")

    monkeypatch.setattr(bench, "launch_run", fails)
    stages = []
    result = bench.run(
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
    skipped = bench.run("cpu", tmp_path, quick=True, budget_s=10, log=lambda m: None)
    assert {r["status"] for r in skipped["runs"].values()} == {"skipped"} and len(calls) == 2
    with pytest.raises(ValueError, match="unknown configuration"):
        bench.run("cpu", tmp_path, names=["ddp_bucket7"])
    lines = bench.summary_lines(result)
    assert any("failed" in line for line in lines)


def test_repredict_makes_the_predictions_again_from_the_committed_traces(tmp_path, capsys):
    """`--repredict` on a copy of the recorded 2-GPU results: same predictions from the same traces, the old
    ones kept with the note; refused without a note or on a file that is not these results."""
    source = json.loads((ROOT / "benchmarks" / "results" / "h200x2_ddp.json").read_text())
    copy = tmp_path / "h200x2_ddp.json"
    copy.write_text(json.dumps(source))
    cli = load_benchmark("ddp")
    assert cli.main(["--repredict", str(copy)]) == 2 and "--note" in capsys.readouterr().err
    assert cli.main(["--repredict", str(copy), "--note", "a test"]) == 0
    again = json.loads(copy.read_text())
    for new, old in zip(again["predictions"], source["predictions"], strict=True):
        assert new["prediction"] == old["prediction"] and new["met"] == old["met"]
        assert new["predicted_change_ms"] == pytest.approx(old["predicted_change_ms"], rel=1e-9)
    assert again["predictions_before"] == {"note": "a test", "predictions": source["predictions"]}
    with pytest.raises(ValueError, match="ddp benchmark's JSON"):
        bench.repredict({"shapes": {}}, ROOT, "x")
