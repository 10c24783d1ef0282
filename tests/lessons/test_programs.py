"""helpers.lessons.programs: a program run from a notebook, with its progress, its failure and its timeout."""

from __future__ import annotations

import pytest

from helpers.lessons.programs import ProgramError, run_program


def test_a_program_prints_its_progress_and_returns_its_output(capsys) -> None:
    seen = []
    out = run_program(
        ["-c", "print('step 1'); print('done')"], timeout_s=60, show=lambda s: "step" in s, on_line=seen.append
    )
    assert out.splitlines() == ["step 1", "done"] and seen == ["step 1\n", "done\n"]
    printed = capsys.readouterr().out
    assert "step 1  [" in printed and "done" not in printed  # only the lines `show` accepts


def test_a_failing_program_raises_with_the_end_of_its_output() -> None:
    with pytest.raises(ProgramError, match=r"exit status 3[\s\S]*boom"):
        run_program(["-c", "import sys; print('boom'); sys.exit(3)"], timeout_s=60, progress=False)


def test_a_program_past_its_timeout_is_stopped() -> None:
    with pytest.raises(ProgramError, match="longer than 1 s"):
        run_program(["-c", "print('start', flush=True); import time; time.sleep(30)"], timeout_s=1, progress=False)
    with pytest.raises(ValueError, match="timeout_s"):
        run_program(["-c", "pass"], timeout_s=0)
    with pytest.raises(TypeError, match="list of strings"):
        run_program("-c pass")
