"""What pins the hand-tuned kernel and the checks every loading route makes before trusting it: offline,
``kernels`` skips its trust check, so the publisher and cached files are checked here first."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import importlib.metadata
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from ..paths import REPO_ROOT
from .hub_cache import LIGER_REPO, LIGER_VERSION, cache_dir, cached_versions, offline_requested
from .hub_trust import UntrustedKernelError, no_bytecode, record_snapshot, verify_snapshot

KERNEL_LOCK_DIR = REPO_ROOT / "local_kernels" / "hub-lock"
KERNEL_LOCK_FILE = KERNEL_LOCK_DIR / "kernels.lock"
# Publishers whose kernels the course loads from the cache without asking the Hub. The Hub marks
# kernels-community as a trusted kernel publisher; kernels checks that flag online before a download.
TRUSTED_PUBLISHERS: tuple[str, ...] = ("kernels-community",)
_SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")


@dataclass(frozen=True)
class KernelPin:
    """What one load of a Hub kernel asks for: an exact commit, or (not exact) a version branch."""

    repo_id: str
    version: int
    revision: str | None  # the commit sha when the pin is exact
    pinned_by: str  # where the pin comes from, in words
    lockfile: Path | None = None

    @property
    def exact(self) -> bool:
        return self.revision is not None

    def call(self) -> str:
        """The ``kernels.get_kernel`` call this pin makes, as a learner would write it."""
        how = f'revision="{self.revision}"' if self.exact else f"version={self.version}"
        return f"kernels.get_kernel({self.repo_id!r}, {how})"

    def describe(self) -> str:
        if self.exact:
            return f"{self.repo_id} at commit {self.revision[:12]} ({self.pinned_by})"
        return (
            f"{self.repo_id} version {self.version}: the branch v{self.version}, which its publisher can move "
            f"({self.pinned_by})"
        )


def kernel_pin(
    repo_id: str = LIGER_REPO,
    version: int = LIGER_VERSION,
    revision: str | None = None,
    lockfile: str | os.PathLike | None = None,
) -> KernelPin:
    """The pin for `repo_id`: `revision`, else the lock file, else the branch ``v<version>``; a lock file that
    does not lock `repo_id` at that version is an error, not a fallback."""
    if revision is not None:
        if not isinstance(revision, str) or not _SHA.match(revision):
            raise ValueError(
                f"revision must be a full commit sha (40 or 64 lowercase hex digits), got {revision!r}: "
                "a branch or tag name can move, which is what pinning avoids"
            )
        return KernelPin(repo_id, version, revision, "revision= given to the loader")
    path = Path(lockfile) if lockfile is not None else (KERNEL_LOCK_FILE if KERNEL_LOCK_FILE.is_file() else None)
    if path is None:
        return KernelPin(repo_id, version, None, f"no lock file at {_short(KERNEL_LOCK_FILE)}")
    from kernels.locking import get_locked_kernel_revision

    try:
        locks, dependency = get_locked_kernel_revision(repo_id, path)
    except (OSError, ValueError) as err:
        raise ValueError(f"the kernel lock file {_short(path)} cannot pin {repo_id}: {err}") from err
    locked_version = getattr(dependency.version, "version", None)
    if locked_version != version:
        raise ValueError(
            f"the kernel lock file {_short(path)} locks {repo_id} {dependency.version}, not version {version}: "
            "run `kernels lock` again after changing the version"
        )
    return KernelPin(repo_id, version, locks[dependency].commit, f"lock file {_short(path)}", path)


def _short(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


# trust checks


def check_publisher(repo_id: str) -> str:
    """The publisher of `repo_id` when the course trusts it; UntrustedKernelError otherwise."""
    publisher = repo_id.split("/", 1)[0]
    if publisher not in TRUSTED_PUBLISHERS:
        raise UntrustedKernelError(
            f"{repo_id}: the publisher {publisher!r} is not one the course trusts offline "
            f"({', '.join(TRUSTED_PUBLISHERS)}). Load it online, where kernels asks the Hub whether the "
            "publisher is trusted, or from a local folder you checked yourself."
        )
    return publisher


def snapshot_commit(module: ModuleType) -> tuple[str | None, Path | None]:
    """(commit, variant folder) of a kernel module loaded from the Hugging Face cache, from its path."""
    path = getattr(module, "__file__", None)
    if not path:
        return None, None
    parts = Path(path).parts  # .../snapshots/<commit>/build/<variant>/<package>/__init__.py
    for i in range(len(parts) - 3):
        if parts[i] == "snapshots" and _SHA.match(parts[i + 1]) and parts[i + 2] == "build":
            return parts[i + 1], Path(*parts[: i + 4])
    return None, None


def cached_commit(pin: KernelPin) -> str | None:
    """The commit an offline load of `pin` reads: the pinned one, else the one the cache's ``refs/v<N>`` names."""
    return pin.revision if pin.exact else cached_versions(pin.repo_id).get(pin.version)


