"""What the launcher shows a learner: paths relative to the repository and ``python -m torch.distributed.run ...``;
the command it runs keeps its absolute paths."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from helpers.distributed import launch
from helpers.distributed.launch import command_text, launch_command, shown_line, shown_path
from helpers.distributed.options import RunOptions
from helpers.paths import REPO_ROOT


def test_paths_inside_the_repository_read_relative_and_others_stay_whole():
    assert (
        shown_path(REPO_ROOT / "traces" / "local" / "09_several_gpus" / "5766") == "traces/local/09_several_gpus/5766"
    )
    assert shown_path(Path("/elsewhere/runs")) == "/elsewhere/runs"
    assert shown_path("traces/local") == "traces/local"
    with pytest.raises(TypeError, match="path must be"):
        shown_path(3)  # type: ignore[arg-type]


def test_the_command_reads_as_typed_from_the_repository_and_runs_with_absolute_paths():
    folder = REPO_ROOT / "traces" / "local" / "09_several_gpus" / "1" / "ddp_bucket25"
    cmd = launch_command("ddp_bucket25", 2, RunOptions.of(device="cpu"), folder)
    assert cmd[0] == sys.executable and str(folder) in cmd and str(launch.SCRIPT) in cmd
    text = command_text(cmd)
    assert text.startswith("python -m torch.distributed.run --standalone --nproc_per_node=2 scripts/ddp_step.py ")
    assert "--out traces/local/09_several_gpus/1/ddp_bucket25 " in text
    assert str(REPO_ROOT) not in text and sys.executable not in text
    with pytest.raises(TypeError, match="non-empty list"):
        command_text("python -m x")  # type: ignore[arg-type]


def test_progress_lines_show_relative_paths_and_the_log_keeps_the_absolute_ones(tmp_path, capsys):
    out = REPO_ROOT / "traces" / "local" / "x"
    line = f"[ddp_step] r: wrote 2 traces and summary.json to {out}"
    assert shown_line(line) == "[ddp_step] r: wrote 2 traces and summary.json to traces/local/x"
    code, _, _ = launch.run_program(
        [sys.executable, "-c", f"print({line!r}); print('other')"], tmp_path / "log", 60, "t", r"\[ddp_step\]"
    )
    shown = capsys.readouterr().out
    assert code == 0 and "to traces/local/x  [" in shown and str(REPO_ROOT) not in shown and "other" not in shown
    assert str(out) in (tmp_path / "log").read_text()
