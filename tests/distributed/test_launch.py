"""The launcher's errors, its timeout, and the options it shares with scripts/ddp_step.py."""

from __future__ import annotations

import os
import time

import pytest

import helpers
from helpers.distributed.launch import LOG
from helpers.distributed.options import parse_argv
from helpers.lessons.distributed_lesson import RUNS_PARENT


def test_options_go_to_the_command_line_and_back():
    options = helpers.RunOptions.of(mode="fsdp", prefetch="none", bucket_cap_mb=0.5, straggler_rank=1, straggler_ms=3.5)
    back, name, out = parse_argv(["--name", "r1", "--out", "/tmp/x", *options.to_argv()])
    assert back == options and name == "r1" and out == "/tmp/x"


@pytest.mark.parametrize(
    "options, error, match",
    [
        ({"mode": "zero"}, ValueError, "mode must be one of"),
        ({"prefetch": "always"}, ValueError, "prefetch"),
        ({"batch": 0}, ValueError, "batch must be an integer >= 1"),
        ({"warmup": 1}, ValueError, "rebuilds its buckets"),
        ({"bucket_cap_mb": 0}, ValueError, "bucket_cap_mb must be > 0"),
        ({"bucket_cap_mb": float("nan")}, ValueError, "bucket_cap_mb must be a number"),
        ({"straggler_rank": 1}, ValueError, "straggler_ms > 0"),
        ({"straggler_rank": -3, "straggler_ms": 1}, ValueError, "straggler_rank"),
        ({"config": "huge"}, ValueError, "decoder preset"),
        ({"profile_steps": 50}, ValueError, "profile_steps must be <= 10"),
        ({"bucket_size": 25}, TypeError, "unknown run option"),
    ],
)
def test_bad_options_are_refused_before_anything_starts(options, error, match):
    with pytest.raises(error, match=match):
        helpers.launch_run("bad", **options)


def test_bad_launches_are_refused(tmp_path):
    with pytest.raises(ValueError, match="run name"):
        helpers.launch_run("../escape")
    with pytest.raises(ValueError, match="nproc"):
        helpers.launch_run("r", nproc=0)
    with pytest.raises(ValueError, match="timeout_s"):
        helpers.launch_run("r", timeout_s=-1)
    with pytest.raises(ValueError, match="reference traces folder"):
        helpers.launch_run("r", out=helpers.TRACES_DIR / "h200x2_mine")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="not a folder"):
        helpers.launch_run("r", out=tmp_path / "file")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_run_past_its_timeout_is_stopped_with_every_rank(tmp_path):
    start = time.perf_counter()
    with pytest.raises(helpers.LaunchError, match="did not finish within 1.5 s"):
        helpers.launch_run("slow", out=tmp_path / "slow", timeout_s=1.5, progress=False, device="cpu")
    assert time.perf_counter() - start < 30
    log = (tmp_path / "slow" / LOG).read_text()
    assert "torch.distributed.run" in log.splitlines()[0]
    # nothing of the run is left: no process runs the script any more
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = open(f"/proc/{entry}/cmdline", "rb").read().decode(errors="replace")
            except OSError:
                continue
            assert str(tmp_path / "slow") not in cmdline, f"process {entry} still runs: {cmdline}"


def test_a_failing_rank_raises_with_the_end_of_its_output(tmp_path):
    folder = tmp_path / "fails"
    folder.mkdir()
    (folder / "rank0.json.gz").write_bytes(b"left by an earlier run")
    with pytest.raises(helpers.LaunchError, match="max_position_embeddings") as err:
        helpers.launch_run("fails", out=folder, progress=False, device="cpu", seq=600, timed_steps=1, profile_steps=1)
    assert "exit code" in str(err.value) and (folder / LOG).is_file()
    assert not (folder / "rank0.json.gz").exists()  # an earlier run's files are not taken for this one's


def test_the_notebooks_runs_folder_is_per_kernel_and_tidies_after_ended_ones():
    dead = RUNS_PARENT / "999999999"
    dead.mkdir(parents=True, exist_ok=True)
    keep = RUNS_PARENT / "not-a-pid"
    keep.mkdir(exist_ok=True)
    mine = helpers.runs_folder()
    assert mine.name == str(os.getpid()) and mine.is_dir()
    assert not dead.exists() and keep.exists()
    keep.rmdir()


def test_prediction_table_gives_the_error_relative_to_the_change():
    table = helpers.prediction_table([("a", 1.1, 1.0), ("b", -2.0, -2.5)])
    assert table["error_pct"].tolist() == pytest.approx([10.0, 20.0])
    with pytest.raises(ValueError):
        helpers.prediction_table([])


def test_a_rank_crashing_on_its_way_out_after_writing_everything_is_a_complete_run(tmp_path, monkeypatch, capsys):
    import sys

    from helpers.distributed import launch

    script = (
        "import pathlib, sys; f = pathlib.Path(sys.argv[1]); "
        "[(f / f'rank{r}.json.gz').write_bytes(b'x') for r in range(2)]; (f / 'summary.json').write_text('{}'); "
        "print('terminate called without an active exception'); sys.exit(134)"
    )
    monkeypatch.setattr(
        launch, "command", lambda name, nproc, options, folder: [sys.executable, "-c", script, str(folder)]
    )
    folder = helpers.launch_run("crash_at_exit", out=tmp_path / "run")
    assert "after every rank had written its results" in (folder / LOG).read_text()
    assert "exited with code 134" in capsys.readouterr().out
    script_fails = "import sys; print('ValueError: bad things'); sys.exit(1)"
    monkeypatch.setattr(launch, "command", lambda *a: [sys.executable, "-c", script_fails])
    with pytest.raises(helpers.LaunchError, match="The ranks raised: ValueError: bad things"):
        helpers.launch_run("fails_early", out=tmp_path / "run2", progress=False)
