"""The Hub, its cache and the ``kernels`` library's own errors, in plain words (notebook 05)."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd
import torch

from ..measure.timing import readable_seconds
from ..paths import REPO_ROOT

LIGER_REPO = "kernels-community/liger-kernels"
LIGER_VERSION = 1
LIGER_LAYER = "LigerGEGLUMLP"
LIGER_PACKAGE = "liger-kernel"
LIGER_IMPORT = "liger_kernel"
LIGER_PACKAGE_LAYER = "liger_kernel.transformers.geglu"
COURSE_KERNEL_REPO = REPO_ROOT / "local_kernels" / "course-geglu"
COURSE_LAYER = "CourseGeGLUMLP"
SOURCES: tuple[str, ...] = ("hub", "cache", "package", "local")

_TRUST_ERROR = "could not verify publisher trust status"
_OFFLINE_CACHE_MISS = "is not available in the local cache"
_NO_SNAPSHOT = "Cannot find a local snapshot"
_NO_VARIANT = "Cannot find a build variant"
_KERNELS_LOGGERS = ("kernels", "huggingface_hub")


# where the Hub and the cache are


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def offline_requested() -> bool:
    """True when ``HF_HUB_OFFLINE`` is set (in the environment or in ``huggingface_hub`` itself)."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE) or _env_true("HF_HUB_OFFLINE")


@contextlib.contextmanager
def offline_mode() -> Iterator[None]:
    """Offline mode for the ``kernels``/``huggingface_hub`` calls inside: the environment variable alone changes
    nothing once ``huggingface_hub`` is imported, so its constant is set too."""
    from huggingface_hub import constants

    old_constant = constants.HF_HUB_OFFLINE
    old_env = os.environ.get("HF_HUB_OFFLINE")
    constants.HF_HUB_OFFLINE = True
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = old_constant
        if old_env is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = old_env


def cache_dir() -> Path:
    """The folder ``kernels`` downloads Hub kernels into: ``$KERNELS_CACHE``, else the Hugging Face hub cache."""
    from huggingface_hub import constants

    return Path(os.environ.get("KERNELS_CACHE") or constants.HF_HUB_CACHE)


def cached_versions(repo_id: str = LIGER_REPO) -> dict[int, str]:
    """Versions of a Hub kernel in the local cache ``{version: commit}``, from ``refs/v<N>`` (files only)."""
    from huggingface_hub.file_download import repo_folder_name

    if not isinstance(repo_id, str) or repo_id.count("/") != 1:
        raise ValueError(f"repo_id must look like 'owner/name', got {repo_id!r}")
    found: dict[int, str] = {}
    for repo_type in ("kernel", "model"):  # kernels also reads the legacy "model" layout
        refs = cache_dir() / repo_folder_name(repo_id=repo_id, repo_type=repo_type) / "refs"
        if not refs.is_dir():
            continue
        for ref in refs.iterdir():
            if ref.is_file() and ref.name.startswith("v") and ref.name[1:].isdigit():
                found.setdefault(int(ref.name[1:]), ref.read_text().strip())
    return dict(sorted(found.items()))


@dataclass(frozen=True)
class HubStatus:
    """Whether the Hugging Face Hub answered a short probe, and why not."""

    online: bool
    reason: str
    endpoint: str
    seconds: float

    def __bool__(self) -> bool:
        return self.online


def hub_status(timeout: float = 3.0, endpoint: str | None = None) -> HubStatus:
    """Probe the Hub with one HEAD request in a daemon thread (name resolution ignores socket timeouts); any HTTP
    answer counts as online. ``HF_HUB_OFFLINE=1`` answers at once."""
    from huggingface_hub import constants

    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 60:
        raise ValueError(f"timeout must be a number of seconds in (0, 60], got {timeout!r}")
    url = endpoint or constants.ENDPOINT
    start = time.perf_counter()
    if offline_requested():
        return HubStatus(False, "HF_HUB_OFFLINE=1 is set: the Hub is not asked", url, 0.0)
    result: dict[str, Any] = {}

    def probe() -> None:
        try:
            from huggingface_hub.utils import get_session

            response = get_session().head(url, timeout=timeout, follow_redirects=False)
            result["status"] = response.status_code
        except Exception as err:  # any failure to connect means "offline" for the loader
            result["error"] = f"{type(err).__name__}: {err}"

    thread = threading.Thread(target=probe, name="hub-probe", daemon=True)
    thread.start()
    thread.join(timeout + 0.5)
    seconds = time.perf_counter() - start
    if "status" in result:
        return HubStatus(True, f"{url} answered (HTTP {result['status']}) in {seconds:.2f} s", url, seconds)
    if "error" in result:
        return HubStatus(False, f"no connection to {url}: {result['error']}", url, seconds)
    return HubStatus(False, f"no answer from {url} within {timeout:g} s", url, seconds)


# errors


