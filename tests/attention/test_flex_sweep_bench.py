"""FlexAttention masks, the sequence sweep, and the attention benchmark's CPU path and results reader."""

from __future__ import annotations

import json

import pytest
import torch
from attention import main as bench_main

import helpers
from helpers.attention import flex, results
from helpers.attention import workloads as aw
from helpers.attention.costs import AttentionShape


@pytest.mark.slow
def test_flex_sliding_window_matches_a_masked_reference() -> None:
    # One compile (~5 s on two cores): the sliding-window mask_mod exercises the BlockMask path.
    shape = AttentionShape(batch=1, heads=2, seq=256, head_dim=16)
    q, k, v = aw.attention_inputs("cpu", shape=shape)
    out = flex.flex_fn("sliding_window", window=48)(q, k, v)
    i, j = torch.arange(256)[:, None], torch.arange(256)[None, :]
    scores = (q.double() @ k.double().transpose(-2, -1)) / 4.0
    scores = scores.masked_fill(~((j <= i) & (j > i - 48)), float("-inf"))
    assert helpers.relative_error(out, scores.softmax(-1) @ v.double()) < 1e-5
    block = flex.block_mask("sliding_window", 256, 256, "cpu", window=48)
    assert block.sparsity() > 0  # some 128 x 128 tiles are skipped entirely


def test_flex_rejects_unknown_masks() -> None:
    with pytest.raises(ValueError, match="mask must be one of"):
        flex.flex_fn("banded")
    with pytest.raises(TypeError, match="window"):
        flex.flex_fn("sliding_window")


def test_score_sweep_measures_what_it_predicts() -> None:
    sweep = helpers.score_sweep([64, 128], device="cpu", heads=2, head_dim=16, repeats=1)
    assert list(sweep["seq"]) == [64, 128]
    assert (sweep["measured_score_mb"] == sweep["predicted_score_mb"]).all()
    assert sweep["measured_score_mb"].iloc[1] == pytest.approx(4 * sweep["measured_score_mb"].iloc[0])
    assert (sweep["manual_peak_mb"] >= sweep["measured_score_mb"]).all()
    with pytest.raises(ValueError, match="over the"):
        helpers.score_sweep([1 << 16], device="cpu", heads=64)
    with pytest.raises(ValueError, match="at least one"):
        helpers.score_sweep([], device="cpu")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("bench") / "attention_cpu.json"
    assert bench_main(["--device", "cpu", "--quick", "--out", str(out)]) == 0
    return json.loads(out.read_text())


def test_quick_benchmark_records_every_variant(quick_run) -> None:
    assert quick_run["schema"] == "course-attention-bench/1" and quick_run["complete"]
    assert quick_run["provenance"]["device_type"] == "cpu"
    rows = {(r["variant"], r["seq"]): r for r in quick_run["rows"]}
    for seq in quick_run["config"]["seqs"]:
        for name in ("sdpa-flash", "sdpa-math", "course", "manual-eager"):
            row = rows[(name, seq)]
            assert row["status"] == "ok" and row["rel_err"] < 1e-4, row
        for name in ("sdpa-efficient", "sdpa-cudnn"):  # CUDA only: recorded as failed, with PyTorch's reason
            assert rows[(name, seq)]["status"] == "failed" and rows[(name, seq)]["reason"]
    assert all(t["course_rel_err"] < 1e-4 for t in quick_run["targets"])


def test_results_reader_on_a_run(quick_run) -> None:
    r = results.AttentionResults(quick_run, source="test")
    assert not r.on_gpu and "CPU" in r.label
    table = r.table()
    assert set(table["status"]) == {"ok", "failed"}
    seq = quick_run["config"]["seqs"][-1]
    d = quick_run["config"]["head_dims"][0]
    assert r.fastest(d, seq) in set(table.query("status == 'ok'")["variant"])
    frame = r.roofline_frame(d, seq)
    assert (frame["flops"] > 0).all() and frame["arithmetic_intensity"].nunique() == 1  # same work, other times
    assert r.pivot("time_us").shape[0] == len(quick_run["config"]["seqs"])
    assert not r.targets().empty
    with pytest.raises(ValueError, match="no measured row"):
        r.roofline_frame(d, 999)
    with pytest.raises(ValueError, match="schema"):
        results.AttentionResults({"schema": "other"})


def test_missing_results_file_says_how_to_make_it(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="benchmarks/attention.py"):
        helpers.load_attention_results(tmp_path / "none.json")


def test_benchmark_refuses_to_file_cpu_numbers_as_h200s(tmp_path) -> None:
    assert bench_main(["--device", "cpu", "--quick", "--out", str(tmp_path / "h200_attention.json")]) == 2


def test_recording_script_records_attention_views_and_skips_missing_backends(tmp_path, capsys) -> None:
    from record_reference_traces import main as record_main

    assert (
        record_main(["--device", "cpu", "--out", str(tmp_path), "--only", "attention_manual", "attention_sdpa_cudnn"])
        == 0
    )
    assert "failed: " in capsys.readouterr().out  # no cuDNN on a CPU: reported, the run goes on
    trace = helpers.load_trace(tmp_path / "cpu_attention_manual.json.gz")
    assert helpers.op_input(trace, "aten::_softmax").shape[-1] == aw.CPU_SHAPE.seq
    provenance = json.loads((tmp_path / "cpu_provenance.json").read_text())
    assert set(provenance) == {"cpu_attention_manual.json.gz"}
