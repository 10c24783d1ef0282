"""The file that lets every lesson of a session read one ceiling set per machine: the first measurement of a
device is kept in a file (the course's local traces folder), and later lessons (separate processes) reuse it while it is fresh.
Re-measuring on a shared GPU moves the roofs by a few per cent, which would make lessons disagree."""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# The file's path; unset, each process measures its own set. The engine knows no repository: the course's lesson
# layer (helpers.lessons) sets it to its local traces folder, and the benchmarks a lesson starts inherit it.
CACHE_ENV = "COURSE_CEILINGS_CACHE"
CACHE_FILE_NAME = "ceilings_cache.json"
# A workshop session lasts a few hours; a set older than this may describe another state of the machine
# (clocks, other tenants, a driver update), so it is measured again.
CACHE_MAX_AGE_S = 4 * 3600.0


def cache_path() -> Path | None:
    """Where the cached ceilings live: ``$COURSE_CEILINGS_CACHE`` (read at call time), or None for no file."""
    value = os.environ.get(CACHE_ENV, "").strip()
    return Path(value).expanduser() if value else None


def who_measures() -> str | None:
    """A name for the process measuring: ``lesson NN`` inside a course notebook (Jupyter's ``JPY_SESSION_NAME``,
    inherited by the benchmarks a lesson starts), else the script's file name, else None."""
    session = os.environ.get("JPY_SESSION_NAME", "")
    match = re.match(r"(\d\d)_", Path(session).name) if session else None
    if match:
        return f"lesson {match.group(1)}"
    script = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    if script and not script.startswith(("ipykernel", "-")) and script.endswith(".py"):
        return script
    return None


def read_entry(
    path: Path, device: str, torch_version: str, now: _dt.datetime, max_age_s: float = CACHE_MAX_AGE_S
) -> tuple[dict[str, Any] | None, str]:
    """The cached ceilings dict for ``device`` when fresh (measured under ``torch_version`` less than
    ``max_age_s`` before ``now``), and a note saying why not otherwise ("" for no file or no entry: nothing to
    say). A file that cannot be read never raises: its note says so."""
    if not isinstance(device, str) or not device:
        raise TypeError(f"device must be a non-empty str, got {device!r}")
    if not isinstance(max_age_s, (int, float)) or max_age_s <= 0:
        raise ValueError(f"max_age_s must be a positive number, got {max_age_s!r}")
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return None, ""
    except OSError as err:
        return None, f"could not read {path} ({err}); measuring again"
    try:
        data = json.loads(text)
        if not isinstance(data, Mapping):
            raise ValueError("not a JSON object")
        entry = data.get(device)
        if entry is None:
            return None, ""
        if not isinstance(entry, Mapping) or not isinstance(entry.get("ceilings"), Mapping):
            raise ValueError(f"the entry for {device!r} holds no ceilings")
        ceilings = dict(entry["ceilings"])
        taken = _dt.datetime.fromisoformat(str(ceilings.get("recorded")))
    except ValueError as err:
        return None, f"the cached ceilings in {path} are unreadable ({err}); measuring again"
    if ceilings.get("torch_version") != torch_version:
        return None, ""
    if (taken.tzinfo is None) != (now.tzinfo is None):  # a hand-edited time with a zone: compare as local times
        taken, now = taken.replace(tzinfo=None), now.replace(tzinfo=None)
    age_s = (now - taken).total_seconds()
    if not 0 <= age_s < max_age_s:
        return None, ""
    return ceilings, ""


def write_entry(path: Path, device: str, ceilings: Mapping[str, Any]) -> str:
    """Store ``ceilings`` (a ``Ceilings.as_dict()``) as ``device``'s entry, keeping the other devices' entries of a
    readable file; atomic, so a lesson reading at the same time sees the old file or the new one. Returns a note
    when the file could not be written ("" otherwise): a read-only folder costs a re-measurement, not a crash."""
    if not isinstance(ceilings, Mapping):
        raise TypeError(f"ceilings must be a dict, got {type(ceilings).__name__}")
    path = Path(path)
    try:
        old = json.loads(path.read_text())
        data = dict(old) if isinstance(old, Mapping) else {}
    except (OSError, ValueError):
        data = {}
    data[device] = {"ceilings": dict(ceilings)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".ceilings-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, path)
    except OSError as err:
        return f"could not write {path} ({err}): the next lesson measures its own ceilings"
    return ""
