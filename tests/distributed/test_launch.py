"""The launcher's errors, its timeout, the folders it writes into, and the options it shares with scripts/ddp_step.py."""

from __future__ import annotations

import os
import sys
import time

import pandas as pd
import pytest

from helpers.distributed import launch
from helpers.distributed.launch import LOG, LaunchError, launch_run
from helpers.distributed.options import RunOptions, parse_argv
from helpers.lessons import nb09, nb09_launches
from helpers.paths import TRACES_DIR


def test_options_go_to_the_command_line_and_back():
    options = RunOptions.of(mode="fsdp", prefetch="none", bucket_cap_mb=0.5, straggler_rank=1, straggler_ms=3.5)
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
        launch_run("bad", **options)


def test_bad_launches_are_refused(tmp_path):
    with pytest.raises(ValueError, match="run name"):
        launch_run("../escape")
    with pytest.raises(ValueError, match="nproc"):
        launch_run("r", nproc=0)
    with pytest.raises(ValueError, match="timeout_s"):
        launch_run("r", timeout_s=-1)
    with pytest.raises(ValueError, match="reference traces folder"):
        launch_run("r", out=TRACES_DIR / "h200x2_mine")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="not a folder"):
        launch_run("r", out=tmp_path / "file")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_run_past_its_timeout_is_stopped_with_every_rank(tmp_path):
    start = time.perf_counter()
    with pytest.raises(LaunchError, match="did not finish within 1.5 s"):
        launch_run("slow", out=tmp_path / "slow", timeout_s=1.5, progress=False, device="cpu")
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
    with pytest.raises(LaunchError, match="max_position_embeddings") as err:
        launch_run("fails", out=folder, progress=False, device="cpu", seq=600, timed_steps=1, profile_steps=1)
    assert "exit code" in str(err.value) and (folder / LOG).is_file()


def _fake_run(monkeypatch):
    """The launcher with a stand-in for torchrun that writes what a finished two-rank run writes."""
    script = (
        "import pathlib, sys; f = pathlib.Path(sys.argv[1]); "
        "[(f / f'rank{r}.json.gz').write_bytes(b'x') for r in range(2)]; (f / 'summary.json').write_text('{}')"
    )
    real = launch.launch_command

    def command(name, nproc, options, folder):  # the real command line first: the log's first line names it
        return [sys.executable, "-c", script, str(folder), "#", *real(name, nproc, options, folder)]

    monkeypatch.setattr(launch, "launch_command", command)


def test_a_folder_is_reused_only_when_it_holds_an_earlier_run_and_only_its_files_go(tmp_path, monkeypatch):
    _fake_run(monkeypatch)
    folder = tmp_path / "mine"
    assert launch_run("r", out=folder, progress=False) == folder.resolve()
    (folder / "notes.txt").write_text("the learner's own")
    (folder / "rank0.json.gz").write_bytes(b"left by the earlier run")
    launch_run("r", out=folder, progress=False)  # an earlier run of its own: its files are replaced
    assert (folder / "notes.txt").read_text() == "the learner's own" and (folder / "rank0.json.gz").read_bytes() == b"x"
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    for name in ("rank0.json.gz", "summary.json", LOG, "data.csv"):
        (theirs / name).write_text("not a run of launch_run")
    with pytest.raises(ValueError, match="holds no earlier run of launch_run"):
        launch_run("r", out=theirs, progress=False)
    assert sorted(p.read_text() for p in theirs.iterdir()) == ["not a run of launch_run"] * 4  # nothing touched
    moved = tmp_path / "moved"
    folder.rename(moved)  # a run's log names its own folder: a copy elsewhere is not this run's
    with pytest.raises(ValueError, match="not empty"):
        launch_run("r", out=moved, progress=False)
    (tmp_path / "empty").mkdir()
    assert (launch_run("r", out=tmp_path / "empty", progress=False) / "summary.json").is_file()