def explain_kernels_error(
    err: BaseException, repo_id: str = LIGER_REPO, version: int | None = LIGER_VERSION
) -> str | None:
    """What a ``kernels.get_kernel`` error means in plain words (None when not recognised): offline, "could not
    verify publisher trust status" means the Hub was not reached, not that the repository is untrusted."""
    text = str(err)
    which = f"{repo_id}" + (f" version {version}" if version is not None else "")
    if _TRUST_ERROR in text:
        return (
            f"the Hugging Face Hub could not be reached. kernels asks the Hub whether the publisher of "
            f"{repo_id} is trusted before anything else, so a network failure is reported as a trust "
            "error: the repository is not untrusted. Offline, load from the local cache with "
            "HF_HUB_OFFLINE=1 (after one download while online: python scripts/prefetch_kernels.py prefetch), "
            "or from a local kernel repository with kernels.get_local_kernel(path)."
        )
    if _OFFLINE_CACHE_MISS in text or _NO_SNAPSHOT in text:
        have = cached_versions(repo_id) if repo_id.count("/") == 1 else {}
        again = "(python scripts/prefetch_kernels.py prefetch, or kernels.get_kernel with network)"
        if version in have:  # the branch is recorded, its files are not: say that, not "missing"
            return (
                f"the local cache ({cache_dir()}) records {which} as commit {have[version][:12]}, but the files "
                f"of that commit for this machine are missing or incomplete there. Download it again while "
                f"online {again}."
            )
        return (
            f"{which} is not in the local cache ({cache_dir()}; cached versions: "
            f"{', '.join(f'v{v}' for v in have) or 'none'}). Download it once while online {again}."
        )
    if _NO_VARIANT in text:
        detail = "; ".join(line.strip() for line in text.splitlines()[2:] if line.strip())[:400]
        return (
            f"{which} has no build for this machine (torch {torch.__version__}, "
            f"{'CUDA ' + str(torch.version.cuda) if torch.version.cuda else 'CPU-only'}): {detail}"
        )
    if type(err).__name__ == "OfflineModeIsEnabled":
        return "HF_HUB_OFFLINE=1 is set, and this call needed the network"
    return None


def describe_error(err: BaseException, repo_id: str, version: int | None) -> str:
    explained = explain_kernels_error(err, repo_id, version)
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    if explained:
        return f"{explained} (kernels said: {type(err).__name__}: {first[:160]}{'...' if len(first) > 160 else ''})"
    return f"{type(err).__name__}: {first[:500]}"


class _LogCapture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def capture_library_warnings() -> Iterator[list[str]]:
    """Collect the warnings kernels/huggingface_hub log during a call (shown as 'library notes')."""
    handler = _LogCapture()
    loggers = [logging.getLogger(n) for n in _KERNELS_LOGGERS]
    saved = [(lg, lg.propagate) for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.propagate = False
    try:
        yield handler.messages
    finally:
        for lg, propagate in saved:
            lg.removeHandler(handler)
            lg.propagate = propagate


# a kernel repository on disk


def describe_repository(path: str | os.PathLike = COURSE_KERNEL_REPO, backend: str | None = None) -> pd.DataFrame:
    """The build variants of a kernel repository, with ``kernels``' own verdict for this machine and their metadata."""
    from kernels import Metadata, VariantAccepted
    from kernels.variants import get_variants_local, resolve_variants

    build = Path(path) / "build"
    if not build.is_dir():
        raise FileNotFoundError(
            f"{path} is not a kernel repository: it has no build/ folder "
            "(the kernels layout is build/<variant>/metadata.json plus a Python package)"
        )
    accepted, decisions = resolve_variants(get_variants_local(build), backend)
    preferred = accepted[0].variant_str if accepted else None
    verdict = {
        d.variant.variant_str: ("loaded here" if d.variant.variant_str == preferred else "compatible")
        if isinstance(d, VariantAccepted)
        else f"rejected: {d.reason}"
        for d in decisions
    }
    rows = []
    for folder in sorted(p for p in build.iterdir() if p.is_dir()):
        meta = Metadata.read_from_file(folder / "metadata.json") if (folder / "metadata.json").is_file() else None
        rows.append(
            {
                "variant": folder.name,
                "decision": verdict.get(folder.name, "not a variant name kernels knows"),
                "name": str(meta.name) if meta else None,
                "version": meta.version if meta else None,
                "backend": str(meta.backend.backend_type).split(".")[-1].lower() if meta else None,
                "license": meta.license if meta else None,
                "files": ", ".join(
                    str(f.relative_to(folder))
                    for f in sorted(folder.rglob("*"))
                    if f.is_file() and "__pycache__" not in f.parts
                ),
            }
        )
    return pd.DataFrame(rows)


# the plain library call, for the lesson


@dataclass(frozen=True)
class RawCall:
    """What a plain ``kernels.get_kernel`` call did: the module, or the library's error and what it means."""

    ok: bool
    seconds: float
    error: str | None = None
    explanation: str | None = None
    module: ModuleType | None = None

    def __repr__(self) -> str:
        if self.ok:
            return f"<get_kernel worked in {readable_seconds(self.seconds)}: {self.module}>"
        return (
            f"<get_kernel failed after {readable_seconds(self.seconds)}>\nthe library says: {self.error}\n"
            f"what it means: {self.explanation or 'not recognised'}"
        )


def raw_get_kernel(repo_id: str = LIGER_REPO, version: int = LIGER_VERSION, timeout: float = 30.0) -> RawCall:
    """``kernels.get_kernel(repo_id, version=version)`` as a learner would call it, in a daemon thread given up
    after `timeout` seconds so a hanging network cannot hang the notebook."""
    import kernels

    result: dict[str, Any] = {}

    def call() -> None:
        try:
            result["module"] = kernels.get_kernel(repo_id, version=version)
        except Exception as err:
            result["error"] = err

    start = time.perf_counter()
    thread = threading.Thread(target=call, name="raw-get-kernel", daemon=True)
    with capture_library_warnings():
        thread.start()
        thread.join(timeout)
    seconds = time.perf_counter() - start
    if "module" in result:
        return RawCall(True, seconds, module=result["module"])
    if "error" in result:
        err = result["error"]
        return RawCall(False, seconds, f"{type(err).__name__}: {err}", explain_kernels_error(err, repo_id, version))
    return RawCall(
        False,
        seconds,
        f"no answer within {timeout:g} s",
        "the network hangs: set HF_HUB_OFFLINE=1 to use the cache without asking the Hub",
    )
