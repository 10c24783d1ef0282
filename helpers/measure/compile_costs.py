"""What ``torch.compile`` costs: the first call, the CPU work of every call, and shape changes.

- :func:`time_first_call`: the first call of a compiled function (where it compiles) against
  the calls after it, with Inductor's on-disk cache hits and misses, measured.
- :func:`compile_wrapper_rows` and :func:`call_split`: the CPU rows torch.compile adds around a
  compiled forward, and each profiled call's CPU time against its device time, from a trace.
- :func:`shape_sweep`: call a compiled model on a sequence of input shapes and *count* the
  graphs Dynamo compiles, with the reason for each recompile. The counting backend
  (:class:`CompileCounter`) wraps the real backend; the count is checked against Dynamo's own
  counter.

Long calls print one line of progress each, so a learner never stares at a silent cell.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch

from ..checks import check_callable
from ..trace.model import Trace
from .device import device_of, synchronize
from .timing import time_per_call

# Rows torch.compile adds around a compiled forward (names as the profiler writes them).
WRAPPER_PREFIXES: tuple[str, ...] = (
    "TorchDynamo Cache Lookup",
    "Torch-Compiled Region",
    "Pregraph bytecode",
    "AOTDispatcher Runtime Wrapper Prologue",
    "CompiledFunction",
    "## Call CompiledFxGraph",
)


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


# ---------------------------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FirstCall:
    """The first call of a compiled function against the calls after it."""

    first_s: float
    later_s: float
    fx_cache: dict[str, int]

    @property
    def compile_s(self) -> float:
        """First call minus a normal call: the time spent compiling (tracing, code generation, C++/Triton builds)."""
        return max(self.first_s - self.later_s, 0.0)

    def as_frame(self) -> pd.DataFrame:
        cache = ", ".join(f"{k} {v}" for k, v in self.fx_cache.items())
        return pd.DataFrame(
            [
                ("first call (compiles)", self.first_s, f"Inductor FX graph cache: {cache}"),
                ("later call (median)", self.later_s, ""),
                ("compile time", self.compile_s, "first minus later"),
            ],
            columns=["what", "seconds", "note"],
        )

    def _repr_html_(self) -> str:
        return self.as_frame().to_html(index=False, border=0, float_format=lambda v: f"{v:.4g}")


def time_first_call(fn: Callable, *inputs: Any, later: int = 5, progress: bool = True) -> FirstCall:
    """Time the first call of `fn` (a freshly compiled function: it compiles now) and the next `later` calls.

    Also reports Inductor's on-disk FX graph cache hits and misses during the first call: a
    second process (or a re-run) can skip most of the work, so a fast "compile" may be a cache hit.
    """
    check_callable(fn)
    device = device_of(inputs)
    before = _inductor_cache_counts()
    if progress:
        print("first call: compiling ...", flush=True)
    with torch.no_grad():
        start = time.perf_counter()
        fn(*inputs)
        synchronize(device)
        first = time.perf_counter() - start
    after = _inductor_cache_counts()
    later_s = time_per_call(fn, *inputs, repeats=later, warmup=0)
    result = FirstCall(first, later_s, {k: after[k] - before[k] for k in after})
    if progress:
        print(f"first call took {first:.2f} s, later calls {later_s * 1e3:.2f} ms", flush=True)
    return result


def first_calls(fns: dict[str, Callable], inputs: Sequence[torch.Tensor], progress: bool = True) -> pd.DataFrame:
    """The first call of each function with each input, in order, and the graphs Dynamo compiled meanwhile.

    For comparing start-up costs: a ``torch.compile``'d model compiles on its first call and
    again when a shape change fails a guard; a hand-written Triton kernel is compiled by Triton's
    JIT on its first launch for a new specialisation; eager code compiles nothing. Columns:
    ``variant``, ``input_shape``, ``first_call_s``, ``graphs_compiled``, and ``later_call_s`` (the
    median of later calls with that input). Each call is synchronised.
    """
    if not isinstance(fns, dict) or not fns:
        raise TypeError("fns must be a non-empty dict {label: function or module}")
    if isinstance(inputs, torch.Tensor) or not inputs or not all(isinstance(x, torch.Tensor) for x in inputs):
        raise TypeError("inputs must be a non-empty list of tensors")
    rows = []
    for label, fn in fns.items():
        check_callable(fn)
        for x in inputs:
            before = _dynamo_graphs()
            with torch.no_grad():
                start = time.perf_counter()
                fn(x)
                synchronize(x.device)
                first = time.perf_counter() - start
            compiled = _dynamo_graphs() - before
            later = time_per_call(fn, x, repeats=3, warmup=0)
            rows.append(
                {
                    "variant": label,
                    "input_shape": tuple(x.shape),
                    "first_call_s": first,
                    "graphs_compiled": compiled,
                    "later_call_s": later,
                }
            )
            if progress:
                print(
                    f"[{label}] input {tuple(x.shape)}: first call {first:.2f} s ({compiled} graph(s) compiled), "
                    f"later calls {later * 1e3:.2f} ms",
                    flush=True,
                )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# the compiled call in a trace
# ---------------------------------------------------------------------------------------------


def _wrapper_name(name: str) -> str | None:
    for prefix in WRAPPER_PREFIXES:
        if name.startswith(prefix):
            return prefix if prefix.startswith("##") else name
    return None


def compile_wrapper_rows(trace: Trace) -> pd.DataFrame:
    """The rows torch.compile adds around a compiled forward, with their CPU cost per call.

    Columns: ``row`` (the graph hash of ``## Call CompiledFxGraph <hash> ##`` is cut off),
    ``calls``, ``self_cpu_us_per_call`` (time in the row itself, not in the ops it runs),
    ``cpu_total_us_per_call``. Empty for an eager trace.
    """
    if not isinstance(trace, Trace):
        raise TypeError(f"expected a helpers.Trace, got {type(trace).__name__}")
    ops = trace.ops(include_annotations=True)
    ops = ops.assign(row=ops["name"].map(_wrapper_name))
    ops = ops[ops["row"].notna()]
    grouped = (
        ops.groupby("row", sort=False)
        .agg(calls=("calls", "sum"), self_cpu_us=("self_cpu_us", "sum"), cpu_total_us=("cpu_total_us", "sum"))
        .reset_index()
    )
    grouped["self_cpu_us_per_call"] = grouped["self_cpu_us"] / grouped["calls"]
    grouped["cpu_total_us_per_call"] = grouped["cpu_total_us"] / grouped["calls"]
    order = {p: i for i, p in enumerate(WRAPPER_PREFIXES)}
    grouped["_o"] = [min((order[p] for p in WRAPPER_PREFIXES if r.startswith(p)), default=99) for r in grouped["row"]]
    out = grouped.sort_values("_o", kind="stable")[["row", "calls", "self_cpu_us_per_call", "cpu_total_us_per_call"]]
    out = out.reset_index(drop=True)
    out.attrs["trace"] = trace.info.describe()
    return out


def call_split(trace: Trace) -> pd.DataFrame:
    """Each profiled call's CPU time against its device time, one row per profiler step.

    ``cpu_us``: the call's span on the CPU (the ``record_function`` label ``helpers.profile`` puts
    around each call); ``device_us``: the summed time of the kernels, memsets and copies it
    launched; ``cpu_minus_device_us``; ``cpu_bound``: the CPU took longer than the device work,
    so with a synchronise after every call, the CPU side sets the pace.
    """
    if not isinstance(trace, Trace):
        raise TypeError(f"expected a helpers.Trace, got {type(trace).__name__}")
    ev = trace.events
    host = ev[
        ~ev["on_device"]
        & (ev["cat"] == "user_annotation")
        & (ev["step"] >= 0)
        & ~ev["name"].str.startswith("ProfilerStep#")
    ]
    if host.empty:
        raise ValueError(f"{trace.info.describe()} has no per-call annotation (record it with helpers.profile)")
    outer = host[host["depth"] == host["depth"].min()]
    cpu = outer.groupby("step")["dur"].max()
    k = trace.kernels(allow_empty=True)
    k = k[k["kind"] != "cpu-generated"]
    device = k.groupby("step")["duration_us"].sum().reindex(cpu.index, fill_value=0.0)
    out = pd.DataFrame({"step": cpu.index.astype(int), "cpu_us": cpu.to_numpy(), "device_us": device.to_numpy()})
    out["cpu_minus_device_us"] = out["cpu_us"] - out["device_us"]
    out["cpu_bound"] = out["cpu_us"] > out["device_us"]
    out.attrs["trace"] = trace.info.describe()
    return out


# ---------------------------------------------------------------------------------------------
# counting compiles
# ---------------------------------------------------------------------------------------------


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


def _shape_text(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return "(" + ", ".join(str(s) for s in value.shape) + ")"
    return str(value)


class CompileCounter:
    """A ``torch.compile`` backend that records every graph it is given, then compiles it with `backend`.

    ``torch.compile(model, backend=CompileCounter("inductor"))`` compiles exactly as
    ``torch.compile(model)`` does; ``counter.graphs`` lists what was compiled. Dynamo decides when
    to compile (guards, dynamic shapes); the backend only decides how long each compile takes, so
    ``CompileCounter("eager")`` counts the same graphs in a fraction of the time.
    """

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
        self.graphs: list[GraphRecord] = []

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
        return f"<SweepResult {self.label}: {self.compiles} compiles in {len(self.table)} calls>\n{self.table.to_string(index=False)}"

    def _repr_html_(self) -> str:
        head = (
            f"<b>{html.escape(self.label)}</b>: {self.compiles} graph(s) compiled in {len(self.table)} calls "
            f"(backend {html.escape(self.backend)}, dynamic={self.dynamic}, mark_dynamic={self.mark_dynamic})"
        )
        return head + self.table.to_html(index=False, border=0, float_format=lambda v: f"{v:.3g}")


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
    """Compile `fn` afresh and call it once per input, counting the graphs compiled at each call.

    - `dynamic`: passed to ``torch.compile`` (None: Dynamo's default, "automatic dynamic").
    - `mark_dynamic`: a dimension to mark dynamic on every input with ``torch._dynamo.mark_dynamic``.
    - `backend`: the real backend behind the counter ("inductor", or "eager" to count fast).

    Calls ``torch._dynamo.reset()`` before and after (Dynamo keeps compiled code per Python
    function, so an earlier compile of the same model would otherwise be reused, and this sweep's
    graphs would be reused by later cells). Columns of the table: ``call``,
    ``input_shape``, ``new_graphs``, ``graphs_so_far``, ``graph`` (static / dynamic and its
    symbolic input shape, or "reused"), ``why`` (Dynamo's recompile reason), ``fx_cache``
    (Inductor's on-disk cache during the call: "hit" when an identical graph was compiled before,
    "miss"; empty for other backends), ``seconds``.
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
        if new:
            g = new[-1]
            kind = ("dynamic " if g.dynamic else "static ") + g.input_like(x)
        else:
            kind = "reused"
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
            what = f"compiled a {kind} graph" if new else "reused a compiled graph"
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
    )
    torch._dynamo.reset()  # leave no compiled code of this sweep behind for later cells
    return result


def sweep_summary(*sweeps: SweepResult) -> pd.DataFrame:
    """One row per sweep: calls, distinct shapes, compiles, dynamic graphs, time spent compiling."""
    if not sweeps or not all(isinstance(s, SweepResult) for s in sweeps):
        raise TypeError("sweep_summary takes SweepResult objects (from shape_sweep)")
    return pd.DataFrame([s.summary() for s in sweeps])
