"""The MLP benchmark (``python -m benchmarks mlp``): its measurements, the tables it stores, its command line.

On a CPU-only machine the Triton kernels run in the interpreter on tiny shapes. One test runs the
command line's ``--quick`` mode end to end (it compiles the MLP once: ~15-25 s on 2 cores).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import torch
from support import H200_REFERENCE, data_file

import helpers
from benchmarks.common import variants_table
from benchmarks.mlp import main as mlp_main
from benchmarks.mlp import measure as bench_measure
from benchmarks.mlp import results
from benchmarks.mlp import run as mlp_bench
from benchmarks.mlp.shapes import SHAPES
from benchmarks.mlp.tables import tables
from benchmarks.mlp.targets import check_targets
from helpers.lessons import kernel_exercises as ke
from helpers.mlp import variants
from helpers.mlp.model import BLOG_SHAPE, MLPShape
from helpers.mlp.plans import geglu_mlp_flops


def _load(path: Path) -> results.BenchResults:
    return results.BenchResults(json.loads(Path(path).read_text()), source="file", path=str(path))


# ------------------------------------------------------------------------------------- measuring


@pytest.fixture(scope="module")
def quick_result() -> dict:
    """Three uncompiled variants, two training variants and a two-size sweep at a tiny shape (seconds).

    On the device where the Triton kernels run here: the CPU (interpreter, float32) or the GPU (bf16).
    """
    return mlp_bench.run(
        ke.kernel_device(),
        shapes=["tiny"],
        shape=MLPShape(batch=1, seq=16, dim=32, hidden=64),
        variants=["eager", "course-geglu", "course-fused"],
        training=["eager", "course-fused-save", "course-fused-recompute"],
        sweep_m=[16, 32],
        sweep_seq=16,
        steps=2,
        warmup=1,
        e2e_iters=2,
        train_steps=2,
        sweep_steps=2,
        command="pytest",
    )


def test_run_measures_every_variant(quick_result: dict) -> None:
    r = quick_result
    on_gpu = ke.kernel_device().type == "cuda"
    assert r["schema"] == mlp_bench.SCHEMA and r["complete"]
    assert r["provenance"]["device_type"] == ke.kernel_device().type and r["provenance"]["command"] == "pytest"
    shape = r["shapes"]["tiny"]
    for name in ("eager", "course-geglu", "course-fused"):
        v = shape["variants"][name]
        assert v["status"] == "ok", v.get("reason")
        assert v["rel_err"] < (1e-2 if on_gpu else 1e-4)
        if on_gpu:
            assert v["kernel_us"] > 0 and v["rate_basis"] == "kernel_us"
            assert v["host_overhead_us"] == pytest.approx(v["e2e_sync_us"] - v["kernel_us"])
            assert v["graphed_us"] > 0 and v["graph_max_abs_diff"] == 0
        else:  # no device kernels on a CPU: rates use the wall time, and say so; no graphs
            assert v["kernel_us"] is None and v["rate_basis"] == "e2e_nosync_us"
            assert v["graphed_us"] is None and "CUDA" in v["graph_note"]
        assert v["e2e_nosync_us"] > 0 and v["e2e_sync_us"] > 0 and v["enqueue_us"] > 0
        assert v["flops"] == geglu_mlp_flops(16, 32, 64)
        assert 0 < v["pct_of_mlp_floor"] and v["plan"] == variants.VARIANTS[name].plan
    act = 16 * 64 * 4  # one [M, hidden] fp32 tensor, in bytes
    for name, kept in (("eager", 4), ("course-fused-save", 3), ("course-fused-recompute", 0)):
        t = shape["training"][name]
        assert t["status"] == "ok", t.get("reason")
        assert t["dx_rel_err"] < (1e-2 if on_gpu else 1e-4) and t["step_us"] > 0
        assert t["saved_mb"] * 1e6 == pytest.approx(kept * act), name
        assert (t.get("peak_mb") is not None) == on_gpu
    assert r["sweep"]["m"] == [16, 32]
    assert {(row["variant"], row["m"]) for row in r["sweep"]["rows"]} == {
        (n, m) for n in ("eager", "course-geglu", "course-fused") for m in (16, 32)
    }
    assert all(row["status"] == "ok" and row["e2e_sync_us"] > 0 for row in r["sweep"]["rows"])
    assert {p["kernel"] for p in r["gate_up_plans"]} >= {"gate_up_forward", "geglu_backward_gemm"}


def test_run_rejects_bad_requests() -> None:
    with pytest.raises(ValueError, match="unknown shape preset"):
        mlp_bench.run("cpu", shapes=["huge"])
    with pytest.raises(ValueError, match="unknown training variant"):
        mlp_bench.run("cpu", training=["eager", "fastest"])
    with pytest.raises(ValueError, match="multiples of sweep_seq"):
        mlp_bench.run("cpu", sweep_m=[100])
    assert mlp_bench.check_shapes(["blog", "decode"])[1:] == [n for n, p in SHAPES.items() if "decode" in p.tags]


def test_results_round_trip_and_views(quick_result: dict, tmp_path: Path) -> None:
    # a GPU with registered ceilings (the H200) has its recording's rates judged again against them on load:
    # the round trip is of a run on a device without any
    quick_result = {**quick_result, "provenance": {**quick_result["provenance"], "device": "a GPU without ceilings"}}
    path = mlp_bench.save_results(quick_result, tmp_path / "r.json")
    loaded = _load(path)
    # compared as JSON text: a NaN (a GPU-only field left unmeasured) is never equal to itself
    as_text = lambda d: json.dumps(d, sort_keys=True, default=str)  # noqa: E731
    assert as_text(loaded.data) == as_text(quick_result)
    assert loaded.ceilings == loaded.session_ceilings  # not an H200 run: judged against its own ceilings
    assert results.BenchResults.from_run(quick_result).ceilings.source == "measured"
    assert "recorded results" in loaded.label and loaded.provenance["device"] in loaded.label
    table = loaded.table()
    assert list(table["variant"]) == ["eager", "course-geglu", "course-fused"]
    assert set(loaded.card()["item"]) >= {"device", "torch", "triton", "date", "command", "shape tiny"}
    times = loaded.times(relative_to="eager")
    assert list(times.columns[:7]) == ["variant", *results.TIME_COLUMNS]
    assert (times.loc[times["variant"] == "eager", "e2e_sync_vs_eager"] == 1.0).all()
    training = loaded.training()
    assert list(training["variant"]) == ["eager", "course-fused-save", "course-fused-recompute"]
    assert set(loaded.shapes_table(("eager", "course-fused"))["shape"]) == {"tiny"}
    frame = loaded.roofline_frame()
    assert len(frame) == 3 and frame["arithmetic_intensity"].notna().all()
    fig = loaded.roofline_figure()
    assert loaded.provenance["device"] in fig.layout.title.text
    assert len(loaded.sweep()) == 6
    winners = loaded.sweep_winners()
    assert list(winners["m"]) == [16, 32] and set(winners["fastest"]) <= {"eager", "course-geglu", "course-fused"}
    by_sync = loaded.sweep_winners("e2e_sync_us")
    assert by_sync.attrs["metric"] == "e2e_sync_us" and "fastest_e2e_sync_us" in by_sync
    with pytest.raises(ValueError, match="metric must be one of"):
        loaded.sweep_winners("speed")
    assert len(loaded.sweep_figure().data) == 4  # three variants and the floor
    assert "synchronised" in loaded.sweep_figure(metric="e2e_sync_us").layout.title.text
    rel = loaded.sweep_figure(relative_to="eager")
    assert list(rel.data[0].y) == [1.0, 1.0]
    with pytest.raises(ValueError, match="not in the sweep"):
        loaded.sweep_figure(relative_to="liger")
    with pytest.raises(KeyError, match="present"):
        loaded.variant("liger")
    with pytest.raises(KeyError, match="shape 'blog' is not in these results"):
        loaded.table("blog")
    assert "plan" in table.columns and variants_table(quick_result).count("\n") > 5


def test_the_one_reader_refuses_what_is_not_a_results_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no results at"):
        helpers.load_results(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ValueError, match="store no tables"):
        helpers.load_results(bad)


def test_what_a_lesson_reads_is_what_the_json_stores() -> None:
    """One reader: the table notebooks 04 and 06 show is the stored table, value for value; and the stored
    tables are what the harness derives from the raw measurements today (else: python -m benchmarks rejudge mlp)."""
    path = mlp_bench.RESULTS_PATH
    data = json.loads(path.read_text())
    shown = helpers.load_results("h200_mlp_variants").table("variants")
    stored = data["tables"]["variants"]
    assert list(shown.columns) == stored["columns"]
    col = stored["columns"].index("kernel_us")
    assert list(shown["kernel_us"]) == [row[col] for row in stored["rows"]]
    fresh = tables(data)
    for name, (frame, _) in fresh.items():
        assert list(frame.columns) == data["tables"][name]["columns"], name
        assert len(frame) == len(data["tables"][name]["rows"]), name
    fused = shown.set_index("variant").loc["course-fused", "kernel_us"]
    assert fused == pytest.approx(fresh["variants"][0].set_index("variant").loc["course-fused", "kernel_us"])


def test_committed_h200_results() -> None:
    r = _load(mlp_bench.RESULTS_PATH)
    assert "H200" in r.provenance["device"] and r.complete
    assert r.data["config"]["device"] == "cuda" and r.shape == BLOG_SHAPE and r.main == "blog"
    for name in r.measured():
        v = r.variant(name)
        assert v["rel_err"] < 1e-2 and v["rate_basis"] == "kernel_us"
        assert v["e2e_sync_us"] >= v["kernel_us"], "a synchronised call cannot beat its own kernels"
        assert v["host_overhead_us"] == pytest.approx(v["e2e_sync_us"] - v["kernel_us"])
    assert r.variant("eager")["kernels_per_forward"] == 5
    assert r.variant("course-fused")["kernels_per_forward"] == 2
    for name in r.shape_names():
        for t in r.data["shapes"][name].get("training", {}).values():
            assert t["status"] != "ok" or t["dx_rel_err"] < 2e-2


def test_targets_on_a_made_up_result(quick_result: dict) -> None:
    data = json.loads(json.dumps(quick_result, default=str))
    data["config"]["device"] = "cuda"
    blog = data["shapes"]["tiny"]
    for name, (kernel, sync) in {
        "eager": (236.0, 264.0),
        "compile": (207.0, 306.0),
        "course-fused": (178.0, 200.0),
    }.items():
        blog["variants"][name] = {"status": "ok", "kernel_us": kernel, "e2e_sync_us": sync, "e2e_nosync_us": kernel,
                                  "host_overhead_us": sync - kernel, "rel_err": 2e-3}  # fmt: skip
    blog["training"] = {
        "eager": {"status": "ok", "step_us": 720.0, "peak_mb": 279.0, "dx_rel_err": 3e-3},
        "liger": {"status": "ok", "step_us": 850.0, "peak_mb": 183.0, "dx_rel_err": 3e-3},
        "course-fused-save": {"status": "ok", "step_us": 600.0, "peak_mb": 170.0, "dx_rel_err": 3e-3},
        "course-fused-recompute": {"status": "ok", "step_us": 700.0, "peak_mb": 190.0, "dx_rel_err": 3e-3},
    }
    t = check_targets(results.BenchResults(data, source="live")).set_index("target")
    assert (
        t.loc["kernel time / compile's", "value"] == pytest.approx(178 / 207)
        and t.loc["kernel time / compile's", "met"]
    )
    assert t.loc["host overhead - eager's (us)", "value"] == pytest.approx(22 - 28)
    assert t.loc["save-mode step / fastest of eager, compile, Liger", "value"] == pytest.approx(600 / 720)
    assert not t.loc["recompute-mode peak memory / Liger's", "met"]  # 190 > 183
    with pytest.raises(TypeError, match="BenchResults"):
        check_targets(data)


def test_schema_1_results_still_load(tmp_path: Path) -> None:
    old = {
        "schema": "course-mlp-variants/1", "complete": True, "provenance": {"device": "NVIDIA H200", "torch": "2.11",
        "triton": "3.6.0", "date": "2026-11-29"}, "ceilings": json.loads(json.dumps(H200_REFERENCE.as_dict())),
        "config": {"device": "cuda", "dtype": "bfloat16", "shape": {"batch": 64, "seq": 128, "dim": 768, "hidden": 3072,
        "tokens": 8192}}, "variants": {"eager": {"status": "ok", "kernel_us": 230.0, "e2e_sync_us": 260.0,
        "e2e_nosync_us": 240.0}}, "sweep": {"m": [], "rows": [], "skipped": {}},
    }  # fmt: skip
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    r = _load(path)
    assert r.main == "blog" and r.measured() == ["eager"] and r.training().empty
    assert r.variant("eager")["host_overhead_us"] == 30.0
    assert pd.isna(r.times().loc[0, "graphed_us"]) and "course-mlp-variants/1" in set(r.card()["value"])


# ------------------------------------------------------------------------------------- command line


def test_cli_refuses_to_write_cpu_numbers_as_h200(tmp_path: Path) -> None:
    assert mlp_main(["--device", "cpu", "--quick"]) == 2  # no --out: the default is for H200 results
    assert mlp_main(["--device", "cpu", "--quick", "--out", str(tmp_path / "h200_x.json")]) == 2
    assert not (tmp_path / "h200_x.json").exists()


@pytest.mark.slow
def test_cli_quick_cpu_run(tmp_path: Path) -> None:
    out = tmp_path / "cpu.json"
    assert mlp_main(["--device", "cpu", "--quick", "--out", str(out)]) == 0
    r = _load(out)
    assert set(helpers.load_results(out).tables) >= {"variants", "kernels", "sweep", "targets"}
    assert r.complete and r.data["config"]["device"] == "cpu" and r.shape_names() == ["tiny"]
    assert "compile-max-autotune" not in r.data["shapes"]["tiny"]["variants"]  # --quick leaves it out
    compiled = r.variant("compile")
    assert compiled["status"] == "ok" and compiled["rel_err"] < 1e-4
    assert compiled["kernels_per_forward"] >= 1  # Inductor's generated C++ kernel(s)
    assert r.variant("liger")["status"] in ("unavailable", "failed")  # no Liger kernel runs on a CPU
    assert "compile" in r.data["sweep"]["skipped"]
    assert r.data["sweep"]["m"] == [16, 32]
    assert set(r.training()["variant"]) >= {"eager", "course-fused-save", "course-fused-recompute"}


def test_kernel_summary_and_rates_on_h200_traces() -> None:
    """The summary and rates the benchmark derives on a GPU, computed from the committed H200 traces."""
    import helpers

    eager = bench_measure.kernel_summary(helpers.load_trace(data_file("h200_mlp_eager.json.gz")))
    compiled = bench_measure.kernel_summary(helpers.load_trace(data_file("h200_mlp_compiled.json.gz")))
    assert (eager["kernels_per_forward"], eager["device_events_per_forward"]) == (5, 7)  # + 2 memsets
    assert (compiled["kernels_per_forward"], compiled["device_events_per_forward"]) == (4, 6)
    assert eager["steady"] and 225 < eager["kernel_us"] < 240 and 195 < compiled["kernel_us"] < 215
    roles = {k["role"] for k in eager["kernels"]}
    assert roles == {"gemm", "gelu", "mul", "memset"}
    assert sum(k["calls_per_forward"] for k in eager["kernels"] if k["role"] == "gemm") == 3

    eager_rates = bench_measure.derive_rates(eager, "unfused", BLOG_SHAPE, torch.bfloat16, H200_REFERENCE)
    compiled_rates = bench_measure.derive_rates(compiled, None, BLOG_SHAPE, torch.bfloat16, H200_REFERENCE)
    assert compiled_rates["plan"] == "pointwise-fused" and compiled_rates["plan_source"] == "read from kernel names"
    assert eager_rates["rate_basis"] == "kernel_us"
    assert eager_rates["achieved_tflops"] == pytest.approx(geglu_mlp_flops(8192, 768, 3072) / eager["kernel_us"] / 1e6)
    # eager runs near its own plan's floor on the H200 (~233 us against ~205); fusion lowers the floor
    # instead. No floor is beaten (tests/measure/test_ceilings.py: the ceilings are measured one way).
    assert 80 < eager_rates["pct_of_plan_floor"] <= 100
    assert compiled_rates["plan_floor_us"] < eager_rates["plan_floor_us"]
    assert eager_rates["mlp_floor_us"] == pytest.approx(
        geglu_mlp_flops(8192, 768, 3072) / H200_REFERENCE.matmul_flop_per_s * 1e6, rel=1e-9
    )
    # 2*3*M*D*H FLOPs at the recorded matmul roof (832.5 TFLOP/s, h200_ceilings.json): 139.3 us
    assert 135 < eager_rates["mlp_floor_us"] < 145
    # the fused pointwise kernel runs close to the memory roof (87% of the write bandwidth, the best
    # of copy, read and write in h200_ceilings.json), the eager pair far from it
    assert compiled_rates["pointwise_us"] < 40 and eager_rates["pointwise_us"] > 60
    assert 85 < 100 * compiled_rates["pointwise_floor_us"] / compiled_rates["pointwise_us"] <= 100
