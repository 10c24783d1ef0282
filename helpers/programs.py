"""Run one of the course's programs from a notebook (a benchmark never runs inside the notebook's process):
a subprocess with a timeout, its progress printed as it runs, the file it wrote read afterwards."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .paths import REPO_ROOT, env_with_first_on_path


class ProgramError(RuntimeError):
    """A program that failed or ran out of time; the message holds the end of its output."""


@dataclass(frozen=True)
class Finished:
    """A program that ran to its end: its exit code and every line it printed."""

    returncode: int
    lines: list[str]


def _stop(proc: subprocess.Popen) -> None:
    """End the program's whole process group: SIGTERM, then SIGKILL to whatever of the group is left. The program
    can exit before the processes it started (torchrun before its ranks), so the group is waited for, not it alone."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10.0)
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            break  # no process of the group is left
        time.sleep(0.05)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10.0)


def _useful(line: str) -> bool:
    return "USDT" not in line  # the profiler's tracing notices are noise here


_STAMP = re.compile(r"^\s*\[\s*[\d.]+s\]\s*")  # the "[  71.3s] " a benchmark's log line starts with


def line_shown(line: str, hidden_prefixes: tuple[str, ...] = (), hidden_substrings: tuple[str, ...] = ()) -> bool:
    """Whether a program's output line is printed: not the profiler's tracing notices, not a line starting (after
    its time stamp) with one of `hidden_prefixes`, not one holding one of `hidden_substrings`."""
    if not isinstance(line, str):
        raise TypeError(f"line must be a string, got {type(line).__name__}")
    text = _STAMP.sub("", line).strip()
    return _useful(line) and not text.startswith(hidden_prefixes) and not any(s in line for s in hidden_substrings)


def run_program(
    args: Sequence[str],
    timeout_s: float,
    progress: bool = True,
    show: Callable[[str], bool] = _useful,
    log_path: str | os.PathLike | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    on_line: Callable[[str], None] | None = None,
    log_header: bool = False,
) -> Finished:
    """Run ``python args...`` from the repository root, this checkout first on ``PYTHONPATH``, printing the lines
    `show` accepts; ProgramError with the output's end past `timeout_s` (then stopped) or, with `check`, on failure."""
    if isinstance(args, str) or not all(isinstance(a, (str, os.PathLike)) for a in args):
        raise TypeError("args must be a list of strings, e.g. ['-m', 'benchmarks', 'attention', '--quick']")
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
        raise ValueError(f"timeout_s must be a number of seconds > 0, got {timeout_s!r}")
    cmd = [sys.executable, *map(str, args)]
    full_env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}  # its lines arrive as it prints them
    full_env["PYTHONPATH"] = env_with_first_on_path(REPO_ROOT)["PYTHONPATH"]
    lines: list[str] = []
    log = open(log_path, "w", encoding="utf-8") if log_path is not None else None  # noqa: SIM115
    if log is not None and log_header:
        log.write(" ".join(cmd) + "\n")
        log.flush()
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        env=full_env,
        cwd=str(REPO_ROOT),
        start_new_session=True,  # its own process group: a timeout ends it and what it started
    )

    def read() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.append(line.rstrip())
            if on_line is not None:
                on_line(line.rstrip())
            if log:
                log.write(line)
            if progress and show(line.rstrip()):
                print(f"{line.rstrip()}  [{time.perf_counter() - start:.0f} s]", flush=True)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _stop(proc)
        reader.join(timeout=5)
        raise ProgramError(
            f"{' '.join(cmd[1:])} did not finish within {timeout_s:g} s and was stopped. Last output:\n" + _tail(lines)
        ) from None
    except BaseException:  # an interrupted cell must not leave the program running
        _stop(proc)
        raise
    finally:
        reader.join(timeout=10)
        if log:
            log.close()
    if check and proc.returncode != 0:
        raise ProgramError(f"{' '.join(cmd[1:])} failed (exit code {proc.returncode}). Last output:\n" + _tail(lines))
    return Finished(proc.returncode, lines)


def _tail(lines: list[str], n: int = 20) -> str:
    return "\n".join([line for line in lines if _useful(line)][-n:])
