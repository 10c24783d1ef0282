"""Where the course's files live, from this package's location: nbmake runs a notebook from its own folder
and learners copy notebooks elsewhere, so never from the working directory."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TRACES_DIR = REPO_ROOT / "traces"
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
# Set by the test runs (the repository's conftest.py): the notebooks they execute save their traces
# there, never over the ones a learner saved in traces/local/.
LOCAL_TRACES_ENV = "COURSE_LOCAL_TRACES"


def env_with_first_on_path(folder: str | os.PathLike = REPO_ROOT) -> dict[str, str]:
    """This process's environment with `folder` first on ``PYTHONPATH`` (a child process imports that checkout's
    ``helpers`` and still finds what the machine's own ``PYTHONPATH`` holds)."""
    paths = (str(folder), os.environ.get("PYTHONPATH", ""))
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def local_traces_dir(value: str | None = None) -> Path:
    """Where saved traces go: ``$COURSE_LOCAL_TRACES`` (relative to the repository) or ``traces/local/``; a folder
    elsewhere inside ``traces/`` is refused (the reference traces live there)."""
    value = os.environ.get(LOCAL_TRACES_ENV, "") if value is None else value
    default = TRACES_DIR / "local"
    if not value.strip():
        return default
    folder = Path(value).expanduser()
    folder = folder if folder.is_absolute() else REPO_ROOT / folder
    resolved = folder.resolve()
    if resolved.is_relative_to(TRACES_DIR.resolve()) and not resolved.is_relative_to(default.resolve()):
        raise ValueError(
            f"{LOCAL_TRACES_ENV}={value!r} is inside the reference traces folder {TRACES_DIR}: "
            "give a folder outside it (or unset it for traces/local/)"
        )
    return folder


# Traces a learner records: git-ignored, and the only place `Trace.save` writes by default.
LOCAL_TRACES_DIR = local_traces_dir()


def reference_trace_path(name: str) -> Path:
    """Path of a shipped reference trace by bare or file name; FileNotFoundError lists what is available."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty string, got {name!r}")
    candidates = [TRACES_DIR / name, TRACES_DIR / f"{name}.json.gz", TRACES_DIR / f"{name}.json"]
    for path in candidates:
        if path.is_file():
            return path
    available = sorted(p.name for p in TRACES_DIR.glob("*.json*"))
    raise FileNotFoundError(
        f"no reference trace named {name!r} in {TRACES_DIR}. Available: {', '.join(available) or 'none'}. "
        "Reference traces are recorded on a GPU by scripts/record_reference_traces.py."
    )


def is_reference_location(path: Path) -> bool:
    """True when `path` lies inside traces/ but outside traces/local/ (reference traces are read-only)."""
    resolved = Path(path).resolve()
    try:
        resolved.relative_to(TRACES_DIR.resolve())
    except ValueError:
        return False
    try:
        resolved.relative_to(LOCAL_TRACES_DIR.resolve())
    except ValueError:
        return True
    return False


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's content (hex), read in blocks so a large file never sits in memory."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
