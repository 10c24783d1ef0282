"""scripts/ddp_step.py for real: two gloo ranks of the tiny decoder under DDP and FSDP2, launched as a notebook does.

Two short runs (a few seconds each on two cores), shared by the tests of this module: DDP with a
straggler doing extra work, FSDP2 with explicit prefetching (notebook 09 runs the other settings).
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import subprocess
import sys

import pytest

import helpers
from helpers.distributed.launch import SCRIPT, launch_run
from helpers.distributed.runs import load_run, run_summary, runs_table
from helpers.distributed.workloads import configurations
from helpers.lessons import nb09
from helpers.trace.collectives import collectives, rank_table


def _script():
    """scripts/ddp_step.py as a module (a program, imported by path: its functions, not its main)."""
    spec = importlib.util.spec_from_file_location("ddp_step_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TINY = {k: v for k, v in configurations("cpu", quick=True)["ddp_bucket25"].items() if k != "mode"}
TINY.update(timed_steps=3, profile_steps=2)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ddp_runs")
    return {
        "ddp": launch_run(
            "ddp",
            out=root / "ddp",
            progress=False,
            **{**TINY, "mode": "ddp", "straggler_rank": -2, "straggler_ms": 150.0, "straggler_kind": "work"},
        ),
        "fsdp": launch_run(
            "fsdp", out=root / "fsdp", progress=False, **{**TINY, "mode": "fsdp", "prefetch": "explicit"}
        ),
    }


def test_every_rank_writes_a_trace_with_its_rank_and_the_runs_provenance(runs):
    folder = runs["ddp"]
    assert sorted(p.name for p in folder.iterdir()) == [
        ".launch_run.json",
        "launch.log",
        "rank0.json.gz",
        "rank1.json.gz",
        "summary.json",
    ]
    for rank in (0, 1):
        doc = json.loads(gzip.decompress((folder / f"rank{rank}.json.gz").read_bytes()))
        assert doc["distributedInfo"]["rank"] == rank and doc["distributedInfo"]["world_size"] == 2
        prov = doc["course_provenance"]
        assert prov["rank"] == rank and prov["world_size"] == 2 and prov["backend"] == "gloo"
        assert prov["options"]["bucket_cap_mb"] == TINY["bucket_cap_mb"] and prov["torch"]
        assert not any(
            p.name.startswith(".") and p.name != ".launch_run.json" for p in folder.iterdir()
        )  # no temp file
    run = load_run(folder)
    assert run.ranks == [0, 1] and len(run.steps) == TINY["profile_steps"]
    assert run.rank_traces[1].info.device.startswith("CPU")


def test_ddps_buckets_are_the_all_reduces_in_the_trace(runs):
    summary = run_summary(runs["ddp"])
    buckets = summary["ddp"]["bucket_bytes"]
    assert summary["ddp"]["num_buckets"] == len(buckets) > 2
    # the model's gradients, in float32, split into buckets: nothing lost, nothing counted twice
    assert sum(buckets) == helpers.DECODER_CONFIGS["tiny"].num_parameters() * 4
    coll = collectives(load_run(runs["ddp"]))
    for (rank, step), g in coll[coll["collective"] == "all_reduce"].groupby(["rank", "step"]):
        assert step >= 1, "every all-reduce falls in a profiled step"
        assert sorted(g["bytes"].astype(int)) == sorted(buckets), (rank, step)
    assert (coll["where"] == "gloo thread").all()


def test_the_summary_times_every_rank_and_counts_state(runs):
    summary = run_summary(runs["ddp"])
    assert [r["rank"] for r in summary["ranks"]] == [0, 1]
    for r in summary["ranks"]:
        assert len(r["step_ms"]) == TINY["timed_steps"] and all(t > 0 for t in r["step_ms"])
        assert r["peak_memory_bytes"] is None  # no CUDA allocator on a CPU
        state = r["state_bytes"]
        assert state["parameters"] == state["gradients"] == state["optimizer"] / 2  # AdamW: two moments per weight
    fsdp = run_summary(runs["fsdp"])
    assert fsdp["ranks"][0]["state_bytes"]["total"] * 2 == summary["ranks"][0]["state_bytes"]["total"]
    table = runs_table(runs["ddp"], runs["fsdp"])
    assert list(table["mode"]) == ["ddp", "fsdp"] and table.loc[1, "prefetch"] == "explicit"


def test_fsdp2_gathers_each_block_twice_and_the_root_once(runs, name="fsdp"):
    layers = helpers.DECODER_CONFIGS["tiny"].num_hidden_layers
    coll = collectives(load_run(runs[name]))
    counts = coll.groupby(["rank", "step", "collective"]).size().unstack(fill_value=0)
    assert (counts["all_gather"] == 2 * layers + 1).all()
    assert (counts["all_reduce"] == layers + 1).all()  # gloo's reduce-scatter: one per unit
    sizes = coll[coll["collective"] == "all_gather"]["bytes"]
    assert (sizes > 0).all()


def test_the_straggler_is_found_from_the_traces_alone(runs):
    summary = run_summary(runs["ddp"])
    slow = summary["straggler"]["rank"]
    assert slow in (0, 1) and summary["straggler"]["kind"] == "work"
    table = rank_table(load_run(runs["ddp"]))
    assert int(table.loc[table["communication_us"].idxmin(), "rank"]) == slow
    assert int(table.loc[table["compute_us"].idxmax(), "rank"]) == slow  # its extra matmuls are compute


def test_a_steps_timeline_draws_the_collectives_on_gloos_own_threads(runs):
    run = load_run(runs["ddp"])
    last = run.steps[-1]
    ev = run.events
    gloo = ev[ev["name"].str.startswith("gloo:")]
    assert len(gloo) and (gloo["step"] < 0).all()  # its worker threads are outside every profiler step
    fig = run.timeline(steps=last, max_depth=1)
    drawn = json.dumps(fig.to_plotly_json(), default=str)
    assert "gloo:all_reduce" in drawn
    # only those of the chosen step: no more than the step's own all-reduces, on both ranks
    per_step = collectives(run).query("collective == 'all_reduce' and step == @last")
    assert 0 < drawn.count("gloo:all_reduce") <= 2 * len(per_step) + 2


def test_the_lesson_reads_gloo_runs_as_not_on_gpus(runs):
    assert nb09.gpu_run("no_such_run_recorded", live=runs["ddp"]) is None
    assert nb09.gpu_results(runs["ddp"].parent).name == nb09.REFERENCE_RESULTS  # the H200 recording instead


def test_a_trace_over_its_size_limit_is_trimmed_and_still_read(runs, tmp_path):
    script = _script()
    TRIMS, write_trace = script.TRIMS, script.write_trace
    raw = tmp_path / "raw.json"
    raw.write_bytes(gzip.decompress((runs["ddp"] / "rank0.json.gz").read_bytes()))
    full = load_run(runs["ddp"]).rank_traces[0]
    out = write_trace(raw, tmp_path / "rank0.json.gz", {"label": "trimmed"}, max_mb=0.001)
    assert len(out["trimmed"]) == len(TRIMS) and not raw.exists()
    trace = helpers.load_trace(tmp_path / "rank0.json.gz")
    assert trace.info.extra["trimmed"] == out["trimmed"]
    assert trace.steps == full.steps[1:]  # the first profiled step went last
    c = collectives(trace)
    assert (c["bytes"] > 0).all()  # the collectives keep their message sizes


def test_the_lesson_shows_the_scripts_own_code():
    source = nb09.script_source("wrap_model")
    assert source.startswith("def wrap_model(") and "fully_shard" in source and "DistributedDataParallel" in source
    assert nb09.script_source("profile_steps").startswith("def profile_steps(")
    with pytest.raises(KeyError, match="no function 'main_loop'"):
        nb09.script_source("main_loop")


def test_a_rank_starts_without_pandas():
    # every rank of every launch imports the script: a lesson launches several jobs, and on a small CPU the
    # ranks' start-up is most of each one
    code = (
        "import contextlib, io, runpy, sys\n"
        "sys.argv = ['ddp_step.py', '--help']\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        f"    runpy.run_path({str(SCRIPT)!r}, run_name='__main__')\n"
        "print(sorted(m for m in ('pandas', 'plotly', 'triton') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