def test_files_a_run_did_not_write_are_kept_aside_never_deleted(tmp_path, monkeypatch, capsys):
    """Issue 23: rank files, summary.json and launch.log put in a run's folder by someone else survive a new run."""
    _fake_run(monkeypatch)
    folder = tmp_path / "run"
    launch_run("r", out=folder, progress=False)
    (folder / "rank5.json.gz").write_bytes(b"a rank of another run")
    (folder / "summary.json").write_text('{"mine": true}')
    (folder / LOG).write_text("my own notes")
    (folder / "rank1.json.gz").unlink()
    (folder / "rank1.json.gz").symlink_to(tmp_path / "elsewhere.json.gz")
    launch_run("r", out=folder, progress=False)
    (kept,) = folder.glob("kept-*")
    assert (kept / "rank5.json.gz").read_bytes() == b"a rank of another run"
    assert (kept / "summary.json").read_text() == '{"mine": true}' and (kept / LOG).read_text() == "my own notes"
    assert (kept / "rank1.json.gz").is_symlink()
    assert "did not write" in capsys.readouterr().out
    assert (folder / "rank0.json.gz").read_bytes() == b"x" and (folder / "summary.json").read_text() == "{}"
    launch_run("r", out=folder, progress=False)  # the new run's own files go; the kept folder stays
    assert [p.name for p in folder.glob("kept-*")] == [kept.name] and (kept / "rank5.json.gz").exists()


def test_a_forged_log_does_not_make_a_folder_deletable(tmp_path, monkeypatch):
    """A folder whose launch.log names this folder but that holds no record: its files are moved, not deleted."""
    _fake_run(monkeypatch)
    folder = (tmp_path / "forged").resolve()
    folder.mkdir()
    (folder / LOG).write_text(f"python {launch.SCRIPT} --out {folder}\n")
    (folder / "rank0.json.gz").write_bytes(b"precious")
    launch_run("r", out=folder, progress=False)
    (kept,) = folder.glob("kept-*")
    assert (kept / "rank0.json.gz").read_bytes() == b"precious"


def test_a_failed_run_records_its_files_so_the_next_one_replaces_them(tmp_path, monkeypatch):
    script = "import pathlib, sys; (pathlib.Path(sys.argv[1]) / 'rank0.json.gz').write_bytes(b'half'); sys.exit(3)"
    monkeypatch.setattr(
        launch, "launch_command", lambda name, nproc, options, folder: [sys.executable, "-c", script, str(folder)]
    )
    folder = tmp_path / "failed"
    with pytest.raises(LaunchError):
        launch_run("r", out=folder, progress=False)
    with pytest.raises(LaunchError):
        launch_run("r", out=folder, progress=False)
    assert not list(folder.glob("kept-*"))  # its own files were replaced, nothing set aside


def test_the_notebooks_runs_folder_is_per_kernel_and_tidies_after_ended_ones():
    dead = nb09_launches.RUNS_PARENT / "999999999"
    dead.mkdir(parents=True, exist_ok=True)
    keep = nb09_launches.RUNS_PARENT / "not-a-pid"
    keep.mkdir(exist_ok=True)
    mine = nb09.runs_folder()
    assert mine.name == str(os.getpid()) and mine.is_dir()
    assert not dead.exists() and keep.exists()
    keep.rmdir()


def test_prediction_table_gives_the_error_relative_to_the_change():
    table = nb09.prediction_table([("a", 1.1, 1.0), ("b", -2.0, -2.5), ("not answered", None, 1.0)])
    assert table["error_pct"].tolist()[:2] == pytest.approx([10.0, 20.0]) and pd.isna(table["error_pct"].iloc[2])
    with pytest.raises(ValueError):
        nb09.prediction_table([])


def test_a_rank_crashing_on_its_way_out_after_writing_everything_is_a_complete_run(tmp_path, monkeypatch, capsys):
    script = (
        "import pathlib, sys; f = pathlib.Path(sys.argv[1]); "
        "[(f / f'rank{r}.json.gz').write_bytes(b'x') for r in range(2)]; (f / 'summary.json').write_text('{}'); "
        "print('terminate called without an active exception'); sys.exit(134)"
    )
    monkeypatch.setattr(
        launch, "launch_command", lambda name, nproc, options, folder: [sys.executable, "-c", script, str(folder)]
    )
    folder = launch_run("crash_at_exit", out=tmp_path / "run")
    assert "after every rank had written its results" in (folder / LOG).read_text()
    assert "exited with code 134" in capsys.readouterr().out
    script_fails = "import sys; print('ValueError: bad things'); sys.exit(1)"
    monkeypatch.setattr(launch, "launch_command", lambda *a: [sys.executable, "-c", script_fails])
    with pytest.raises(LaunchError, match="The ranks raised: ValueError: bad things"):
        launch_run("fails_early", out=tmp_path / "run2", progress=False)
