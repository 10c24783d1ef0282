"""The Hub kernel cache checked against a record of its files before anything is imported (importing runs
its code): extra files (``.pyc`` among them), other content and stray links are refused."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from ..paths import REPO_ROOT, file_sha256
from .hub_cache import cache_dir

# Per machine (it describes this machine's cache), git-ignored, outside the cache it vouches for.
CACHE_RECORD = REPO_ROOT / "build" / "kernel-cache-record.json"
_NEVER_RECORDED = ("__pycache__",)


class UntrustedKernelError(ValueError):
    """A kernel failed a trust check: unknown publisher, another commit than the pin, or changed files."""


def repo_cache_folder(repo_id: str) -> Path:
    """The cache folder of `repo_id` (the "kernel" layout, else the legacy "model" one kernels also reads)."""
    from huggingface_hub.file_download import repo_folder_name

    folders = [cache_dir() / repo_folder_name(repo_id=repo_id, repo_type=t) for t in ("kernel", "model")]
    return next((f for f in folders if f.is_dir()), folders[0])


def _entries(snapshot: Path) -> Iterator[tuple[str, Path]]:
    """Every entry under `snapshot` that is not a plain folder, links not followed: (relative path, path)."""
    for top, dirs, files in os.walk(snapshot, followlinks=False):
        for name in sorted(dirs + files):
            path = Path(top) / name
            if name in dirs and not path.is_symlink():
                continue
            yield path.relative_to(snapshot).as_posix(), path


def _load_record() -> dict:
    try:
        record = json.loads(CACHE_RECORD.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        raise UntrustedKernelError(f"the kernel cache record {CACHE_RECORD} cannot be read ({err})") from err
    return record if isinstance(record, dict) else {}


def record_snapshot(repo_id: str, commit: str) -> Path:
    """Record the SHA-256 of every file of the just-downloaded `commit` (no compiled files; links only to
    content-named blobs); returns the record's path."""
    folder = repo_cache_folder(repo_id)
    snapshot = folder / "snapshots" / commit
    if not snapshot.is_dir():
        raise FileNotFoundError(f"{snapshot} does not exist: nothing of {repo_id} commit {commit} to record")
    files = {}
    for rel, path in _entries(snapshot):
        if set(Path(rel).parts) & set(_NEVER_RECORDED) or rel.endswith(".pyc"):
            continue
        _check_link(folder, rel, path)
        if not path.is_file():
            raise UntrustedKernelError(f"{path} is not a file (a link to a folder?): refusing to record it")
        data = path.read_bytes()
        if path.is_symlink():
            blob = Path(os.path.realpath(path)).name
            named = {hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest(), hashlib.sha256(data).hexdigest()}
            if blob not in named:
                raise UntrustedKernelError(f"{path}: its blob {blob[:12]} does not hold the content it is named by")
        files[rel] = hashlib.sha256(data).hexdigest()
    record = _load_record()
    record.setdefault(repo_id, {})[commit] = files
    CACHE_RECORD.parent.mkdir(parents=True, exist_ok=True)
    tmp = CACHE_RECORD.with_name(f".{CACHE_RECORD.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, CACHE_RECORD)
    return CACHE_RECORD


def _check_link(folder: Path, rel: str, path: Path) -> None:
    if not path.is_symlink():
        return
    target = Path(os.path.realpath(path))
    if not target.is_relative_to((folder / "blobs").resolve()):
        raise UntrustedKernelError(
            f"the cached file {path} is a link to {target}, outside the cache's blobs ({folder / 'blobs'})"
        )


def verify_snapshot(repo_id: str, commit: str) -> str:
    """Check the cached `commit` against :data:`CACHE_RECORD` before import; UntrustedKernelError names the first bad path."""
    folder = repo_cache_folder(repo_id)
    snapshot = folder / "snapshots" / commit
    again = (
        f"Delete {folder} and download it again while online (python scripts/prefetch_kernels.py prefetch), "
        "which records its files"
    )
    recorded = _load_record().get(repo_id, {}).get(commit)
    if not isinstance(recorded, dict):
        raise UntrustedKernelError(
            f"{repo_id} commit {commit[:12]} is in the cache ({snapshot}) but {CACHE_RECORD} holds no record of its "
            f"files, so nothing says what they should contain. {again}."
        )
    count = 0
    for rel, path in _entries(snapshot):
        if rel not in recorded:
            what = "compiled Python code" if (rel.endswith(".pyc") or "__pycache__" in rel) else "a file"
            raise UntrustedKernelError(
                f"{path}: {what} that was not there when the kernel was downloaded (Python would run it). "
                f"Delete it if you made it yourself; otherwise: {again}."
            )
        _check_link(folder, rel, path)
        if not path.is_file():
            raise UntrustedKernelError(f"{path} is not a file (a link to a folder, or a dangling link). {again}.")
        if file_sha256(path) != recorded[rel]:
            raise UntrustedKernelError(
                f"the cached file {path} no longer matches its content hash recorded when it was downloaded "
                f"({recorded[rel][:12]}): the cache was modified. {again}."
            )
        count += 1
    return f"{count} files match the content hashes recorded when they were downloaded"


@contextlib.contextmanager
def no_bytecode() -> Iterator[None]:
    """Imports inside write no ``__pycache__`` into the (checked, read-only in spirit) cache."""
    old = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        yield
    finally:
        sys.dont_write_bytecode = old
