"""Load a hand-tuned GeGLU MLP layer online or offline and say how it was found; every route ends at the
course's own kernel, so lesson 05 runs offline. Each candidate is checked against ``SimpleGeGLUMLP``."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch

from ..measure.device import resolve_device
from ..paths import REPO_ROOT
from ..triton_env import ensure_interpreter_ready
from .hub_cache import (
    COURSE_KERNEL_REPO,
    COURSE_LAYER,
    LIGER_IMPORT,
    LIGER_LAYER,
    LIGER_PACKAGE,
    LIGER_PACKAGE_LAYER,
    LIGER_REPO,
    LIGER_VERSION,
    SOURCES,
    cache_dir,
    capture_library_warnings,
    describe_error,
    hub_status,
    offline_mode,
)
from .hub_pin import KernelPin, check_cached_kernel, check_installed, checked_cache_import, kernel_pin, snapshot_commit
from .hub_result import FAILED, NOT_TRIED, SKIPPED, USED, Attempt, KernelLoad, KernelLoadError
from .model import MLPConfig, SimpleGeGLUMLP

# checking a candidate layer

_CHECK = MLPConfig(hidden_size=48, intermediate_size=80)  # not powers of two: masks get exercised


def check_layer(layer_class: type, device: str | torch.device = "cpu", atol: float = 1e-4) -> float:
    """Build ``layer_class(config)`` small, load a ``SimpleGeGLUMLP``'s weights, and return the largest
    difference; TypeError for a class that takes no config (liger-kernels 2 and 3), ValueError past `atol`."""
    dev = torch.device(device)
    with torch.random.fork_rng(devices=[]):  # the caller's random state is left as it was
        torch.manual_seed(0)
        reference = SimpleGeGLUMLP(_CHECK.hidden_size, _CHECK.intermediate_size).to(dev).eval()
        x = torch.randn(3, 7, _CHECK.hidden_size).to(dev)
        try:
            candidate = layer_class(_CHECK)
        except TypeError as err:
            raise TypeError(
                f"{layer_class.__name__}(config) failed ({err}): this version of the layer does not take "
                "a config; liger-kernels versions 2 and 3 changed the constructor, pin version=1"
            ) from err
    candidate = candidate.to(dev).eval()
    try:
        candidate.load_state_dict(reference.state_dict(), strict=True)
    except RuntimeError as err:
        raise TypeError(
            f"{layer_class.__name__} does not hold gate_proj/up_proj/down_proj like SimpleGeGLUMLP: {err}"
        ) from err
    with torch.no_grad():
        expected = reference(x)
        got = candidate(x)
    if got.shape != expected.shape:
        raise ValueError(f"{layer_class.__name__} returned shape {tuple(got.shape)}, expected {tuple(expected.shape)}")
    err = float((got.float() - expected.float()).abs().max())
    if not err <= atol:  # also catches NaN
        raise ValueError(f"{layer_class.__name__} differs from SimpleGeGLUMLP by {err:.3g} (more than {atol:g})")
    return err


# the four sources


class _Skip(Exception):
    """A source that was not tried, with the reason."""


def _layer_from_module(module: ModuleType, layer: str, what: str) -> type:
    layers = getattr(module, "layers", None)
    if layers is None:
        raise AttributeError(f"{what} has no `layers` module")
    cls = getattr(layers, layer, None)
    if not isinstance(cls, type):
        names = sorted(n for n in dir(layers) if not n.startswith("_") and isinstance(getattr(layers, n), type))
        raise AttributeError(f"{what} has no layers.{layer}; it has: {', '.join(names) or 'nothing'}")
    return cls


def _variant_of(module: ModuleType) -> str | None:
    path = getattr(module, "__file__", None)
    if not path:
        return None
    # not resolve(): in the Hugging Face cache every file is a link to a blob elsewhere
    p = Path(os.path.abspath(path))
    # build/<variant>/<package>/__init__.py or build/<variant>/__init__.py
    for parent in p.parents:
        if parent.parent.name == "build":
            return parent.name
    return None


@dataclass(frozen=True)
class _Context:
    repo_id: str
    version: int
    pin: KernelPin
    layer: str
    local_repo: Path
    local_layer: str
    device: torch.device
    hub_timeout: float


# What a source found: the layer class, where it came from, the kernel module, its build variant.
_Found = tuple[type, str, "ModuleType | None", "str | None"]


def _get_pinned(ctx: _Context) -> ModuleType:
    import kernels

    pin = ctx.pin
    if pin.exact:
        return kernels.get_kernel(ctx.repo_id, revision=pin.revision)
    return kernels.get_kernel(ctx.repo_id, version=ctx.version)


def _try_hub(ctx: _Context) -> _Found:
    hub = hub_status(ctx.hub_timeout)
    if not hub.online:
        raise _Skip(f"offline: {hub.reason}")
    module = _get_pinned(ctx)  # kernels asks the Hub whether the publisher is trusted first
    commit, _ = snapshot_commit(module)
    if ctx.pin.exact and commit is not None and commit != ctx.pin.revision:
        raise ValueError(f"{ctx.repo_id}: kernels loaded commit {commit}, not the pinned {ctx.pin.revision}")
    variant = _variant_of(module)
    cls = _layer_from_module(module, ctx.layer, ctx.pin.describe())
    at = f", commit {commit[:12]}" if commit else ""
    moving = "" if ctx.pin.exact else f" (follows the branch v{ctx.version}: not an exact pin)"
    return (
        cls,
        f"{ctx.pin.call()}{at}, variant {variant}; publisher trust checked on the Hub by kernels{moving}",
        module,
        variant,
    )


def _try_cache(ctx: _Context) -> _Found:
    import kernels

    with checked_cache_import(ctx.pin) as commit, offline_mode():  # checked before kernels imports (runs) it
        if ctx.pin.lockfile is not None:  # the library's own loader for locked kernels: never downloads
            module = kernels.load_kernel(ctx.repo_id, lockfile=ctx.pin.lockfile)
            call = f"kernels.load_kernel({ctx.repo_id!r}, lockfile={str(ctx.pin.lockfile)!r})"
        else:
            module = _get_pinned(ctx)
            call = f"{ctx.pin.call()} with HF_HUB_OFFLINE=1"
    checks = check_cached_kernel(module, ctx.pin, commit)
    variant = _variant_of(module)
    cls = _layer_from_module(module, ctx.layer, f"{ctx.pin.describe()} (cache)")
    return cls, f"{call} from {cache_dir()}, variant {variant}; {checks}", module, variant


def _try_package(ctx: _Context) -> _Found:
    if importlib.util.find_spec(LIGER_IMPORT) is None:
        raise _Skip(f"the {LIGER_PACKAGE} package is not installed (pip install {LIGER_PACKAGE})")
    try:
        version = importlib.metadata.version(LIGER_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        version = "(version unknown)"
    if ctx.device.type != "cuda":
        raise _Skip(
            f"{LIGER_PACKAGE} {version} is installed, but its Triton kernels need a CUDA GPU and this run "
            f"is on {ctx.device} (they call libdevice's tanh, which Triton's CPU interpreter lacks)"
        )
    checks = check_installed(LIGER_PACKAGE)  # before importing it
    module = importlib.import_module(LIGER_PACKAGE_LAYER)
    cls = getattr(module, ctx.layer, None)
    if not isinstance(cls, type):
        raise AttributeError(f"{LIGER_PACKAGE} {version} has no {LIGER_PACKAGE_LAYER}.{ctx.layer}")
    return cls, f"{LIGER_PACKAGE_LAYER}.{ctx.layer} from the {LIGER_PACKAGE} {version} package; {checks}", module, None


def _try_local(ctx: _Context) -> _Found:
    import kernels

    if not (ctx.local_repo / "build").is_dir():
        raise _Skip(f"no kernel repository at {ctx.local_repo} (it needs a build/<variant>/ folder)")
    module = kernels.get_local_kernel(ctx.local_repo)
    if ctx.device.type == "cpu":
        ensure_interpreter_ready()  # Triton's own functions must run inside interpreted kernels
    variant = _variant_of(module)
    cls = _layer_from_module(module, ctx.local_layer, f"the kernel repository {ctx.local_repo}")
    try:
        where = ctx.local_repo.resolve().relative_to(REPO_ROOT)
    except ValueError:
        where = ctx.local_repo
    what = (
        ": the course's own Triton GeGLU kernel, part of this repository"
        if ctx.local_repo.resolve() == COURSE_KERNEL_REPO.resolve()
        else ": a folder you chose (trusted because you passed it)"
    )
    return cls, f"kernels.get_local_kernel({str(where)!r}), variant {variant}{what}", module, variant


_TRY: dict[str, Callable[[_Context], _Found]] = {
    "hub": _try_hub,
    "cache": _try_cache,
    "package": _try_package,
    "local": _try_local,
}


def load_geglu_mlp(
    *,
    sources: Sequence[str] = SOURCES,
    repo_id: str = LIGER_REPO,
    version: int = LIGER_VERSION,
    revision: str | None = None,
    lockfile: str | os.PathLike | None = None,
    layer: str = LIGER_LAYER,
    local_repo: str | os.PathLike | None = None,
    local_layer: str = COURSE_LAYER,
    device: str | torch.device | None = None,
    hub_timeout: float = 3.0,
    verify: bool = True,
) -> KernelLoad:
    """Find a working GeGLU MLP layer, trying `sources` in order: Liger's Hub kernel (pinned by `revision` or
    `lockfile`), its cache, the liger-kernel package, the local kernel repository. KernelLoadError lists every try."""
    if isinstance(sources, str):
        raise TypeError(f"sources must be a sequence of names such as ('cache', 'local'), got the string {sources!r}")
    sources = tuple(sources)
    unknown = [s for s in sources if s not in _TRY]
    if not sources or unknown:
        raise ValueError(f"sources must be a non-empty subset of {SOURCES}, got {sources!r}")
    if len(set(sources)) != len(sources):
        raise ValueError(f"sources lists a source twice: {sources!r}")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"version must be a positive int (the Hub branch v<version>), got {version!r}")
    if not isinstance(repo_id, str) or repo_id.count("/") != 1:
        raise ValueError(f"repo_id must look like 'owner/name', got {repo_id!r}")
    ctx = _Context(
        repo_id=repo_id,
        version=version,
        pin=kernel_pin(repo_id, version, revision, lockfile),
        layer=layer,
        local_repo=Path(local_repo) if local_repo is not None else COURSE_KERNEL_REPO,
        local_layer=local_layer,
        device=resolve_device(device),
        hub_timeout=hub_timeout,
    )
    attempts: list[Attempt] = []
    for i, source in enumerate(sources):
        start = time.perf_counter()
        with capture_library_warnings() as notes:
            try:
                cls, origin, module, variant = _TRY[source](ctx)
                error = check_layer(cls, ctx.device) if verify else None
            except _Skip as skip:
                attempts.append(Attempt(source, SKIPPED, str(skip), time.perf_counter() - start, tuple(notes)))
                continue
            except Exception as err:  # record it, try the next source
                # a failure of the local repository is about that folder, not about the Hub kernel
                what = (str(ctx.local_repo), None) if source == "local" else (repo_id, version)
                attempts.append(
                    Attempt(source, FAILED, describe_error(err, *what), time.perf_counter() - start, tuple(notes))
                )
                continue
        checked = f"; matches SimpleGeGLUMLP on {ctx.device} (max |diff| {error:.1e})" if error is not None else ""
        attempts.append(Attempt(source, USED, origin + checked, time.perf_counter() - start, tuple(notes)))
        attempts += [Attempt(s, NOT_TRIED, f"{source} worked first") for s in sources[i + 1 :]]
        return KernelLoad(
            source=source,
            layer_class=cls,
            origin=origin,
            attempts=tuple(attempts),
            module=module,
            variant=variant,
            max_abs_error=error,
            device=str(ctx.device),
        )
    lines = "\n".join(f"  {a.source}: {a.status}: {a.reason}" for a in attempts)
    raise KernelLoadError(f"no source gave a working GeGLU MLP layer ({layer} or {local_layer}):\n{lines}", attempts)
