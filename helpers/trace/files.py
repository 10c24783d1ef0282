"""Reading trace files (``.json`` or ``.json.gz``) as untrusted input: decompressed bytes are counted against
`max_bytes` (a gzip bomb never fills memory), damaged JSON is reported with its byte offset."""

from __future__ import annotations

import gzip
import os
import stat
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from .json_text import BOM, NON_SPACE, check_start, parse_document

# Default limit on a trace's JSON text after decompression, well above the course's biggest traces:
# a file past it is a gzip bomb, a damaged file, or one to load on purpose with a larger `max_bytes`.
MAX_TEXT_BYTES = 512 << 20
# A gzip file whose text grows past this many times the compressed bytes read so far is refused
# (once past _RATIO_GRACE bytes of text): real traces compress far less, deflate can reach ~1000.
MAX_RATIO = 100
_RATIO_GRACE = 32 << 20


def as_path(path: str | os.PathLike) -> Path:
    """`path` as a Path; TypeError for anything that is not a path."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"expected a file path (str or pathlib.Path), got {type(path).__name__}")
    return Path(path)


def check_file(p: Path) -> None:
    """FileNotFoundError or ValueError in words when `p` is not a readable file (missing, a folder, a link loop, a pipe)."""
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        if p.is_symlink():
            raise FileNotFoundError(
                f"trace file {str(p)!r} is a symbolic link to {os.readlink(p)!r}, which does not exist"
            ) from None
        raise FileNotFoundError(
            f"trace file {str(p)!r} does not exist. Check the path; reference traces live in the "
            "repository's traces/ folder (see helpers.reference_trace_path)."
        ) from None
    except OSError as err:  # a loop of symbolic links, a name too long, no permission on a folder ...
        raise ValueError(f"trace file {str(p)!r} cannot be opened: {err.strerror or err}") from None
    if stat.S_ISDIR(mode):
        raise ValueError(f"{str(p)!r} is a folder, not a trace file: pass the .json or .json.gz file inside it")
    if not stat.S_ISREG(mode):  # a pipe would block forever waiting for a writer, a device never end
        raise ValueError(
            f"{str(p)!r} is not a regular file (a pipe, a socket or a device): save the trace to a file first"
        )


def check_limit(max_bytes: int | None) -> int:
    """The reading limit in bytes: `max_bytes`, or :data:`MAX_TEXT_BYTES` for None; ValueError otherwise."""
    if max_bytes is None:
        return MAX_TEXT_BYTES
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise ValueError(f"max_bytes must be a positive number of bytes, got {max_bytes!r}")
    return max_bytes


class TraceTooLargeError(ValueError):
    """A trace is past a stated limit; the message names the option that raises it (re-said by
    :meth:`for_call` for a function that reads traces for another)."""

    def __init__(self, what: str, option: str, suggested: int, call: str = "helpers.load_trace(path") -> None:
        self.what, self.option, self.suggested, self.call = what, option, suggested, call
        super().__init__(
            f"{what}: reading stopped there. A damaged file or a gzip bomb looks like this; a real trace "
            f"that big loads with a larger limit, e.g. {call}, {option}={suggested})."
        )

    def for_call(self, call: str) -> TraceTooLargeError:
        """The same error, advising the option on `call` (e.g. ``"helpers.load_run(folder"``)."""
        return TraceTooLargeError(self.what, self.option, self.suggested, call)


def _damaged_gzip(p: Path, err: BaseException) -> ValueError:
    return ValueError(
        f"{str(p)!r} is a damaged or truncated gzip file ({type(err).__name__}: {err}). "
        "Re-download or re-record the trace; an interrupted copy or save leaves such a file."
    )


def text_size(path: str | os.PathLike) -> int:
    """Bytes of JSON text a file's size fields claim (gzip: its trailer, modulo 4 GiB): an estimate to choose how
    to read, never a limit."""
    p = as_path(path)
    size = p.stat().st_size
    with open(p, "rb") as fh:
        if fh.read(2) != b"\x1f\x8b" or size < 18:
            return size
        fh.seek(-4, os.SEEK_END)
        return max(int.from_bytes(fh.read(4), "little"), size)


class TraceText:
    """The decompressed text of a trace file, read in blocks and counted against `max_bytes`; without an explicit
    `max_bytes`, gzip text outgrowing :data:`MAX_RATIO` times its compressed bytes is refused early too."""

    def __init__(self, path: str | os.PathLike, max_bytes: int | None = None) -> None:
        self.path = as_path(path)
        self.check_ratio = max_bytes is None
        self.max_bytes = check_limit(max_bytes)
        self.count = 0  # decompressed bytes read so far
        self.compressed = False
        self._files: list[BinaryIO] = []

    def __enter__(self) -> TraceText:
        check_file(self.path)
        raw = open(self.path, "rb")
        self._files.append(raw)
        self.compressed = raw.read(2) == b"\x1f\x8b"
        raw.seek(0)
        if self.compressed:
            self._files.append(gzip.GzipFile(fileobj=raw, mode="rb"))
        elif os.fstat(raw.fileno()).st_size > self.max_bytes:
            self._refuse(f"holds more than {self.max_bytes:,} bytes ({self.max_bytes / 2**20:,.0f} MiB) of JSON text")
        return self

    def __exit__(self, *exc: object) -> None:
        for fh in reversed(self._files):
            fh.close()
        self._files.clear()

    def _refuse(self, what: str) -> None:
        raise TraceTooLargeError(f"{str(self.path)!r} {what}", "max_bytes", 4 * self.max_bytes)

    def read(self, size: int) -> bytes:
        """Up to `size` bytes of text (b"" at the end)."""
        try:
            block = self._files[-1].read(size)
        except (EOFError, OSError, zlib.error) as err:
            raise _damaged_gzip(self.path, err) from err
        self.count += len(block)
        if self.count > self.max_bytes:
            self._refuse(
                f"decompresses to more than {self.max_bytes:,} bytes ({self.max_bytes / 2**20:,.0f} MiB) of JSON text"
            )
        if self.compressed and self.check_ratio and self.count > _RATIO_GRACE:
            packed = self._files[0].tell()
            if self.count > MAX_RATIO * packed:
                self._refuse(
                    f"decompresses to more than {MAX_RATIO} times its compressed size ({self.count:,} bytes of "
                    f"text from the first {packed:,} bytes of the file; real traces compress 5 to 30 times)"
                )
        return block

    def blocks(self, size: int) -> Iterator[bytes]:
        while block := self.read(size):
            yield block

    def skip(self, size: int, block: int = 16 << 20) -> None:
        """Read and drop `size` bytes."""
        while size > 0:
            got = self.read(min(size, block))
            if not got:
                raise ValueError(f"{str(self.path)!r} ended {size:,} bytes earlier than when it was loaded")
            size -= len(got)


def read_document(
    path: str | os.PathLike, max_bytes: int | None = None, max_events: int | None = None
) -> dict[str, Any]:
    """Read and parse a trace file; a text holding more than `max_events` events (counted before parsing:
    the dicts are what costs memory) is refused."""
    source = repr(str(path))
    with TraceText(path, max_bytes) as text:
        first = text.read(1 << 20)
        # Something that is not JSON is refused from its first bytes, before the rest is read.
        lead = first[3:] if first.startswith(BOM) else first
        start = NON_SPACE.search(lead)
        if start is not None:
            check_start(lead[start.start() : start.start() + 16], source, len(first) - len(lead) + start.start())
        data = b"".join([first, *text.blocks(16 << 20)])
    # every event is at least '{"ph":"X"},': a shorter text cannot be past the limit
    if max_events is not None and len(data) > 11 * max_events and (n := data.count(b'"ph"')) > max_events:
        raise TraceTooLargeError(
            f"{source} holds {n:,} events (by their 'ph' keys), more than {max_events:,}", "max_events", 4 * max_events
        )
    return parse_document(data, source)


# --------------------------------------------------------------------------- the file a trace came from
@dataclass(frozen=True)
class FileStamp:
    """What identifies one version of a file: size, modification time, inode."""

    size: int
    mtime_ns: int
    inode: int

    @classmethod
    def of(cls, path: str | os.PathLike) -> FileStamp:
        st = os.stat(path)
        return cls(st.st_size, st.st_mtime_ns, st.st_ino)
