"""Load a hand-tuned GeGLU MLP layer, online or offline, and say how it was found.

The real API, as a learner with network access writes it::

    import kernels
    liger = kernels.get_kernel("kernels-community/liger-kernels", version=1)
    mlp = liger.layers.LigerGEGLUMLP(config)          # config.hidden_size, config.intermediate_size

``version=1`` is a pin: ``get_kernel`` resolves the branch ``v1`` of the Hub repository. Versions
2 and 3 of liger-kernels changed ``LigerGEGLUMLP`` into a layer without a constructor argument,
so the line above only keeps working with the pin.

The course's machines are usually offline, so :func:`load_geglu_mlp` tries, in order:

1. ``hub``: the Hub, only when it answers a short probe (:func:`hub_status`, never hangs);
2. ``cache``: the same ``get_kernel`` call with ``HF_HUB_OFFLINE=1``, served from the local cache
   (filled earlier while online, e.g. by :func:`prefetch` when a Space is built);
3. ``package``: the ``liger-kernel`` package from PyPI, when installed (the same
   ``LigerGEGLUMLP(config)``; its Triton kernels need a CUDA GPU);
4. ``local``: the course's own kernel repository ``local_kernels/course-geglu`` (the ``kernels``
   build layout, loaded with ``kernels.get_local_kernel``): the course's Triton GeGLU kernel,
   compiled on a GPU, run by Triton's interpreter on a CPU. It always works.

Liger's kernel comes first (the Hub, its cache, its package); the course's own kernel is the
fallback. Every candidate layer is checked on a tiny input against ``SimpleGeGLUMLP`` before it
is accepted. The result (:class:`KernelLoad`) says which path was taken and why each other one
was skipped or failed; the library's misleading offline error ("could not verify publisher trust
status") is turned into what it means (:func:`explain_kernels_error`).

Command line (the Space's build step uses the first)::

    python -m helpers.hub_kernels prefetch     # download liger-kernels v1 into the cache (online)
    python -m helpers.hub_kernels status       # run the loader here and print what it did
"""

from __future__ import annotations

import argparse
import contextlib
import html
import importlib
import importlib.metadata
import importlib.util
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd
import torch
from torch import nn

from .models import MLPShape, SimpleGeGLUMLP
from .paths import REPO_ROOT

LIGER_REPO = "kernels-community/liger-kernels"
LIGER_VERSION = 1
LIGER_LAYER = "LigerGEGLUMLP"
LIGER_PACKAGE = "liger-kernel"
LIGER_IMPORT = "liger_kernel"
LIGER_PACKAGE_LAYER = "liger_kernel.transformers.geglu"
COURSE_KERNEL_REPO = REPO_ROOT / "local_kernels" / "course-geglu"
COURSE_LAYER = "CourseGeGLUMLP"
SOURCES: tuple[str, ...] = ("hub", "cache", "package", "local")
USED, SKIPPED, FAILED, NOT_TRIED = "used", "skipped", "failed", "not tried"

_TRUST_ERROR = "could not verify publisher trust status"
_OFFLINE_CACHE_MISS = "is not available in the local cache"
_NO_SNAPSHOT = "Cannot find a local snapshot"
_NO_VARIANT = "Cannot find a build variant"
_KERNELS_LOGGERS = ("kernels", "huggingface_hub")


# ---------------------------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MLPConfig:
    """The two sizes a ``LigerGEGLUMLP(config)`` reads (a stand-in for a transformers config)."""

    hidden_size: int
    intermediate_size: int

    def __post_init__(self) -> None:
        for name in ("hidden_size", "intermediate_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")

    @classmethod
    def from_shape(cls, shape: MLPShape) -> "MLPConfig":
        """The config of an :class:`helpers.MLPShape` (``dim`` -> hidden_size, ``hidden`` -> intermediate_size)."""
        if not isinstance(shape, MLPShape):
            raise TypeError(f"shape must be a helpers.MLPShape, got {type(shape).__name__}")
        return cls(hidden_size=shape.dim, intermediate_size=shape.hidden)


