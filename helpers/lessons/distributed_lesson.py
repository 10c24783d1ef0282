"""Used by notebook 09: the runs on GPUs the notebook reads, live or recorded, and its prediction table.

- :func:`gpu_run`: a run on GPUs as ``(run, summary)``: the folder this notebook just launched when
  it ran on GPUs here, else the run recorded on two H200s (``traces/h200x2_<name>/``), else None.
- :func:`prediction_table`: a prediction beside its measurement, and the error relative to the change;
- :func:`runs_folder`: where this notebook's runs go (one folder per Jupyter kernel, so a lesson
  and its learner copy running at once never share one).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pandas as pd

from ..distributed.results import load_run, reference_run, run_summary
from ..paths import LOCAL_TRACES_DIR
from ..trace.ranks import MultiRankTrace

RUNS_PARENT = LOCAL_TRACES_DIR / "09_several_gpus"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def runs_folder() -> Path:
    """Used by notebook 09: ``traces/local/09_several_gpus/<pid>/`` for this kernel's runs.

    Folders left by kernels that have ended are removed (only those named by a process id).
    """
    RUNS_PARENT.mkdir(parents=True, exist_ok=True)
    for old in RUNS_PARENT.iterdir():
        if old.is_dir() and old.name.isdigit() and int(old.name) != os.getpid() and not _alive(int(old.name)):
            shutil.rmtree(old, ignore_errors=True)
    mine = RUNS_PARENT / str(os.getpid())
    mine.mkdir(exist_ok=True)
    return mine


def gpu_run(name: str, live: str | os.PathLike | None = None) -> tuple[MultiRankTrace, dict[str, Any]] | None:
    """Used by notebook 09: ``(run, summary)`` of a data-parallel run on GPUs, or None when there is none yet.

    `live`: the folder of a run launched here; used when it ran on GPUs (NCCL). Otherwise the
    reference run ``traces/h200x2_<name>/`` recorded by ``benchmarks/ddp.py`` on two H200s.
    """
    if live is not None:
        summary = run_summary(live)
        if summary.get("backend") == "nccl":
            return load_run(live), summary
    folder = reference_run(name)
    if folder is None:
        return None
    return load_run(folder), run_summary(folder)


def prediction_table(rows: list[tuple[str, float, float]]) -> pd.DataFrame:
    """Used by notebook 09: ``(what, predicted_ms, measured_ms)`` rows of step-time changes, with the error.

    ``error_pct``: |predicted - measured| relative to the measured change (the issue asks for 20%).
    """
    if not rows:
        raise ValueError("prediction_table needs at least one (what, predicted, measured) row")
    out = pd.DataFrame(rows, columns=["change", "predicted_ms", "measured_ms"])
    out["error_pct"] = 100.0 * (out["predicted_ms"] - out["measured_ms"]).abs() / out["measured_ms"].abs()
    return out
