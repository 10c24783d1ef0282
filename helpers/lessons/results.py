"""The one reader of recorded benchmark results (``benchmarks/results/*.json``): it derives nothing, so a lesson
shows the tables the benchmark stored and judged."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from ..measure.ceilings import Ceilings, ceilings_from_dict
from ..paths import REPO_ROOT

RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
SCHEMA_KEY = "tables"
MAX_RESULTS_BYTES = 64 * 2**20


class Results:
    """A results file: its provenance and its stored tables (``table(name)``)."""

    def __init__(self, data: dict[str, Any], path: Path | None = None) -> None:
        if not isinstance(data, dict):
            raise TypeError(f"a results file holds a JSON object, not {type(data).__name__}")
        tables = data.get(SCHEMA_KEY)
        if not isinstance(tables, dict):
            raise ValueError(
                f"{path or 'these results'} store no tables: write them with `python -m benchmarks ...` "
                "(or `python -m benchmarks rejudge` for an older file)"
            )
        self.data = data
        self.path = path
        self.name = path.stem if path else str(data.get("benchmark", "results"))

    @property
    def provenance(self) -> dict[str, Any]:
        """Where and when the numbers were measured (device, torch, date, commit ...)."""
        prov = self.data.get("provenance")
        return dict(prov) if isinstance(prov, dict) else {}

    @property
    def label(self) -> str:
        """e.g. "NVIDIA H200, torch 2.11.0+cu130, 2026-12-01 (recorded)"."""
        p = self.provenance
        parts = [str(p.get("device") or "unknown device")]
        if p.get("torch"):
            parts.append(f"torch {p['torch']}")
        if p.get("date"):
            parts.append(str(p["date"])[:10])
        live = self.data.get("live")
        return ", ".join(parts) + (" (measured live)" if live else " (recorded)")

    @property
    def tables(self) -> list[str]:
        """Names of the stored tables."""
        return list(self.data[SCHEMA_KEY])

    def about(self, name: str) -> str:
        """What a stored table holds, in a sentence."""
        return str(self._stored(name).get("about", ""))

    def _stored(self, name: str) -> dict[str, Any]:
        tables = self.data[SCHEMA_KEY]
        if name not in tables:
            raise KeyError(f"{self.name} has no table {name!r}; its tables: {', '.join(tables) or 'none'}")
        stored = tables[name]
        if not isinstance(stored, dict) or not isinstance(stored.get("columns"), list):
            raise ValueError(f"{self.name}: table {name!r} is not a {{columns, rows}} object")
        return stored

    def table(self, name: str) -> pd.DataFrame:
        """A stored table as a DataFrame, exactly as the file holds it (missing values as NaN/None)."""
        stored = self._stored(name)
        columns, rows = stored["columns"], stored.get("rows", [])
        if not isinstance(rows, list) or any(not isinstance(r, list) or len(r) != len(columns) for r in rows):
            raise ValueError(f"{self.name}: table {name!r} has rows that do not match its {len(columns)} columns")
        frame = pd.DataFrame(rows, columns=columns)
        frame.attrs["results"] = self.label
        frame.attrs["about"] = stored.get("about", "")
        return frame

    def value(self, table: str, column: str, **where: Any) -> Any:
        """One stored cell: the ``column`` of the single row of ``table`` matching ``where`` (column=value)."""
        frame = self.table(table)
        for key, want in where.items():
            if key not in frame.columns:
                raise KeyError(f"{self.name}: table {table!r} has no column {key!r}")
            frame = frame[frame[key] == want]
        if len(frame) != 1:
            raise KeyError(f"{self.name}: {len(frame)} rows of {table!r} match {where}, expected 1")
        return frame[column].iloc[0]

    def card(self, lesson: bool = False) -> pd.DataFrame:
        """Provenance and tables as a two-column table (item, value); with `lesson`, without the rows that serve
        the project, not the learner (see ``PROJECT_ROWS``)."""
        rows = [("results", self.label), ("file", str(self.path) if self.path else "(not saved)")]
        rows += [(k, str(v)) for k, v in self.provenance.items() if v is not None]
        rows += [(f"table {n}", self.about(n)) for n in self.tables]
        if lesson:
            rows = [(k, lesson_command(v) if k == "command" else v) for k, v in rows if k not in PROJECT_ROWS]
        return pd.DataFrame(rows, columns=["item", "value"])

    def __repr__(self) -> str:
        return f"<Results {self.name}: {self.label}; tables {', '.join(self.tables)}>"


def lesson_command(command: str) -> str:
    """A recorded command line with every absolute path cut to its file's name: the recording machine's folders
    mean nothing to a learner, the file's name is what the lesson loads."""
    if not isinstance(command, str):
        raise TypeError(f"command must be a str, got {type(command).__name__}")

    def short(word: str) -> str:
        key, eq, value = word.partition("=") if word.startswith("--") else ("", "", word)
        return key + eq + (Path(value).name if value.startswith("/") else value)

    return " ".join(short(w) for w in command.split())


# Card rows for the project's tests and records (acceptance targets, notes on how a run was recorded).
# the harness's provenance (where the file lies, the command and its budget, the commit) serves the project;
# a lesson's card keeps the device, the versions and the date
PROJECT_ROWS = frozenset({"git_commit_note", "table targets", "file", "command", "git_commit"})


def results_path(name: str | Path) -> Path:
    """The file of a results name (``"h200_mlp_variants"``) or a path given as it is."""
    if isinstance(name, Path) or "/" in str(name) or str(name).endswith(".json"):
        return Path(name)
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a results name or a path, got {name!r}")
    return RESULTS_DIR / f"{name}.json"


def load_results(name: str | Path) -> Results:
    """Used by notebooks 04, 06-09: recorded results by name (``"h200_mlp_variants"``, a file in ``benchmarks/results/``) or path."""
    path = results_path(name)
    if not path.is_file():
        known = sorted(p.stem for p in RESULTS_DIR.glob("*.json"))
        raise FileNotFoundError(f"no results at {path}; recorded: {', '.join(known) or 'none'}")
    size = path.stat().st_size
    if size > MAX_RESULTS_BYTES:
        raise ValueError(f"{path} is {size:,} bytes, over the {MAX_RESULTS_BYTES:,} a results file may hold")
    try:
        data = json.loads(path.read_text(encoding="utf-8"), parse_constant=lambda c: math.nan)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
        raise ValueError(f"{path} is not a readable JSON results file: {err}") from err
    return Results(data, path)


_REFERENCE: dict[str, Ceilings] = {}


def reference_ceilings(name: str = "h200_ceilings") -> Ceilings:
    """Used by notebooks 01, 03, 07, 08: the course's one ceiling set of a recorded GPU (default the H200's), as the results file stores it."""
    if name not in _REFERENCE:
        res = load_results(name)
        row = res.table("ceilings").iloc[0].to_dict()
        row.pop("bandwidth_bytes_per_s", None)
        row["matmul_shape"] = tuple(int(v) for v in str(row["matmul_shape"]).split("x"))
        row = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
        row["copy_bytes"] = None if row.get("copy_bytes") is None else int(row["copy_bytes"])
        row["l2_bytes"] = None if row.get("l2_bytes") is None else int(row["l2_bytes"])
        row["method"] = f"recorded reference ({res.label}): {row['method']}"
        row["source"] = "reference"
        row["recorded"] = str(res.provenance.get("date") or row.get("recorded") or "")[:10] or None
        _REFERENCE[name] = ceilings_from_dict(row)
    return _REFERENCE[name]
