"""helpers.programs: a program run from a notebook, its progress shown, stopped at its timeout."""

from __future__ import annotations

import time

import pytest

from helpers.paths import REPO_ROOT
from helpers.programs import ProgramError, run_program


def test_a_program_runs_from_the_repository_root_and_shows_its_lines(capsys):
    lines = run_program(["-c", "import helpers, os; print('step 1'); print(os.getcwd())"], timeout_s=60).lines
    assert lines[0] == "step 1" and lines[1] == str(REPO_ROOT)
    assert "step 1" in capsys.readouterr().out


def test_a_failing_program_raises_with_the_end_of_its_output():
    with pytest.raises(ProgramError, match=r"exit code 3(.|\n)*last words"):
        run_program(["-c", "print('last words'); raise SystemExit(3)"], timeout_s=60, progress=False)


def test_its_log_and_its_exit_code_when_not_checked(tmp_path):
    code = "print('[step] one'); print('noise'); raise SystemExit(1)"
    done = run_program(
        ["-c", code], 60, show=lambda line: line.startswith("[step]"), log_path=tmp_path / "log", check=False
    )
    assert done.returncode == 1 and done.lines == ["[step] one", "noise"]
    assert (tmp_path / "log").read_text() == "[step] one\nnoise\n"


def test_a_program_past_its_timeout_is_stopped():
    start = time.perf_counter()
    with pytest.raises(ProgramError, match="did not finish within 1 s"):
        run_program(["-c", "import time; print('started', flush=True); time.sleep(60)"], timeout_s=1, progress=False)
    assert time.perf_counter() - start < 30
    with pytest.raises(ValueError, match="timeout_s"):
        run_program(["-c", "pass"], timeout_s=0)


def test_each_line_goes_to_on_line_and_args_must_be_a_list() -> None:
    seen: list[str] = []
    run_program(["-c", "print('a'); print('b')"], timeout_s=60, progress=False, on_line=seen.append)
    assert seen == ["a", "b"]
    with pytest.raises(TypeError, match="list of strings"):
        run_program("-c pass", timeout_s=60)  # type: ignore[arg-type]
