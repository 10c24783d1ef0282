"""Run a program from a notebook: a subprocess of this checkout, with a timeout and its progress shown.

A lesson that runs a benchmark live runs it as the program a maintainer runs (``python -m
benchmarks NAME ...``), prints its progress lines while it works and reads its result file after.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from ..paths import REPO_ROOT


class ProgramError(RuntimeError):
    """A program that failed or ran out of time; the message holds the end of its output."""


def _stop(proc: subprocess.Popen) -> None:
    """End the program's whole process group: SIGTERM, then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=10.0)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def run_program(
    args: Sequence[str],
    timeout_s: float = 300.0,
    progress: bool = True,
    show: Callable[[str], bool] | None = None,
    on_line: Callable[[str], None] | None = None,
) -> str:
    """Used by notebook 07: ``python *args`` from the repository root; returns its whole output.

    Output lines are printed as they come (`progress`; only those `show(line)` accepts), with the
    seconds since the start, and each is passed to `on_line`. Raises :class:`ProgramError` with the
    last lines when the program fails or takes longer than `timeout_s` (its process group is ended).
    """
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
        raise ValueError(f"timeout_s must be a number of seconds > 0, got {timeout_s!r}")
    if isinstance(args, str) or not all(isinstance(a, str) for a in args):
        raise TypeError("args must be a list of strings, e.g. ['-m', 'benchmarks', 'attention', '--quick']")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    cmd = [sys.executable, *args]
    lines: list[str] = []
    tail: deque[str] = deque(maxlen=30)
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        env=env,
        cwd=str(REPO_ROOT),
        start_new_session=True,  # its own process group: a timeout ends it and its children
    )

    def read() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.append(line)
            tail.append(line.rstrip())
            if on_line is not None:
                on_line(line)
            if progress and (show is None or show(line)):
                print(f"{line.rstrip()}  [{time.perf_counter() - start:.0f} s]", flush=True)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _stop(proc)
        reader.join(timeout=5.0)
        raise ProgramError(
            f"{' '.join(args)} took longer than {timeout_s:.0f} s and was stopped:\n" + "\n".join(tail)
        ) from None
    reader.join(timeout=5.0)
    if proc.returncode != 0:
        raise ProgramError(f"{' '.join(args)} failed (exit status {proc.returncode}):\n" + "\n".join(tail))
    return "".join(lines)
