"""What ``torch.compile`` costs: the first call, the CPU work of every call, and shape changes
(graph counts are in :mod:`helpers.measure.compile_counts`). Long calls print progress lines.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch

from ..checks import check_callable
from ..trace.model import Trace
from .compile_counts import _dynamo_graphs, _inductor_cache_counts
from .device import synchronize, wait_device
from .timing import readable_seconds, time_per_call

# Rows torch.compile adds around a compiled forward (names as the profiler writes them).
WRAPPER_PREFIXES: tuple[str, ...] = (
    "TorchDynamo Cache Lookup",
    "Torch-Compiled Region",
    "Pregraph bytecode",
    "AOTDispatcher Runtime Wrapper Prologue",
    "CompiledFunction",
    "## Call CompiledFxGraph",
)


# timing


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
        """The three times in seconds, with a ``time`` column a reader takes in at a glance (ms below a second)."""
        cache = ", ".join(f"{k} {v}" for k, v in self.fx_cache.items())
        rows = [
            ("first call (compiles)", self.first_s, f"Inductor FX graph cache: {cache}"),
            ("later call (median)", self.later_s, "synchronised, after untimed warm-up calls"),
            ("compile time", self.compile_s, "first minus later"),
        ]
        return pd.DataFrame(
            [(what, seconds, readable_seconds(seconds), note) for what, seconds, note in rows],
            columns=["what", "seconds", "time", "note"],
        )

    def _repr_html_(self) -> str:
        return self.as_frame().drop(columns="seconds").to_html(index=False, border=0)


def time_first_call(fn: Callable, *inputs: Any, later: int = 5, warmup: int = 5, progress: bool = True) -> FirstCall:
    """Time the first call of freshly compiled `fn` (it compiles now), then, after `warmup` untimed calls, the
    median of `later` calls synchronised one by one, with Inductor's FX graph cache hits during the first call: a
    fast "compile" may be a cache hit."""
    check_callable(fn)
    device = wait_device(fn, inputs)
    before = _inductor_cache_counts()
    if progress:
        print("first call: compiling ...", flush=True)
    with torch.no_grad():
        start = time.perf_counter()
        fn(*inputs)
        synchronize(device)
        first = time.perf_counter() - start
    after = _inductor_cache_counts()
    # the first calls after a compile still pay one-time set-up, which is not what a normal call costs
    later_s = time_per_call(fn, *inputs, repeats=later, warmup=warmup)
    result = FirstCall(first, later_s, {k: after[k] - before[k] for k in after})
    if progress:
        print(f"first call took {first:.2f} s, later calls {later_s * 1e3:.2f} ms (after warm-up)", flush=True)
    return result


def first_calls(fns: dict[str, Callable], inputs: Sequence[torch.Tensor], progress: bool = True) -> pd.DataFrame:
    """The first call of each function with each input in order, synchronised, and the graphs Dynamo compiled
    meanwhile: compile recompiles when a shape fails a guard, a Triton kernel compiles per specialisation.
    ``fx_cache_hits``: graphs whose code Inductor's on-disk cache already held (such a compile skips code generation;
    tracing the graph still costs)."""
    if not isinstance(fns, dict) or not fns:
        raise TypeError("fns must be a non-empty dict {label: function or module}")
    if isinstance(inputs, torch.Tensor) or not inputs or not all(isinstance(x, torch.Tensor) for x in inputs):
        raise TypeError("inputs must be a non-empty list of tensors")
    rows = []
    for label, fn in fns.items():
        check_callable(fn)
        for x in inputs:
            before, cache_before = _dynamo_graphs(), _inductor_cache_counts()["hit"]
            with torch.no_grad():
                start = time.perf_counter()
                fn(x)
                synchronize(x.device)
                first = time.perf_counter() - start
            compiled = _dynamo_graphs() - before
            cache_hits = _inductor_cache_counts()["hit"] - cache_before
            later = time_per_call(fn, x, repeats=3, warmup=0)
            rows.append(
                {
                    "variant": label,
                    "input_shape": tuple(x.shape),
                    "first_call_s": first,
                    "graphs_compiled": compiled,
                    "fx_cache_hits": cache_hits,
                    "later_call_s": later,
                }
            )
            if progress:
                graphs = "no graph compiled" if not compiled else f"{compiled} graph{'s' * (compiled > 1)} compiled"
                cached = f", {cache_hits} from Inductor's cache" if compiled else ""
                print(
                    f"[{label}] input {tuple(x.shape)}: first call {readable_seconds(first)} ({graphs}{cached}), "
                    f"later calls {readable_seconds(later)}",
                    flush=True,
                )
    return pd.DataFrame(rows)


# the compiled call in a trace


def _wrapper_name(name: str) -> str | None:
    for prefix in WRAPPER_PREFIXES:
        if name.startswith(prefix):
            return prefix if prefix.startswith("##") else name
    return None


def compile_wrapper_rows(trace: Trace) -> pd.DataFrame:
    """The rows torch.compile adds around a compiled forward with their CPU cost per call (empty for eager)."""
    if not isinstance(trace, Trace):
        raise TypeError(f"expected a Trace, got {type(trace).__name__}")
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
    """Each profiled call's CPU span against the device time of what it launched, one row per step; ``cpu_bound``
    when the CPU took longer, so with a synchronise per call the CPU sets the pace."""
    if not isinstance(trace, Trace):
        raise TypeError(f"expected a Trace, got {type(trace).__name__}")
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
