"""A run's folder read back: its traces as one run (:func:`load_run`), its ``summary.json``, runs side by side.

The summary holds what the ranks measured without the profiler: step times per rank, peak memory,
bytes of state per rank, DDP's buckets.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pandas as pd

from ..trace.ranks import MultiRankTrace, load_traces

SUMMARY = "summary.json"  # written by rank 0 last, after every rank's trace
_RANK_FILE = re.compile(r"^rank(\d+)\.json(\.gz)?$")


def _as_folder(folder: str | os.PathLike) -> Path:
    if not isinstance(folder, (str, os.PathLike)):
        raise TypeError(f"expected a run's folder (str or pathlib.Path), got {type(folder).__name__}")
    path = Path(folder)
    if not path.is_dir():
        raise FileNotFoundError(f"{path} is not a folder; launch_run(...) returns the folder of a run")
    return path


def rank_files(folder: str | os.PathLike) -> list[Path]:
    """The run's trace files, ``rank0.json.gz`` first (numeric order: rank10 after rank9)."""
    path = _as_folder(folder)
    found = [(int(m.group(1)), p) for p in path.iterdir() if (m := _RANK_FILE.match(p.name))]
    if not found:
        raise FileNotFoundError(f"{path} holds no rank<r>.json.gz trace: was the run profiled?")
    return [p for _, p in sorted(found)]


def run_summary(folder: str | os.PathLike) -> dict[str, Any]:
    """The run's ``summary.json`` (written by rank 0 at the end of the run)."""
    path = _as_folder(folder) / SUMMARY
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: the run did not finish (see launch.log beside it)")
    return json.loads(path.read_text(encoding="utf-8"))


def load_run(folder: str | os.PathLike, label: str | None = None) -> MultiRankTrace:
    """Every rank's trace of a run's folder as one :class:`helpers.MultiRankTrace`, labelled with the run's name."""
    files = rank_files(folder)
    if label is None:
        try:
            summary = run_summary(folder)
            label = f"{summary['run']} ({summary['world_size']} ranks, {summary['backend']})"
        except (FileNotFoundError, KeyError, ValueError):
            label = Path(folder).name
    return load_traces(files, label=label)


def summary_row(summary: dict[str, Any]) -> dict[str, Any]:
    """One run as a table row: what it was, its step time, memory and state per rank."""
    o, ranks = summary["options"], summary["ranks"]
    peaks = [r.get("peak_memory_bytes") for r in ranks]
    ddp = summary.get("ddp") or {}
    return {
        "run": summary["run"],
        "mode": o["mode"],
        "ranks": summary["world_size"],
        "backend": summary["backend"],
        "model": summary["model"]["name"],
        "bucket_cap_mb": o["bucket_cap_mb"] if o["mode"] == "ddp" else None,
        "buckets": ddp.get("num_buckets"),
        "prefetch": o["prefetch"] if o["mode"] == "fsdp" else None,
        "straggler": "none" if o["straggler_rank"] == -1 else f"{o['straggler_ms']:g} ms {o['straggler_kind']}",
        "straggler_rank": (summary.get("straggler") or {}).get("rank"),
        "step_ms": summary["step_ms"],
        "step_ms_per_rank": [round(r["median_step_ms"], 2) for r in ranks],
        "state_mb_per_rank": max(r["state_bytes"]["total"] for r in ranks) / 1e6,
        "peak_gb_per_rank": max(peaks) / 1e9 if all(isinstance(p, (int, float)) for p in peaks) else None,
        "device": summary["device"],
    }


def runs_table(*folders_or_summaries: str | os.PathLike | dict[str, Any]) -> pd.DataFrame:
    """Runs side by side, one row each (:func:`summary_row`): folders, or summaries already read."""
    if not folders_or_summaries:
        raise ValueError("runs_table needs at least one run folder (or summary)")
    rows = [summary_row(s if isinstance(s, dict) else run_summary(s)) for s in folders_or_summaries]
    return pd.DataFrame(rows)
