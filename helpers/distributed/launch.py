"""Launch a data-parallel run from a notebook: ``torchrun`` in a subprocess, with a timeout and progress.

A Jupyter kernel is one process; a data-parallel job is one process per rank. So the notebook
starts ``torchrun --standalone --nproc_per_node=N scripts/ddp_step.py ...`` (through
``python -m torch.distributed.run``, the same program), shows the script's progress lines while it
runs, keeps the whole output in ``launch.log`` beside the traces, and returns the run's folder.
The environment is passed through unchanged (``NCCL_*`` settings among it), plus this checkout on
``PYTHONPATH`` so every rank imports the same ``helpers``.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from .. import programs
from ..paths import LOCAL_TRACES_DIR, REPO_ROOT, is_reference_location
from .options import RunOptions, check_run_name
from .runs import SUMMARY

SCRIPT = REPO_ROOT / "scripts" / "ddp_step.py"
LOG = "launch.log"
PROGRESS = "[ddp_step]"
MAX_RANKS = 64
# the files a run writes (and the script's temporaries): the only ones a new run removes
RUN_FILE = re.compile(r"^(\.?rank\d+\.[\w.]+|\.?summary\.json(\.tmp)?|launch\.log)$")
# a Python exception line as a rank prints it ("ValueError: seq 600 exceeds ..."); torchrun's own
# ChildFailedError only says that a rank failed
_EXCEPTION = re.compile(r"^(?:\[rank\d+\]:)?\s*([A-Za-z_][\w.]*(?:Error|Exception|Interrupt)): (.*)$")
# what a rank that dies in C++ (SIGABRT, SIGSEGV) prints before it goes
_FATAL = re.compile(r"terminate called|what\(\):|Fatal Python error|Segmentation fault|Aborted")


class LaunchError(RuntimeError):
    """A run that failed or ran out of time; the message holds the end of its output."""


def _folder(name: str, out: str | os.PathLike | None) -> Path:
    folder = (Path(out) if out is not None else LOCAL_TRACES_DIR / name).resolve()
    if is_reference_location(folder):
        raise ValueError(
            f"{folder} is inside the reference traces folder: runs are written to {LOCAL_TRACES_DIR} (the default)"
        )
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{folder} exists and is not a folder")
    return folder


def _earlier_run(folder: Path) -> bool:
    """True when `folder` holds a run launched into it by :func:`launch_run` (its log's first line says so)."""
    try:
        first = (folder / LOG).read_text(encoding="utf-8", errors="replace").splitlines()[0].split()
    except (OSError, IndexError):
        return False
    return str(SCRIPT) in first and "--out" in first[:-1] and first[first.index("--out") + 1] == str(folder)


def _prepare(folder: Path) -> None:
    """An empty folder for the run: a new or empty one, or an earlier run's, whose files (only those) go."""
    if folder.is_dir() and any(folder.iterdir()):
        if not _earlier_run(folder):
            raise ValueError(
                f"{folder} is not empty and holds no earlier run of launch_run: give an empty or new folder "
                "(nothing in it was touched)"
            )
        for p in folder.iterdir():
            if p.is_file() and RUN_FILE.match(p.name):
                p.unlink()
    folder.mkdir(parents=True, exist_ok=True)


def launch_command(name: str, nproc: int, options: RunOptions, folder: Path) -> list[str]:
    """Used by notebook 09: the command line of one run (``python -m torch.distributed.run`` is ``torchrun``)."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",  # a free port on this machine: two runs at once do not collide
        f"--nproc_per_node={nproc}",
        str(SCRIPT),
        "--name",
        name,
        "--out",
        str(folder),
        *options.to_argv(),
    ]


def run_program(
    cmd: list[str], log_path: Path, timeout_s: float, what: str, progress: str | None = None
) -> tuple[int, list[str], list[str]]:
    """Run ``python cmd[1:]`` (`cmd[0]` is this interpreter) with its output in `log_path`; ``(exit code, last lines, errors)``.

    Lines matching the regular expression `progress` are printed as they come. Raises
    :class:`LaunchError` after `timeout_s` (the program and every process it started are ended).
    """
    if not cmd or cmd[0] != sys.executable:
        raise ValueError(f"run_program runs this interpreter's programs: cmd must start with {sys.executable}")
    errors: list[str] = []  # the exceptions it printed, first ones first

    def note_errors(line: str) -> None:
        m = _EXCEPTION.match(line)
        if len(errors) < 10:
            if m and "ChildFailedError" not in m.group(1):
                errors.append(f"{m.group(1)}: {m.group(2)}")
            elif _FATAL.search(line):
                errors.append(line.strip())

    try:
        done = programs.run_program(
            cmd[1:],
            timeout_s,
            progress=progress is not None,
            show=lambda line: bool(progress and re.match(progress, line)),
            log_path=log_path,
            env={"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")},  # what torchrun sets, without its warning
            check=False,
            on_line=note_errors,
            log_header=True,
        )
    except programs.ProgramError as err:
        raise LaunchError(f"{what}: {err}") from None
    return done.returncode, done.lines[-40:], errors


def launch_run(
    name: str,
    nproc: int = 2,
    timeout_s: float = 300.0,
    out: str | os.PathLike | None = None,
    progress: bool = True,
    **options,
) -> Path:
    """Used by notebook 09: ``scripts/ddp_step.py`` on `nproc` ranks under torchrun; returns the folder of its traces.

    `options` are the fields of :class:`helpers.distributed.options.RunOptions` (``mode="fsdp"``,
    ``bucket_cap_mb=25``, ``straggler_rank=1, straggler_ms=50`` ...). The folder (``traces/local/<name>/``
    unless `out`) receives ``rank<r>.json.gz``, ``summary.json`` and ``launch.log``. It must be new,
    empty, or hold an earlier run of this function (whose files alone are removed first). Raises
    :class:`LaunchError` with the end of the output when a rank fails, or after `timeout_s`.
    """
    check_run_name(name)
    if isinstance(nproc, bool) or not isinstance(nproc, int) or not 1 <= nproc <= MAX_RANKS:
        raise ValueError(f"nproc must be an integer from 1 to {MAX_RANKS}, got {nproc!r}")
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
        raise ValueError(f"timeout_s must be a number of seconds > 0, got {timeout_s!r}")
    run_options = RunOptions.of(**options)
    folder = _folder(name, out)
    _prepare(folder)
    cmd = launch_command(name, nproc, run_options, folder)
    code, tail, errors = run_program(
        cmd, folder / LOG, timeout_s, f"run {name!r}", re.escape(PROGRESS) if progress else None
    )
    complete = (folder / SUMMARY).is_file()  # rank 0 writes it last, after every rank's trace
    if code != 0 and complete:
        # every rank finished its work; a rank crashed on its way out (a backend's threads at shutdown)
        note = f"note: torchrun exited with code {code} after every rank had written its results"
        with open(folder / LOG, "a", encoding="utf-8") as log:
            log.write(note + "\n")
        if progress:
            print(f"{PROGRESS} {name}: {note}", flush=True)
    elif code != 0:
        useful = [line for line in tail if "USDT" not in line][-15:]
        why = f"The ranks raised: {'; '.join(dict.fromkeys(errors))}\n" if errors else ""
        raise LaunchError(
            f"run {name!r} failed (torchrun exit code {code}); the whole output is in {folder / LOG}.\n"
            + why
            + "Last lines:\n"
            + "\n".join(useful)
        )
    missing = [f"rank{r}.json.gz" for r in range(nproc) if not (folder / f"rank{r}.json.gz").is_file()]
    if missing or not complete:
        raise LaunchError(f"run {name!r} ended without writing {missing or [SUMMARY]} in {folder}")
    return folder
