"""A run's folder read back: its traces as one run, its ``summary.json`` (what the ranks measured without
the profiler), runs side by side."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pandas as pd

from ..trace.json_text import JSON_ERRORS, loads, too_deep
from ..trace.ranks import MultiRankTrace, load_traces
from .options import SUMMARY

_RANK_FILE = re.compile(r"^rank(\d+)\.json(\.gz)?$")
# A summary is a few kilobytes of numbers per rank; a bigger file is not one launch_run wrote.
MAX_SUMMARY_BYTES = 16 << 20


def _as_folder(folder: str | os.PathLike) -> Path:
    if not isinstance(folder, (str, os.PathLike)):
        raise TypeError(f"expected a run's folder (str or pathlib.Path), got {type(folder).__name__}")
    path = Path(folder)
    if not path.is_dir():
        raise FileNotFoundError(f"{path} is not a folder; launch_run(...) returns the folder of a run")
    return path


def _rank_files(path: Path) -> list[tuple[int, Path]]:
    """(rank from the name, file) of every ``rank<r>.json[.gz]``, by rank; ValueError for two files of one rank."""
    found = sorted((int(m.group(1)), p) for p in path.iterdir() if (m := _RANK_FILE.match(p.name)))
    if not found:
        raise FileNotFoundError(f"{path} holds no rank<r>.json.gz trace: was the run profiled?")
    for (r, a), (s, b) in zip(found, found[1:]):
        if r == s:
            raise ValueError(
                f"{str(a)!r} and {str(b)!r} are two files for rank {r}: which one holds its events is unknown "
                "(reading both would count its work twice, a straggler that never was). Move or delete one of them."
            )
    return found


def rank_files(folder: str | os.PathLike) -> list[Path]:
    """The run's trace files, ``rank0.json.gz`` first (numeric order: rank10 after rank9)."""
    return [p for _, p in _rank_files(_as_folder(folder))]


def run_summary(folder: str | os.PathLike) -> dict[str, Any]:
    """The run's ``summary.json`` (written by rank 0 at the end of the run); ValueError when it is not one."""
    path = _as_folder(folder) / SUMMARY
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: the run did not finish (see launch.log beside it)")
    if path.stat().st_size > MAX_SUMMARY_BYTES:
        raise ValueError(
            f"{path} holds {path.stat().st_size:,} bytes, more than a run's summary ({MAX_SUMMARY_BYTES:,} at most): "
            "not the file launch_run writes. Delete it, or run the launch again."
        )
    try:
        summary = loads(path.read_bytes())
    except (RecursionError, *JSON_ERRORS) as err:
        why = "nests too deeply" if too_deep(err) else f"is not valid JSON ({type(err).__name__}: {str(err)[:120]})"
        raise ValueError(
            f"{path} {why}: not the summary launch_run writes. Delete it, or run the launch again."
        ) from None
    if not isinstance(summary, dict):
        raise ValueError(
            f"{path} holds a JSON {type(summary).__name__}, not an object: not the summary launch_run writes. "
            "Delete it, or run the launch again."
        )
    return summary


def _run_label(folder: Path, present: list[int]) -> tuple[str, list[str]]:
    """The label of a run (its name, ranks, backend from the summary) and notes when ranks are missing."""
    try:
        summary = run_summary(folder)
    except (FileNotFoundError, ValueError):
        summary = {}
    name = summary.get("run") if isinstance(summary.get("run"), str) else folder.name
    world = summary.get("world_size")
    world = world if isinstance(world, int) and not isinstance(world, bool) and world > 0 else max(present) + 1
    backend = summary.get("backend") if isinstance(summary.get("backend"), str) else None
    missing = sorted(set(range(world)) - set(present))
    ranks = f"{world} ranks" if not missing else f"ranks {', '.join(map(str, present))} of {world}"
    notes = [f"no trace file for rank {', '.join(map(str, missing))} in {folder}"] if missing else []
    return f"{name} ({ranks}{', ' + backend if backend else ''})", notes


def load_run(
    folder: str | os.PathLike,
    label: str | None = None,
    max_bytes: int | None = None,
    max_events: int | None = None,
    max_arg_bytes: int | None = None,
) -> MultiRankTrace:
    """Every ``rank<r>.json.gz`` of a run's folder as one MultiRankTrace labelled with the run's name."""
    path = _as_folder(folder)
    found = _rank_files(path)
    present = [r for r, _ in found]
    run_label, notes = _run_label(path, present)
    run = load_traces(
        [p for _, p in found],
        label=label or run_label,
        max_bytes=max_bytes,
        max_events=max_events,
        max_arg_bytes=max_arg_bytes,
        ranks=present,
        call="helpers.load_run(folder",
    )
    if notes:  # the summary knows the world size: its note replaces the one guessed from the ranks present
        run._notes = notes + [n for n in run._notes if not n.startswith("ranks present:")]
    return run


def summary_row(summary: dict[str, Any]) -> dict[str, Any]:
    """One run as a table row: what it was, its step time, memory and state per rank."""
    try:
        return _summary_row(summary)
    except (KeyError, TypeError, IndexError, AttributeError, ValueError) as err:
        raise ValueError(
            f"a run summary without the fields launch_run writes ({type(err).__name__}: {str(err)[:120]}): "
            "pass the folder of a finished launch_run, or run_summary(folder) of one."
        ) from None


def _summary_row(summary: dict[str, Any]) -> dict[str, Any]:
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
