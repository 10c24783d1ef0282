"""How many graphs ``torch.compile`` compiles, and why; private torch internals are read behind guards, so
a release that changes them gives a clear error."""

from __future__ import annotations

import html
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch

from ..checks import check_callable
from .device import synchronize


def _inductor_cache_counts() -> dict[str, int]:
    from torch._dynamo.utils import counters

    c = counters["inductor"]
    return {k: int(c.get(f"fxgraph_cache_{k}", 0)) for k in ("hit", "miss", "bypass")}


def _dynamo_graphs() -> int:
    from torch._dynamo.utils import counters

    return int(counters["stats"].get("unique_graphs", 0))


def _guard_failures() -> list[str]:
    """Every recompile reason Dynamo has recorded in this process, oldest first (empty if unavailable)."""
    try:
        from torch._dynamo.utils import guard_failures
    except ImportError:  # pragma: no cover - very old torch
        return []
    return [str(r) for reasons in list(guard_failures.values()) for r in reasons]


# counting compiles


@dataclass(frozen=True)
class GraphRecord:
    """One graph Dynamo handed to the backend: its input shapes (symbols mark dynamic sizes)."""

    index: int
    input_shapes: tuple[str, ...]
    symbols: tuple[str, ...]

    @property
    def dynamic(self) -> bool:
        return bool(self.symbols)

    def input_like(self, x: torch.Tensor) -> str:
        """The graph's shape for an input like `x` (same rank; a symbolic one first), e.g. ``(s77, 64, 256)``."""
        same_rank = [s for s in self.input_shapes if s.startswith("(") and s.count(",") == max(x.dim() - 1, 0)]
        symbolic = [s for s in same_rank if any(sym in s for sym in self.symbols)]
        return (symbolic or same_rank or [""])[0]


def _graph_kind(g: GraphRecord, x: torch.Tensor) -> tuple[str, str]:
    """The table's name for a new graph and the progress line's phrase: static, dynamic (a symbol in its sizes),
    or dynamic strides (symbols only in the strides: the sizes stay fixed)."""
    shape = g.input_like(x)
    if not g.dynamic:
        return f"static {shape}", f"compiled a static {shape} graph"
    if any(sym in shape for sym in g.symbols):
        return f"dynamic {shape}", f"compiled a dynamic {shape} graph"
    return f"dynamic strides {shape}", f"compiled a graph with dynamic strides, sizes {shape}"


def _shape_text(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return "(" + ", ".join(str(s) for s in value.shape) + ")"
    return str(value)


def _torch_counter(backend: str) -> Any | None:
    """torch's own counting backend (``torch._dynamo.testing.CompileCounterWithBackend``), when this torch has it."""
    try:  # a testing utility of torch, not a public API: guarded (present in torch 2.1 to 2.13 at least)
        from torch._dynamo.testing import CompileCounterWithBackend
    except ImportError:  # pragma: no cover - depends on the torch version
        return None
    return CompileCounterWithBackend(backend)


class CompileCounter:
    """A ``torch.compile`` backend that records every graph it is given (input shapes, dynamic symbols) and
    compiles it with `backend`: Dynamo decides when to compile, so ``"eager"`` counts the same graphs fast."""

    def __init__(self, backend: str = "inductor") -> None:
        if not isinstance(backend, str):
            raise TypeError(
                f"backend must be a backend name such as 'inductor' or 'eager', got {type(backend).__name__}"
            )
        from torch._dynamo import list_backends, lookup_backend

        try:
            self._inner = lookup_backend(backend)
        except Exception as err:
            raise ValueError(f"unknown torch.compile backend {backend!r}; known: {list_backends()}") from err
        self.backend = backend
        self.torch_counter = _torch_counter(backend)
        self.graphs: list[GraphRecord] = []

    @property
    def frame_count(self) -> int:
        """Graphs compiled, as torch's counter counts them (the number of graph records otherwise)."""
        return int(self.torch_counter.frame_count) if self.torch_counter is not None else len(self.graphs)

    @property
    def op_count(self) -> int | None:
        """Calls (ops) in all compiled graphs, from torch's counter (None without it)."""
        return int(self.torch_counter.op_count) if self.torch_counter is not None else None

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable:
        shapes, symbols = [], []
        for node in gm.graph.nodes:
            if node.op != "placeholder":
                continue
            value = node.meta.get("example_value", node.meta.get("val"))
            text = _shape_text(value)
            shapes.append(text)
            if isinstance(value, torch.SymInt):
                symbols.append(str(value))
            elif isinstance(value, torch.Tensor):
                symbols += [str(s) for s in value.shape if isinstance(s, torch.SymInt)]
        self.graphs.append(GraphRecord(len(self.graphs), tuple(shapes), tuple(dict.fromkeys(symbols))))
        if self.torch_counter is not None:
            return self.torch_counter(gm, example_inputs)  # counts, then compiles with `backend`
        return self._inner(gm, example_inputs)


@dataclass(frozen=True)
class SweepResult:
    """What a :func:`shape_sweep` measured: one row per call, and the graphs compiled."""

    label: str
    backend: str
    dynamic: bool | None
    mark_dynamic: int | None
    table: pd.DataFrame
    graphs: tuple[GraphRecord, ...]
    dynamo_graphs: int
    seconds: float
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def compiles(self) -> int:
        """Graphs compiled during the sweep (counted by the backend wrapper)."""
        return len(self.graphs)

    def summary(self) -> dict[str, Any]:
        """One line for a comparison table."""
        dyn = [g for g in self.graphs if g.dynamic]
        return {
            "sweep": self.label,
            "backend": self.backend,
            "dynamic": str(self.dynamic),
            "mark_dynamic": "none" if self.mark_dynamic is None else f"dim {self.mark_dynamic}",
            "calls": len(self.table),
            "distinct shapes": self.table["input_shape"].nunique(),
            "compiles": self.compiles,
            "dynamic graphs": len(dyn),
            "seconds compiling": float(self.table.loc[self.table["new_graphs"] > 0, "seconds"].sum()),
            "seconds total": self.seconds,
        }

    def __repr__(self) -> str:
        table = self.table.to_string(index=False, formatters={"seconds": _seconds})
        return f"<SweepResult {self.label}: {self.compiles} compiles in {len(self.table)} calls>\n{table}"

    def _repr_html_(self) -> str:
        head = (
            f"<b>{html.escape(self.label)}</b>: {self.compiles} graph(s) compiled in {len(self.table)} calls "
            f"(backend {html.escape(self.backend)}, dynamic={self.dynamic}, mark_dynamic={self.mark_dynamic})"
        )
        return head + self.table.to_html(index=False, border=0, formatters={"seconds": _seconds})


def _seconds(v: float) -> str:
    # a wall-clock time of one call: hundredths of a second are all it can support
    return f"{v:.2f}"


def batch_inputs(template: torch.Tensor, sizes: Sequence[int], dim: int = 0, seed: int = 0) -> list[torch.Tensor]:
    """Random inputs like `template` (dtype, device, other sizes) with size ``sizes[i]`` along `dim`."""
    if not isinstance(template, torch.Tensor):
        raise TypeError(f"template must be a tensor, got {type(template).__name__}")
    if not sizes or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in sizes):
        raise ValueError(f"sizes must be a non-empty list of positive ints, got {sizes!r}")
    gen = torch.Generator().manual_seed(seed)
    out = []
    for s in sizes:
        shape = list(template.shape)
        shape[dim] = s
        out.append(torch.randn(shape, generator=gen).to(device=template.device, dtype=template.dtype))
    return out


