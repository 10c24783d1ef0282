"""Launch a data-parallel run from a notebook (a kernel is one process, a job one per rank): ``scripts/ddp_step.py``
under torchrun in a subprocess, with a timeout and progress, this checkout first on ``PYTHONPATH``."""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import shlex
import sys
import time
from pathlib import Path

from .. import programs
from ..paths import LOCAL_TRACES_DIR, REPO_ROOT, file_sha256, is_reference_location
from .options import SUMMARY, RunOptions, check_run_name

SCRIPT = REPO_ROOT / "scripts" / "ddp_step.py"
LOG = "launch.log"
# what launch_run wrote into a folder, with each file's content hash: the only files a new run deletes
MANIFEST = ".launch_run.json"
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


def shown_path(path: str | os.PathLike) -> str:
    """Used by notebook 09: a path as a learner reads it, relative to the repository when inside it (display only:
    the commands themselves keep absolute paths)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or a path, got {type(path).__name__}")
    p = Path(path)
    return str(p.relative_to(REPO_ROOT)) if p.is_absolute() and p.is_relative_to(REPO_ROOT) else str(p)


def shown_line(line: str) -> str:
    """A line a run printed, with this checkout's absolute paths written relative to it (display only)."""
    return line.replace(f"{REPO_ROOT}{os.sep}", "")


def command_text(cmd: list[str]) -> str:
    """Used by notebook 09: a command of :func:`launch_command` as a learner would type it from the repository:
    ``python`` for this interpreter, paths relative to the repository (display only)."""
    if isinstance(cmd, str) or not cmd or not all(isinstance(a, (str, os.PathLike)) for a in cmd):
        raise TypeError("cmd must be a non-empty list of strings, e.g. launch_command(...)")
    first = "python" if str(cmd[0]) == sys.executable else str(cmd[0])
    return shlex.join([first, *(shown_line(str(a)) for a in cmd[1:])])


def _folder(name: str, out: str | os.PathLike | None) -> Path:
    folder = (Path(out) if out is not None else LOCAL_TRACES_DIR / name).resolve()
    if is_reference_location(folder):
        raise ValueError(
            f"{folder} is inside the reference traces folder: runs are written to {LOCAL_TRACES_DIR} (the default)"
        )
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{folder} exists and is not a folder")
    return folder


def _recorded(folder: Path) -> dict[str, str] | None:
    """The files an earlier :func:`launch_run` wrote into `folder` ({name: sha256}); None when it holds no such run."""
    try:
        record = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = record.get("files") if isinstance(record, dict) else None
    if record.get("folder") != str(folder) or not isinstance(files, dict):
        return None  # a copy of a run elsewhere, or not a record of ours
    return {str(k): str(v) for k, v in files.items()}


def _logged_run(folder: Path) -> bool:
    """True when `folder`'s log says launch_run started a run into it (a run from before records existed)."""
    try:
        first = (folder / LOG).read_text(encoding="utf-8", errors="replace").splitlines()[0].split()
    except (OSError, IndexError):
        return False
    return str(SCRIPT) in first and "--out" in first[:-1] and first[first.index("--out") + 1] == str(folder)


def _record(folder: Path) -> None:
    """Write down the files this run left (its own: the folder held none of its kind before it started)."""
    try:
        files = {p.name: file_sha256(p) for p in sorted(folder.iterdir()) if p.is_file() and RUN_FILE.match(p.name)}
        tmp = folder / f"{MANIFEST}.tmp"
        tmp.write_text(json.dumps({"folder": str(folder), "files": files}, indent=1), encoding="utf-8")
        os.replace(tmp, folder / MANIFEST)
    except OSError:  # without a record, the next run keeps these files aside instead of deleting them
        pass


def _prepare(folder: Path) -> Path | None:
    """An empty folder for the run: an earlier run's unchanged files (its :data:`MANIFEST`) are removed, anything
    else with a run's name is moved to ``kept-<time>/``; any other non-empty folder is refused."""
    if not (folder.is_dir() and any(folder.iterdir())):
        folder.mkdir(parents=True, exist_ok=True)
        return None
    recorded = _recorded(folder)
    if recorded is None and _logged_run(folder):
        recorded = {}  # nothing recorded: every file of that run is kept aside, none deleted
    if recorded is None:
        raise ValueError(
            f"{folder} is not empty and holds no earlier run of launch_run: give an empty or new folder "
            "(nothing in it was touched)"
        )
    theirs = []
    for p in sorted(folder.iterdir()):
        if not (p.is_file() or p.is_symlink()) or not RUN_FILE.match(p.name):
            continue
        if not p.is_symlink() and recorded.get(p.name) == file_sha256(p):
            p.unlink()  # this function's own output, unchanged: the new run writes it again
        else:
            theirs.append(p)
    kept = None
    if theirs:
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
        for n in range(1000):
            kept = folder / (f"kept-{stamp}" if n == 0 else f"kept-{stamp}-{n}")
            try:
                kept.mkdir()  # a folder of its own, never an existing one
                break
            except FileExistsError:
                continue
        for p in theirs:
            os.replace(p, kept / p.name)
        print(
            f"{PROGRESS} {shown_path(folder)} held {len(theirs)} file(s) this function did not write "
            f"({', '.join(p.name for p in theirs)}): moved to {shown_path(kept)}",
            flush=True,
        )
    (folder / MANIFEST).unlink(missing_ok=True)
    return kept


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
    """Run ``python cmd[1:]`` with its output in `log_path`, `progress` lines printed; LaunchError after `timeout_s`."""
    if not cmd or cmd[0] != sys.executable:
        raise ValueError(f"run_program runs this interpreter's programs: cmd must start with {sys.executable}")
    errors: list[str] = []  # the exceptions it printed, first ones first
    start = time.perf_counter()

    def note_errors(line: str) -> None:
        if progress and re.match(progress, line):  # printed here: the ranks write absolute paths
            print(f"{shown_line(line)}  [{time.perf_counter() - start:.0f} s]", flush=True)
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
            progress=False,
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
    """Used by notebook 09: ``scripts/ddp_step.py`` on `nproc` ranks under torchrun (`options`: RunOptions fields);
    returns the folder of its traces. LaunchError when a rank fails or after `timeout_s`."""
    check_run_name(name)
    if isinstance(nproc, bool) or not isinstance(nproc, int) or not 1 <= nproc <= MAX_RANKS:
        raise ValueError(f"nproc must be an integer from 1 to {MAX_RANKS}, got {nproc!r}")
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
        raise ValueError(f"timeout_s must be a number of seconds > 0, got {timeout_s!r}")
    run_options = RunOptions.of(**options)
    folder = _folder(name, out)
    _prepare(folder)
    cmd = launch_command(name, nproc, run_options, folder)
    try:
        code, tail, errors = run_program(
            cmd, folder / LOG, timeout_s, f"run {name!r}", re.escape(PROGRESS) if progress else None
        )
    finally:  # also after a failure or a timeout: the next run may then replace these files
        _record(folder)
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