def check_cache_before_import(pin: KernelPin) -> tuple[str | None, str]:
    """Before ``kernels`` imports from the cache: check the publisher and every file of the commit it will read;
    ``(None, ...)`` when nothing is cached."""
    check_publisher(pin.repo_id)
    commit = cached_commit(pin)
    if commit is None:
        return None, "nothing cached for this pin"
    if not _SHA.match(commit):
        raise UntrustedKernelError(
            f"the cache's refs/v{pin.version} of {pin.repo_id} holds {commit[:80]!r}, not a commit"
        )
    from .hub_trust import repo_cache_folder

    if not (repo_cache_folder(pin.repo_id) / "snapshots" / commit).is_dir():
        return None, "the pinned commit's files are not in the cache"
    return commit, verify_snapshot(pin.repo_id, commit)


@contextlib.contextmanager
def checked_cache_import(pin: KernelPin) -> Iterator[str | None]:
    """Check the cache for `pin`, then let the block import without writing bytecode; yields the checked commit."""
    commit, _ = check_cache_before_import(pin)
    with no_bytecode():
        yield commit


def check_cached_kernel(module: ModuleType, pin: KernelPin, verified: str | None = None) -> str:
    """After an offline load: the module came from the commit checked before the import; returns a summary."""
    publisher = check_publisher(pin.repo_id)
    commit, variant = snapshot_commit(module)
    if commit is None or variant is None:
        raise UntrustedKernelError(f"{pin.repo_id} was not loaded from a Hugging Face cache snapshot: {module}")
    if pin.exact and commit != pin.revision:
        raise UntrustedKernelError(
            f"{pin.repo_id}: the cache served commit {commit}, not the pinned {pin.revision} ({pin.pinned_by})"
        )
    if verified is not None and commit != verified:
        raise UntrustedKernelError(f"{pin.repo_id}: kernels loaded commit {commit}, not the checked {verified}")
    files = verify_snapshot(pin.repo_id, commit)
    return f"publisher {publisher} trusted by the course; commit {commit[:12]}; {files} (checked before the import)"


def check_installed(distribution: str) -> str:
    """The files pip installed for `distribution` against the hashes in its RECORD; returns a summary."""
    try:
        files = importlib.metadata.files(distribution) or []
    except importlib.metadata.PackageNotFoundError as err:
        raise UntrustedKernelError(f"{distribution} is not installed") from err
    checked = 0
    for entry in files:
        if entry.hash is None or entry.hash.mode != "sha256" or not entry.name.endswith(".py"):
            continue
        located = Path(entry.locate())
        digest = base64.urlsafe_b64encode(hashlib.sha256(located.read_bytes()).digest()).rstrip(b"=").decode()
        if digest != entry.hash.value:
            raise UntrustedKernelError(
                f"the installed file {entry} of {distribution} differs from what pip installed (its RECORD hash): "
                f"reinstall it (pip install --force-reinstall {distribution})"
            )
        checked += 1
    if not checked:
        raise UntrustedKernelError(f"{distribution} records no file hashes to check (not installed by pip?)")
    return f"{checked} Python files match the hashes pip recorded"


# the cache, filled while online (a Space's build step)


def prefetch(
    repo_id: str = LIGER_REPO,
    version: int = LIGER_VERSION,
    backend: str | None = None,
    all_variants: bool = False,
    revision: str | None = None,
    lockfile: str | os.PathLike | None = None,
) -> Path:
    """Download the pinned Hub kernel (by branch when not pinned exactly, which writes the ``refs/v<N>`` an offline
    load resolves through) for offline loads later; this machine's variant only unless `all_variants`."""
    import kernels
    from huggingface_hub import snapshot_download

    if offline_requested():
        raise RuntimeError("prefetch downloads from the Hub: unset HF_HUB_OFFLINE for this step")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"version must be a positive int, got {version!r}")
    check_publisher(repo_id)  # the cache route trusts what is downloaded here
    pin = kernel_pin(repo_id, version, revision, lockfile)
    if pin.exact:
        if all_variants:
            from kernels.install import install_kernel_all_variants

            path = Path(install_kernel_all_variants(repo_id, revision=pin.revision)).parent
        else:
            variant = Path(kernels.install_kernel(repo_id, revision=pin.revision, backend=backend))
            path = variant.parent.parent  # snapshots/<commit>/build/<variant> -> snapshots/<commit>
        record_snapshot(repo_id, pin.revision)  # what offline loads check before importing
        return path
    decisions = kernels.get_kernel_variants(repo_id, version=version, backend=backend)
    accepted = [d.variant.variant_str for d in decisions if isinstance(d, kernels.VariantAccepted)]
    if not accepted:
        reasons = "; ".join(f"{d.variant.variant_str}: {getattr(d, 'reason', '')}" for d in decisions)
        raise FileNotFoundError(
            f"{repo_id} version {version} has no build for this machine ({reasons or 'no variants'})"
        )
    chosen = accepted if all_variants else accepted[:1]
    path = Path(
        snapshot_download(
            repo_id,
            repo_type="kernel",
            revision=f"v{version}",
            cache_dir=os.environ.get("KERNELS_CACHE") or None,
            allow_patterns=[f"build/{v}/*" for v in chosen],
            ignore_patterns=["*.pyc", "**/__pycache__/**"],
        )
    )
    if version not in cached_versions(repo_id):
        raise RuntimeError(
            f"downloaded {repo_id} to {path} but {cache_dir()} has no refs/v{version}: "
            "offline loads by version would not find it"
        )
    record_snapshot(repo_id, cached_versions(repo_id)[version])  # what offline loads check before importing
    return path
