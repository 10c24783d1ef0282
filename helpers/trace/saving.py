"""Writing a trace file gzipped and atomically (a temporary file renamed, or hard-linked so two racing saves
cannot both win), never over another file unless asked; dead saves' temporary files are cleaned later."""

from __future__ import annotations

import errno
import gzip
import os
import re
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .files import as_path

# The key of a saved file that holds where its trace came from.
PROVENANCE_KEY = "course_provenance"
_TEMP = re.compile(r"^\.(?P<name>.+)\.incomplete-(?P<pid>\d+)-[0-9a-f]{8}\.tmp$")
# A temporary file of a process that is gone is removed once it is this old (seconds); the age
# check spares a save running on another machine that shares the folder.
STALE_AFTER_S = 60.0
_FOLDER = "a folder has that name; give a file name ending in .json.gz"
# errno values for which a hard link cannot be made on this file system (then: exclusive create + rename)
_NO_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS}


def temp_name(target: Path) -> Path:
    """Where the bytes for `target` are written before they get its name."""
    return target.with_name(f".{target.name}.incomplete-{os.getpid()}-{secrets.token_hex(4)}.tmp")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: a process of another user holds that pid
        return True
    return True


def clean_stale_temp_files(folder: str | os.PathLike, stale_after_s: float = STALE_AFTER_S) -> list[Path]:
    """Delete the temporary files of saves whose process is gone and that are older than `stale_after_s`."""
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        match = _TEMP.match(entry.name)
        if not match or int(match["pid"]) == os.getpid() or _alive(int(match["pid"])):
            continue
        try:
            if now - entry.stat(follow_symlinks=False).st_mtime < stale_after_s or not entry.is_file():
                continue
            os.unlink(entry.path)
        except OSError:
            continue
        removed.append(Path(entry.path))
    return removed


def _why(err: OSError, target: Path) -> str:
    if err.errno in (errno.EACCES, errno.EPERM):
        return f"no permission to write in {str(target.parent)!r}; save somewhere you can write"
    if err.errno == errno.EISDIR:
        return _FOLDER
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return "the disk (or your quota) is full"
    if err.errno == errno.EROFS:
        return "the file system is read-only"
    if err.errno == errno.ENOTDIR:
        return f"a file stands where a folder of the path {str(target.parent)!r} should be"
    return err.strerror or str(err)


def _write_error(err: OSError, target: Path) -> OSError:
    """The same kind of OSError, saying which target could not be written and why."""
    return type(err)(err.errno, f"could not save the trace to {str(target)!r}: {_why(err, target)}")


def _place(tmp: Path, target: Path, overwrite: bool) -> None:
    """Give the finished temporary file the target's name, atomically."""
    if overwrite:
        os.replace(tmp, target)
        return
    try:
        os.link(tmp, target)  # FileExistsError when the name is taken, even by a save racing this one
    except OSError as err:
        if err.errno not in _NO_LINKS:
            raise
        # No hard links on this file system: claim the name with an exclusive create, then rename over it.
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        try:
            os.replace(tmp, target)
        except BaseException:
            _discard(target)
            raise
        return
    os.unlink(tmp)


def write_gzip_atomic(data: bytes | Iterable[bytes], path: str | os.PathLike, overwrite: bool = True) -> Path:
    """Write `data` (bytes or blocks of bytes) gzipped to `path` atomically; with ``overwrite=False`` an existing
    file, even one created meanwhile, raises FileExistsError."""
    target = as_path(path)
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, f"could not save the trace to {str(target)!r}: {_FOLDER}")
    if not overwrite and os.path.lexists(target):
        raise FileExistsError(errno.EEXIST, f"{str(target)!r} exists; pass overwrite=True or choose another name")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise _write_error(err, target) from err
    clean_stale_temp_files(target.parent)
    tmp = temp_name(target)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "wb") as raw:
            with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as gz:
                for block in [data] if isinstance(data, (bytes, bytearray, memoryview)) else data:
                    gz.write(block)
            raw.flush()
            os.fsync(raw.fileno())
        _place(tmp, target, overwrite)
    except FileExistsError as err:
        _discard(tmp)
        raise FileExistsError(
            errno.EEXIST, f"{str(target)!r} exists (another save created it meanwhile); nothing was overwritten"
        ) from err
    except OSError as err:
        _discard(tmp)
        if err.errno is None:  # raised with its own words (e.g. by the data: its source file vanished)
            raise
        raise _write_error(err, target) from err
    except BaseException:
        _discard(tmp)
        raise
    return target


def _discard(tmp: Path) -> None:
    try:
        os.unlink(tmp)
    except OSError:
        pass


@dataclass
class SavePolicy:
    """Where :meth:`Trace.save` writes by default and which folders are read-only: the engine knows no
    repository, so whoever ships reference traces configures it (:func:`configure_saving`)."""

    default_dir: Path | None = None
    reference_dirs: tuple[Path, ...] = ()

    def is_reference(self, path: Path) -> bool:
        """True when `path` lies inside a reference folder and outside the default (own traces) folder."""
        resolved = Path(path).resolve()
        own = self.default_dir.resolve() if self.default_dir else None
        for folder in self.reference_dirs:
            if resolved.is_relative_to(folder.resolve()) and not (own and resolved.is_relative_to(own)):
                return True
        return False


SAVING = SavePolicy()


def configure_saving(default_dir: Path | None, reference_dirs: tuple[Path, ...] = ()) -> None:
    """Set where traces are saved by default and which folders hold read-only reference traces."""
    SAVING.default_dir = Path(default_dir) if default_dir is not None else None
    SAVING.reference_dirs = tuple(Path(d) for d in reference_dirs)