# ---------------------------------------------------------------------------------------------
# where the Hub and the cache are
# ---------------------------------------------------------------------------------------------

def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def offline_requested() -> bool:
    """True when ``HF_HUB_OFFLINE`` is set (in the environment or in ``huggingface_hub`` itself)."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE) or _env_true("HF_HUB_OFFLINE")


@contextlib.contextmanager
def offline_mode() -> Iterator[None]:
    """Run the ``kernels``/``huggingface_hub`` calls inside in offline mode, then restore the settings.

    ``huggingface_hub`` reads ``HF_HUB_OFFLINE`` once, when it is imported, into
    ``huggingface_hub.constants.HF_HUB_OFFLINE``; ``kernels.get_kernel`` reads that constant at
    each call. Setting the environment variable alone after import changes nothing, so this sets both.
    """
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
    """Versions of a Hub kernel present in the local cache: ``{version: commit}``, read from ``refs/v<N>``.

    Reads files only, never the network. A snapshot downloaded by commit hash writes no
    ``refs/v<N>`` (so ``version=N`` cannot find it offline): download by branch, see :func:`prefetch`.
    """
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
    """Probe the Hub with one HEAD request; never waits much longer than `timeout` seconds.

    ``HF_HUB_OFFLINE=1`` answers at once without any request. The request runs in a daemon thread
    (name resolution ignores socket timeouts and can hang on a machine without network), and any
    HTTP answer, even an error status, counts as online: the server is reachable.
    """
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


# ---------------------------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------------------------

def explain_kernels_error(err: BaseException, repo_id: str = LIGER_REPO, version: int | None = LIGER_VERSION) -> str | None:
    """What an error raised by ``kernels.get_kernel`` means, in plain words; None when not recognised.

    The important one: without network and without ``HF_HUB_OFFLINE=1``, ``get_kernel`` first asks
    the Hub whether the publisher is trusted, that request fails, and the library reports
    "could not verify publisher trust status": the repository is not untrusted, the Hub was not reached.
    """
    text = str(err)
    which = f"{repo_id}" + (f" version {version}" if version is not None else "")
    if _TRUST_ERROR in text:
        return (f"the Hugging Face Hub could not be reached. kernels asks the Hub whether the publisher of "
                f"{repo_id} is trusted before anything else, so a network failure is reported as a trust "
                "error: the repository is not untrusted. Offline, load from the local cache with "
                "HF_HUB_OFFLINE=1 (after one download while online: python -m helpers.hub_kernels prefetch), "
                "or from a local kernel repository with kernels.get_local_kernel(path).")
    if _OFFLINE_CACHE_MISS in text or _NO_SNAPSHOT in text:
        have = cached_versions(repo_id) if repo_id.count("/") == 1 else {}
        return (f"{which} is not in the local cache ({cache_dir()}; cached versions: "
                f"{', '.join(f'v{v}' for v in have) or 'none'}). Download it once while online "
                "(python -m helpers.hub_kernels prefetch, or kernels.get_kernel with network).")
    if _NO_VARIANT in text:
        detail = "; ".join(line.strip() for line in text.splitlines()[2:] if line.strip())[:400]
        return (f"{which} has no build for this machine (torch {torch.__version__}, "
                f"{'CUDA ' + str(torch.version.cuda) if torch.version.cuda else 'CPU-only'}): {detail}")
    if type(err).__name__ == "OfflineModeIsEnabled":
        return "HF_HUB_OFFLINE=1 is set, and this call needed the network"
    return None


def _describe_error(err: BaseException, repo_id: str, version: int | None) -> str:
    explained = explain_kernels_error(err, repo_id, version)
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    if explained:
        return f"{explained} (kernels said: {type(err).__name__}: {first[:160]}{'...' if len(first) > 160 else ''})"
    return f"{type(err).__name__}: {first[:500]}"


class KernelLoadError(ImportError):
    """No source could provide a working layer; ``attempts`` says what each one did."""

    def __init__(self, message: str, attempts: Sequence["Attempt"]) -> None:
        super().__init__(message)
        self.attempts = tuple(attempts)


# ---------------------------------------------------------------------------------------------
# attempts and the result
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Attempt:
    """What one source did: ``status`` is used / skipped (not tried, and why) / failed (tried, and why)."""

    source: str
    status: str
    reason: str
    seconds: float = 0.0
    notes: tuple[str, ...] = ()


def _attempts_frame(attempts: Sequence[Attempt]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"order": i + 1, "source": a.source, "status": a.status, "reason": a.reason,
          "seconds": round(a.seconds, 3), "library notes": " | ".join(a.notes)} for i, a in enumerate(attempts)],
        columns=["order", "source", "status", "reason", "seconds", "library notes"])


@dataclass(frozen=True)
class KernelLoad:
    """A layer class found by :func:`load_geglu_mlp`, where it came from, and what every source did."""

    source: str
    layer_class: type
    origin: str
    attempts: tuple[Attempt, ...]
    module: ModuleType | None = None
    variant: str | None = None
    max_abs_error: float | None = None
    device: str = "cpu"

    def attempts_frame(self) -> pd.DataFrame:
        """One row per source in the order tried: status, reason, seconds, library warnings."""
        return _attempts_frame(self.attempts)

    def explain(self) -> str:
        """One line per source: which path was taken and why the others were not."""
        lines = [f"using {self.source}: {self.origin}"]
        for a in self.attempts:
            if a.status != USED:
                lines.append(f"{a.source} {a.status}: {a.reason}")
        return "\n".join(lines)

    def layer(self, config: Any, device: str | torch.device | None = None, dtype: torch.dtype | None = None) -> nn.Module:
        """A new layer ``layer_class(config)`` on `device` (default: where it was checked) in `dtype`."""
        mod = self.layer_class(config)
        return mod.to(device=device or self.device, dtype=dtype)

    def from_mlp(self, mlp: nn.Module) -> nn.Module:
        """The layer with the weights of `mlp` (a bias-free ``SimpleGeGLUMLP``), on its device and dtype, in eval mode."""
        for name in ("gate_proj", "up_proj", "down_proj"):
            if not isinstance(getattr(mlp, name, None), nn.Linear):
                raise TypeError(f"from_mlp needs a module with nn.Linear gate_proj, up_proj and down_proj (like "
                                f"SimpleGeGLUMLP); {type(mlp).__name__} has no Linear {name!r}")
        if any(getattr(mlp, n).bias is not None for n in ("gate_proj", "up_proj", "down_proj")):
            raise ValueError("the hand-tuned GeGLU MLP layers are bias-free; build SimpleGeGLUMLP(dim, hidden, bias=False)")
        weight = mlp.gate_proj.weight
        new = self.layer_class(MLPConfig(mlp.gate_proj.in_features, mlp.gate_proj.out_features))
        new = new.to(device=weight.device, dtype=weight.dtype)
        new.load_state_dict(mlp.state_dict(), strict=True)
        return new.train(mlp.training)

    def __repr__(self) -> str:
        return f"<KernelLoad {self.layer_class.__name__} from {self.source}: {self.origin}>\n" + "\n".join(
            f"  {a.source:8s} {a.status:9s} {a.reason}" for a in self.attempts)

    def _repr_html_(self) -> str:
        head = (f'<div class="course-kernel-load"><b>{html.escape(self.layer_class.__name__)}</b> from '
                f"<b>{html.escape(self.source)}</b>: {html.escape(self.origin)}")
        if self.max_abs_error is not None:
            head += f"<br>checked against SimpleGeGLUMLP on {html.escape(self.device)}: max |difference| {self.max_abs_error:.2e}"
        return head + self.attempts_frame().to_html(index=False, border=0) + "</div>"


# ---------------------------------------------------------------------------------------------
# checking a candidate layer
# ---------------------------------------------------------------------------------------------

_CHECK = MLPConfig(hidden_size=48, intermediate_size=80)  # not powers of two: masks get exercised


def check_layer(layer_class: type, device: str | torch.device = "cpu", atol: float = 1e-4) -> float:
    """Build ``layer_class(config)`` at a tiny size, copy a ``SimpleGeGLUMLP``'s weights in, compare outputs.

    Returns the largest absolute difference (float32). Raises TypeError when the class does not
    take a config (e.g. liger-kernels versions 2 and 3) or has other parameters, and ValueError
    when the outputs differ by more than `atol`.
    """
    dev = torch.device(device)
    with torch.random.fork_rng(devices=[]):  # the caller's random state is left as it was
        torch.manual_seed(0)
        reference = SimpleGeGLUMLP(_CHECK.hidden_size, _CHECK.intermediate_size).to(dev).eval()
        x = torch.randn(3, 7, _CHECK.hidden_size).to(dev)
        try:
            candidate = layer_class(_CHECK)
        except TypeError as err:
            raise TypeError(f"{layer_class.__name__}(config) failed ({err}): this version of the layer does not take "
                            "a config; liger-kernels versions 2 and 3 changed the constructor, pin version=1") from err
    candidate = candidate.to(dev).eval()
    try:
        candidate.load_state_dict(reference.state_dict(), strict=True)
    except RuntimeError as err:
        raise TypeError(f"{layer_class.__name__} does not hold gate_proj/up_proj/down_proj like SimpleGeGLUMLP: {err}") from err
    with torch.no_grad():
        expected = reference(x)
        got = candidate(x)
    if got.shape != expected.shape:
        raise ValueError(f"{layer_class.__name__} returned shape {tuple(got.shape)}, expected {tuple(expected.shape)}")
    err = float((got.float() - expected.float()).abs().max())
    if not err <= atol:  # also catches NaN
        raise ValueError(f"{layer_class.__name__} differs from SimpleGeGLUMLP by {err:.3g} (more than {atol:g})")
    return err


# ---------------------------------------------------------------------------------------------
# the four sources
# ---------------------------------------------------------------------------------------------

class _Skip(Exception):
    """A source that was not tried, with the reason."""


class _LogCapture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def _capture_library_warnings() -> Iterator[list[str]]:
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
    p = Path(path).resolve()
    # build/<variant>/<package>/__init__.py or build/<variant>/__init__.py
    for parent in p.parents:
        if parent.parent.name == "build":
            return parent.name
    return None


@dataclass(frozen=True)
class _Context:
    repo_id: str
    version: int
    layer: str
    local_repo: Path
    local_layer: str
    device: torch.device
    hub_timeout: float


# What a source found: the layer class, where it came from, the kernel module, its build variant.
_Found = tuple[type, str, "ModuleType | None", "str | None"]


def _try_hub(ctx: _Context) -> _Found:
    import kernels

    hub = hub_status(ctx.hub_timeout)
    if not hub.online:
        raise _Skip(f"offline: {hub.reason}")
    module = kernels.get_kernel(ctx.repo_id, version=ctx.version)
    variant = _variant_of(module)
    cls = _layer_from_module(module, ctx.layer, f"{ctx.repo_id} version {ctx.version}")
    return cls, f"kernels.get_kernel({ctx.repo_id!r}, version={ctx.version}), variant {variant}", module, variant


def _try_cache(ctx: _Context) -> _Found:
    import kernels

    with offline_mode():
        module = kernels.get_kernel(ctx.repo_id, version=ctx.version)
    variant = _variant_of(module)
    cls = _layer_from_module(module, ctx.layer, f"{ctx.repo_id} version {ctx.version} (cache)")
    return (cls, f"kernels.get_kernel({ctx.repo_id!r}, version={ctx.version}) with HF_HUB_OFFLINE=1 from "
                 f"{cache_dir()}, variant {variant}", module, variant)


def _try_package(ctx: _Context) -> _Found:
    if importlib.util.find_spec(LIGER_IMPORT) is None:
        raise _Skip(f"the {LIGER_PACKAGE} package is not installed (pip install {LIGER_PACKAGE})")
    try:
        version = importlib.metadata.version(LIGER_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        version = "(version unknown)"
    if ctx.device.type != "cuda":
        raise _Skip(f"{LIGER_PACKAGE} {version} is installed, but its Triton kernels need a CUDA GPU and this run "
                    f"is on {ctx.device} (they call libdevice's tanh, which Triton's CPU interpreter lacks)")
    module = importlib.import_module(LIGER_PACKAGE_LAYER)
    cls = getattr(module, ctx.layer, None)
    if not isinstance(cls, type):
        raise AttributeError(f"{LIGER_PACKAGE} {version} has no {LIGER_PACKAGE_LAYER}.{ctx.layer}")
    return cls, f"{LIGER_PACKAGE_LAYER}.{ctx.layer} from the {LIGER_PACKAGE} {version} package", module, None


def _try_local(ctx: _Context) -> _Found:
    import kernels

    if not (ctx.local_repo / "build").is_dir():
        raise _Skip(f"no kernel repository at {ctx.local_repo} (it needs a build/<variant>/ folder)")
    module = kernels.get_local_kernel(ctx.local_repo)
    if ctx.device.type == "cpu":
        from .variants import check_triton_ready

        check_triton_ready()  # a clear error when triton was imported before its interpreter was switched on
    variant = _variant_of(module)
    cls = _layer_from_module(module, ctx.local_layer, f"the kernel repository {ctx.local_repo}")
    try:
        where = ctx.local_repo.resolve().relative_to(REPO_ROOT)
    except ValueError:
        where = ctx.local_repo
    what = ": the course's own Triton GeGLU kernel" if ctx.local_repo.resolve() == COURSE_KERNEL_REPO.resolve() else ""
    return cls, f"kernels.get_local_kernel({str(where)!r}), variant {variant}{what}", module, variant


_TRY: dict[str, Callable[[_Context], _Found]] = {
    "hub": _try_hub, "cache": _try_cache, "package": _try_package, "local": _try_local,
}


def _resolve_device(device: str | torch.device | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"unknown device {device!r}: use 'cpu' or 'cuda'") from err
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be cpu or cuda, got {dev}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for but no CUDA GPU is available here; use 'cpu'")
    return dev


def load_geglu_mlp(
    *,
    sources: Sequence[str] = SOURCES,
    repo_id: str = LIGER_REPO,
    version: int = LIGER_VERSION,
    layer: str = LIGER_LAYER,
    local_repo: str | os.PathLike | None = None,
    local_layer: str = COURSE_LAYER,
    device: str | torch.device | None = None,
    hub_timeout: float = 3.0,
    verify: bool = True,
) -> KernelLoad:
    """Find a working GeGLU MLP layer class, trying `sources` in order (see the module docstring).

    - `repo_id`, `version`, `layer`: the Hub kernel and its layer (Liger's ``LigerGEGLUMLP``, pinned to v1).
    - `local_repo`, `local_layer`: the local kernel repository (default: the course's ``local_kernels/course-geglu``).
    - `device`: where the candidate is checked (default: CUDA when available, else CPU).
    - `verify`: check each candidate against ``SimpleGeGLUMLP`` on a tiny input before accepting it.

    Returns a :class:`KernelLoad`; raises :class:`KernelLoadError` (an ImportError) with every
    attempt when no source works.
    """
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
    ctx = _Context(repo_id=repo_id, version=version, layer=layer,
                   local_repo=Path(local_repo) if local_repo is not None else COURSE_KERNEL_REPO,
                   local_layer=local_layer, device=_resolve_device(device), hub_timeout=hub_timeout)
    attempts: list[Attempt] = []
    for i, source in enumerate(sources):
        start = time.perf_counter()
        with _capture_library_warnings() as notes:
            try:
                cls, origin, module, variant = _TRY[source](ctx)
                error = check_layer(cls, ctx.device) if verify else None
            except _Skip as skip:
                attempts.append(Attempt(source, SKIPPED, str(skip), time.perf_counter() - start, tuple(notes)))
                continue
            except Exception as err:  # record it, try the next source
                attempts.append(Attempt(source, FAILED, _describe_error(err, repo_id, version),
                                        time.perf_counter() - start, tuple(notes)))
                continue
        checked = f"; matches SimpleGeGLUMLP on {ctx.device} (max |diff| {error:.1e})" if error is not None else ""
        attempts.append(Attempt(source, USED, origin + checked, time.perf_counter() - start, tuple(notes)))
        attempts += [Attempt(s, NOT_TRIED, f"{source} worked first") for s in sources[i + 1:]]
        return KernelLoad(source=source, layer_class=cls, origin=origin, attempts=tuple(attempts), module=module,
                          variant=variant, max_abs_error=error, device=str(ctx.device))
    lines = "\n".join(f"  {a.source}: {a.status}: {a.reason}" for a in attempts)
    raise KernelLoadError(f"no source gave a working GeGLU MLP layer ({layer} or {local_layer}):\n{lines}", attempts)


# ---------------------------------------------------------------------------------------------
# a kernel repository on disk
# ---------------------------------------------------------------------------------------------

def describe_repository(path: str | os.PathLike = COURSE_KERNEL_REPO, backend: str | None = None) -> pd.DataFrame:
    """The build variants of a kernel repository in the ``kernels`` layout, and which one this machine loads.

    One row per ``build/<variant>/`` folder: ``variant``, ``decision`` (kernels' own verdict for
    this machine: "loaded here" for the preferred variant, "compatible", or the reason it is
    rejected), and from ``metadata.json`` ``name``, ``version``, ``backend``, ``license``, plus the
    Python ``files`` of the variant.
    """
    from kernels import Metadata, VariantAccepted
    from kernels.variants import get_variants_local, resolve_variants

    build = Path(path) / "build"
    if not build.is_dir():
        raise FileNotFoundError(f"{path} is not a kernel repository: it has no build/ folder "
                                "(the kernels layout is build/<variant>/metadata.json plus a Python package)")
    accepted, decisions = resolve_variants(get_variants_local(build), backend)
    preferred = accepted[0].variant_str if accepted else None
    verdict = {d.variant.variant_str: ("loaded here" if d.variant.variant_str == preferred else "compatible")
               if isinstance(d, VariantAccepted) else f"rejected: {d.reason}" for d in decisions}
    rows = []
    for folder in sorted(p for p in build.iterdir() if p.is_dir()):
        meta = Metadata.read_from_file(folder / "metadata.json") if (folder / "metadata.json").is_file() else None
        rows.append({
            "variant": folder.name,
            "decision": verdict.get(folder.name, "not a variant name kernels knows"),
            "name": str(meta.name) if meta else None,
            "version": meta.version if meta else None,
            "backend": str(meta.backend.backend_type).split(".")[-1].lower() if meta else None,
            "license": meta.license if meta else None,
            "files": ", ".join(str(f.relative_to(folder)) for f in sorted(folder.rglob("*"))
                               if f.is_file() and "__pycache__" not in f.parts),
        })
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# the plain library call, for the lesson
# ---------------------------------------------------------------------------------------------

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
            return f"<get_kernel worked in {self.seconds:.1f} s: {self.module}>"
        return (f"<get_kernel failed after {self.seconds:.1f} s>\nthe library says: {self.error}\n"
                f"what it means: {self.explanation or 'not recognised'}")


def raw_get_kernel(repo_id: str = LIGER_REPO, version: int = LIGER_VERSION, timeout: float = 30.0) -> RawCall:
    """Call ``kernels.get_kernel(repo_id, version=version)`` exactly as a learner would, with no help.

    Runs in a daemon thread and gives up waiting after `timeout` seconds, so a machine whose
    network hangs cannot hang the notebook. Returns a :class:`RawCall`.
    """
    import kernels

    result: dict[str, Any] = {}

    def call() -> None:
        try:
            result["module"] = kernels.get_kernel(repo_id, version=version)
        except Exception as err:
            result["error"] = err

    start = time.perf_counter()
    thread = threading.Thread(target=call, name="raw-get-kernel", daemon=True)
    with _capture_library_warnings():
        thread.start()
        thread.join(timeout)
    seconds = time.perf_counter() - start
    if "module" in result:
        return RawCall(True, seconds, module=result["module"])
    if "error" in result:
        err = result["error"]
        return RawCall(False, seconds, f"{type(err).__name__}: {err}", explain_kernels_error(err, repo_id, version))
    return RawCall(False, seconds, f"no answer within {timeout:g} s",
                   "the network hangs: set HF_HUB_OFFLINE=1 to use the cache without asking the Hub")


# ---------------------------------------------------------------------------------------------
# the cache, filled while online (a Space's build step)
# ---------------------------------------------------------------------------------------------

def prefetch(repo_id: str = LIGER_REPO, version: int = LIGER_VERSION, backend: str | None = None,
             all_variants: bool = False) -> Path:
    """Download `version` of a Hub kernel into the cache so that offline loads work later; returns the snapshot.

    Downloads by *branch name* (``revision="v<version>"``), which writes ``refs/v<version>`` in the
    cache: ``get_kernel(..., version=N)`` with ``HF_HUB_OFFLINE=1`` resolves the version through
    that file (a download by commit hash writes no such ref and cannot be found offline). Only the
    build variant this machine would load is fetched, unless `all_variants`. Needs network.
    """
    import kernels
    from huggingface_hub import snapshot_download

    if offline_requested():
        raise RuntimeError("prefetch downloads from the Hub: unset HF_HUB_OFFLINE for this step")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"version must be a positive int, got {version!r}")
    decisions = kernels.get_kernel_variants(repo_id, version=version, backend=backend)
    accepted = [d.variant.variant_str for d in decisions if isinstance(d, kernels.VariantAccepted)]
    if not accepted:
        reasons = "; ".join(f"{d.variant.variant_str}: {getattr(d, 'reason', '')}" for d in decisions)
        raise FileNotFoundError(f"{repo_id} version {version} has no build for this machine ({reasons or 'no variants'})")
    chosen = accepted if all_variants else accepted[:1]
    path = Path(snapshot_download(
        repo_id, repo_type="kernel", revision=f"v{version}", cache_dir=os.environ.get("KERNELS_CACHE") or None,
        allow_patterns=[f"build/{v}/*" for v in chosen], ignore_patterns=["*.pyc", "**/__pycache__/**"]))
    if version not in cached_versions(repo_id):
        raise RuntimeError(f"downloaded {repo_id} to {path} but {cache_dir()} has no refs/v{version}: "
                           "offline loads by version would not find it")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.hub_kernels", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    pre = sub.add_parser("prefetch", help="download the pinned Hub kernel into the cache (needs network)")
    pre.add_argument("--repo", default=LIGER_REPO)
    pre.add_argument("--version", type=int, default=LIGER_VERSION)
    pre.add_argument("--all-variants", action="store_true")
    sub.add_parser("status", help="run the loader here and print which source it used and why")
    args = parser.parse_args(argv)
    if args.command == "prefetch":
        path = prefetch(args.repo, args.version, all_variants=args.all_variants)
        print(f"{args.repo} version {args.version} is in the cache: {path}")
        with offline_mode():
            loaded = load_geglu_mlp(sources=("cache",), repo_id=args.repo, version=args.version,
                                    verify=torch.cuda.is_available())
        print(f"offline load works: {loaded.origin}")
        return 0
    try:
        loaded = load_geglu_mlp()
    except KernelLoadError as err:
        print(err, file=sys.stderr)
        return 1
    print(repr(loaded))
    return 0


if __name__ == "__main__":
    sys.exit(main())