def shape_sweep(
    fn: Callable,
    inputs: Sequence[torch.Tensor],
    *,
    dynamic: bool | None = None,
    mark_dynamic: int | None = None,
    backend: str = "inductor",
    label: str | None = None,
    progress: bool = True,
) -> SweepResult:
    """Compile `fn` afresh and call it once per input, counting the graphs each call compiled, with Dynamo's
    recompile reason and Inductor's FX cache result. Resets Dynamo before and after, so no other cell's
    compiled code is reused, nor this sweep's by later cells.
    """
    check_callable(fn)
    if isinstance(inputs, torch.Tensor) or not inputs or not all(isinstance(x, torch.Tensor) for x in inputs):
        raise TypeError("inputs must be a non-empty list of tensors (see batch_inputs)")
    if mark_dynamic is not None and (isinstance(mark_dynamic, bool) or not isinstance(mark_dynamic, int)):
        raise TypeError(f"mark_dynamic must be a dimension index or None, got {mark_dynamic!r}")
    if dynamic not in (None, True, False):
        raise ValueError(f"dynamic must be None, True or False, got {dynamic!r}")
    label = label or f"dynamic={dynamic}" + (f", mark_dynamic(dim {mark_dynamic})" if mark_dynamic is not None else "")
    torch._dynamo.reset()
    counter = CompileCounter(backend)
    compiled = torch.compile(fn, backend=counter, dynamic=dynamic)
    graphs_before = _dynamo_graphs()
    device = inputs[0].device
    rows = []
    start_all = time.perf_counter()
    for i, x in enumerate(inputs):
        if mark_dynamic is not None:
            x = x.clone()  # the mark stays on the tensor: never mark the caller's inputs
            torch._dynamo.mark_dynamic(x, mark_dynamic)
        n_before, reasons_before, cache_before = len(counter.graphs), len(_guard_failures()), _inductor_cache_counts()
        start = time.perf_counter()
        with torch.no_grad():
            compiled(x)
        synchronize(device)
        seconds = time.perf_counter() - start
        new = counter.graphs[n_before:]
        reasons = _guard_failures()[reasons_before:]
        cache_after = _inductor_cache_counts()
        fx_cache = ", ".join(k for k in ("hit", "miss", "bypass") if cache_after[k] > cache_before[k])
        kind, what = _graph_kind(new[-1], x) if new else ("reused", "reused a compiled graph")
        row = {
            "call": i + 1,
            "input_shape": tuple(x.shape),
            "new_graphs": len(new),
            "graphs_so_far": len(counter.graphs),
            "graph": kind,
            "why": reasons[-1] if (new and reasons) else ("first call" if new and i == 0 else ""),
            "fx_cache": fx_cache,
            "seconds": seconds,
        }
        rows.append(row)
        if progress:
            print(f"[{label}] call {i + 1}/{len(inputs)} input {tuple(x.shape)}: {what} in {seconds:.2f} s", flush=True)
    result = SweepResult(
        label=label,
        backend=backend,
        dynamic=dynamic,
        mark_dynamic=mark_dynamic,
        table=pd.DataFrame(rows),
        graphs=tuple(counter.graphs),
        dynamo_graphs=_dynamo_graphs() - graphs_before,
        seconds=time.perf_counter() - start_all,
        notes={"torch_frame_count": counter.frame_count, "torch_op_count": counter.op_count},
    )
    torch._dynamo.reset()  # leave no compiled code of this sweep behind for later cells
    return result


def sweep_summary(*sweeps: SweepResult) -> pd.DataFrame:
    """One row per sweep: calls, distinct shapes, compiles, dynamic graphs, time spent compiling."""
    if not sweeps or not all(isinstance(s, SweepResult) for s in sweeps):
        raise TypeError("sweep_summary takes SweepResult objects (from shape_sweep)")
    return pd.DataFrame([s.summary() for s in sweeps])
