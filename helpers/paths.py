"""Where the course's files live, found from this package's location (never the working directory).

nbmake runs each notebook from its own folder and learners copy notebooks elsewhere, so every path
the helpers need is derived from ``helpers/__file__``.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TRACES_DIR = REPO_ROOT / "traces"
# Traces a learner records: git-ignored, and the only place `Trace.save` writes by default.
LOCAL_TRACES_DIR = TRACES_DIR / "local"
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"


def reference_trace_path(name: str) -> Path:
    """Path of a shipped reference trace, e.g. ``reference_trace_path("h200_mlp_eager")``.

    Accepts the bare name or the file name; raises FileNotFoundError listing what is available.
    """
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
