"""Launch plans: what a kernel launch needs that depends only on the shape, built once. Triton binds and
specialises every argument per call, which at small shapes costs more than the kernel; a plan holds no tensors."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import triton

from ..triton_env import triton_mode

try:  # host-side TMA descriptors: triton >= 3.4
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - older triton: only the pointer kernels are used
    TensorDescriptor = None  # type: ignore[assignment,misc]

__all__ = ["LaunchPlan", "plan_cache", "clear_plans", "plans_table", "MAX_PLANS"]

# A program that meets many shapes (a sweep) must not grow the cache without bound.
MAX_PLANS = 512


def _describe(template: Any, base: Any) -> Any:
    """A copy of a checked descriptor template on another tensor, skipping the checks the plan's key guarantees."""
    desc = object.__new__(type(template))
    desc.__dict__.update(template.__dict__)
    desc.base = base
    return desc


@dataclass
class LaunchPlan:
    """One kernel at one shape: argument list, grid, configuration and fast launcher; ``slots`` maps each runtime
    argument to its kernel parameter (wrapped in a copy of its descriptor template when it has one)."""

    name: str
    kernel: Any  # a @triton.jit function (or the interpreter's stand-in)
    grid: tuple[int, ...]
    config: triton.Config
    config_source: str
    path: str
    args: list[Any]
    slots: list[tuple[int, Any]]
    shape: dict[str, Any] = field(default_factory=dict)
    runner: Callable[..., Any] | None = None
    fast: bool = True  # False once the compiled kernel turned out to offer no direct launcher
    launches: int = 0

    @classmethod
    def build(
        cls,
        name: str,
        kernel: Any,
        grid: tuple[int, ...],
        config: triton.Config,
        config_source: str,
        path: str,
        values: dict[str, Any],
        runtime: Sequence[str],
        templates: dict[str, Any] | None = None,
        shape: dict[str, Any] | None = None,
    ) -> LaunchPlan:
        """A plan from the kernel's fixed parameter `values` by name and the `runtime` ones filled per call, in
        :meth:`launch` order; unknown or missing names raise ValueError."""
        names = list(kernel.arg_names)
        defaults = _defaults(kernel)
        # Options of another path (FLATTEN is the persistent kernel's) are dropped, so one
        # configuration can serve both kernels.
        given = {**values, **{k: v for k, v in config.kwargs.items() if k in names}}
        # Keep each template's shape, strides, block shape and dtype facts, not its tensor.
        templates = {k: _describe(v, None) for k, v in (templates or {}).items()}
        unknown = sorted((set(given) | set(runtime)) - set(names))
        if unknown:
            raise ValueError(f"{name}: {unknown} are not parameters of {getattr(kernel, '__name__', kernel)}")
        args: list[Any] = []
        for pname in names:
            if pname in runtime:
                args.append(None)
            elif pname in given:
                args.append(given[pname])
            elif pname in defaults:
                args.append(defaults[pname])
            else:
                raise ValueError(f"{name}: no value for the kernel parameter {pname!r}")
        slots = [(names.index(r), templates.get(r)) for r in runtime]
        return cls(name, kernel, tuple(grid), config, config_source, path, args, slots, dict(shape or {}))

    def launch(self, *tensors: Any) -> None:
        """Launch on the current stream with `tensors` in the plan's runtime slots."""
        args = self.args.copy()
        for (pos, template), t in zip(self.slots, tensors):
            args[pos] = t if template is None else _describe(template, t)
        self.launches += 1
        if self.runner is not None:
            self.runner(*args)
            return
        cfg = self.config
        compiled = self.kernel[self.grid](*args, num_warps=cfg.num_warps, num_stages=cfg.num_stages)
        if self.fast and triton_mode() == "cuda":
            self.runner = _direct_launcher(compiled, self.grid)
            self.fast = self.runner is not None

    def row(self) -> dict[str, Any]:
        """This plan as one row of :func:`plans_table`."""
        cfg = self.config
        return {
            "kernel": self.name,
            **self.shape,
            "path": self.path,
            "config": config_label(cfg),
            "config_source": self.config_source,
            "grid": self.grid[0],
            "direct_launch": self.runner is not None,
            "launches": self.launches,
        }


def _defaults(kernel: Any) -> dict[str, Any]:
    """The kernel's parameters that have default values (the JIT fills them in; a plan must too)."""
    fn = getattr(kernel, "fn", kernel)
    return {
        p.name: p.default for p in inspect.signature(fn).parameters.values() if p.default is not inspect.Parameter.empty
    }


def _direct_launcher(compiled: Any, grid: tuple[int, ...]) -> Callable[..., Any] | None:
    """The compiled kernel's launcher for a fixed grid, skipping the JIT's per-call work; None where Triton lacks it."""
    if compiled is None or hasattr(compiled, "result"):  # interpreter, or an asynchronous compile
        return None
    grid3 = tuple(grid) + (1,) * (3 - len(grid))  # the runner reads grid[0], grid[1], grid[2]
    try:
        runner = compiled[grid3]
    except Exception:  # noqa: BLE001 - an older or newer Triton without it: keep the JIT launch
        return None
    return runner if callable(runner) else None


def config_label(cfg: triton.Config) -> str:
    """``128x256x64 s3 w8 G8`` plus any other options, for tables and logs."""
    kw = dict(cfg.kwargs)
    head = (
        f"{kw.pop('BLOCK_M', '?')}x{kw.pop('BLOCK_N', '?')}x{kw.pop('BLOCK_K', '?')} s{cfg.num_stages} w{cfg.num_warps}"
    )
    group = kw.pop("GROUP_M", None)
    if group is not None:
        head += f" G{group}"
    extra = " ".join(f"{k.lower()}={v}" for k, v in sorted(kw.items()))
    return f"{head} {extra}".strip()


_PLANS: dict[tuple, LaunchPlan] = {}


def plan_cache() -> dict[tuple, LaunchPlan]:
    """The process's plan cache (the launchers' private store; exposed for tests and tables)."""
    return _PLANS


def remember(key: tuple, plan: LaunchPlan) -> LaunchPlan:
    """Store `plan` under `key`, emptying the cache first when it is full."""
    if len(_PLANS) >= MAX_PLANS:
        _PLANS.clear()
    _PLANS[key] = plan
    return plan


def clear_plans() -> None:
    """Forget every launch plan (the next call per shape builds its plan again: e.g. after changing
    ``COURSE_PORTABLE_KERNELS`` or the tuned table)."""
    _PLANS.clear()


def plans_table() -> pd.DataFrame:
    """One row per launch plan built in this process: kernel, shape, path, configuration and its source."""
    cols = ["kernel", "m", "n", "k", "dtype", "path", "config", "config_source", "grid", "direct_launch", "launches"]
    rows = [p.row() for p in _PLANS.values()]
    return pd.DataFrame(rows, columns=list(dict.fromkeys(cols + [c for r in rows for c in r])))
