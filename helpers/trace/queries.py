"""Questions the lessons ask of a trace, answered as numbers or small tables (no torch needed)."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .dtypes import from_cpp
from .kernel_names import decode_kernel
from .model import NoKernelsError, Trace, check_trace

_DECODED = ("short_name", "family", "source", "op", "tile", "layout", "bias")


def pick_step(trace: Trace, step: int | None) -> int:
    """`step` checked against the trace's profiler steps; None picks the first. Clear errors otherwise."""
    check_trace(trace)
    steps = trace.steps
    if step is None:
        if not steps:
            raise ValueError(f"{trace.info.describe()} has no profiler steps: pass step= explicitly")
        return steps[0]
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)):
        raise TypeError(f"step must be a profiler step number, got {step!r}")
    if step not in steps:
        raise ValueError(f"step {step!r} is not in this trace; it has steps {steps}")
    return int(step)


def kernel_table(trace: Trace, step: int | None = None, decode: bool = True) -> pd.DataFrame:
    """The device events of one profiler step (default: the first) in launch order, with the fields of
    :func:`helpers.decode_kernel` the lessons read when `decode`."""
    step = pick_step(trace, step)
    kernels = trace.kernels(allow_empty=True)
    rows = kernels[kernels["step"] == step]
    if rows.empty:
        raise NoKernelsError(
            f"step {step} of {trace.info.describe()} holds no kernels: on a CPU-only profile eager "
            "PyTorch launches none (read ops() instead)"
        )
    out = rows[["name", "kind", "duration_us", "launched_by", "input_shapes"]].reset_index(drop=True)
    if decode:
        decoded = [decode_kernel(n) for n in out["name"]]
        for key in _DECODED:
            out[key] = pd.Series([d.get(key) for d in decoded], dtype=object)
        out = out[
            [
                "short_name",
                "kind",
                "family",
                "source",
                "op",
                "tile",
                "layout",
                "bias",
                "duration_us",
                "launched_by",
                "input_shapes",
                "name",
            ]
        ]
    out.attrs["trace"] = f"{trace.info.describe()}, step {step}"
    return out


def trace_cards(*traces: Trace) -> pd.DataFrame:
    """One row per trace: what it is, where and when it was recorded, and what it holds per step."""
    if not traces:
        raise ValueError("trace_cards needs at least one Trace")
    rows = []
    for i, trace in enumerate(traces):
        check_trace(trace, f"traces[{i}]")
        info = trace.info
        ev = trace.events
        n_steps = max(len(trace.steps), 1)
        kernels = trace.kernels(allow_empty=True)
        device_events = int((kernels["kind"] != "cpu-generated").sum())
        rows.append(
            {
                "label": info.label,
                "kind": {"live": "live profile", "reference": "reference trace", "file": "trace file"}.get(
                    info.source, info.source
                ),
                "device": info.device,
                "torch": info.torch_version,
                "recorded_on": info.recorded_on,
                "steps": len(trace.steps),
                "device_events_per_step": device_events / n_steps,
                "cpu_ops_per_step": int((ev["cat"] == "cpu_op").sum()) / n_steps,
            }
        )
    return pd.DataFrame(rows)


def device_properties(trace: Trace) -> dict[str, Any]:
    """The first GPU's properties as the profiler wrote them; ValueError without them (a CPU-only run), so a
    lesson never computes with a missing SM count."""
    check_trace(trace)
    props = [p for p in trace._tables.device_properties if isinstance(p, dict)]
    if not props:
        raise ValueError(f"{trace.info.describe()} records no GPU properties (a CPU-only profile?)")
    return dict(props[0])


def mm_dims(input_shapes: str) -> tuple[int, int, int]:
    """``(m, n, k)`` of a matrix product from its recorded input shapes: the first two consecutive 2-D shapes
    whose inner sizes agree (skipping addmm's bias, an ``out=`` tensor and scalars)."""
    if not isinstance(input_shapes, str):
        raise TypeError(
            f"input_shapes must be the recorded text such as '[[8192, 768], [768, 3072]]', "
            f"got {type(input_shapes).__name__}"
        )
    try:
        shapes = ast.literal_eval(input_shapes) if input_shapes else []
    except (ValueError, SyntaxError) as err:
        raise ValueError(f"cannot read shapes from {input_shapes!r}") from err
    matrices = [s for s in shapes if isinstance(s, list) and len(s) == 2]
    if len(matrices) < 2:
        raise ValueError(f"{input_shapes!r} does not hold two matrix operands")
    for (m, k), (k2, n) in zip(matrices, matrices[1:]):
        if k == k2:
            return int(m), int(n), int(k)
    raise ValueError(f"no two consecutive matrices in {input_shapes!r} have matching inner dimensions")


def kernels_per_forward(trace: Trace, kinds: Iterable[str] | None = ("kernel",)) -> int:
    """How many device events one profiled call launches (one call per step); ValueError when steps disagree."""
    check_trace(trace)
    if not trace.steps:
        raise ValueError(f"{trace.info.describe()} has no profiler steps to count kernels per call")
    kernels = trace.kernels()
    if kinds is not None:
        if isinstance(kinds, str):
            kinds = (kinds,)
        kinds = tuple(kinds)
        known = {"kernel", "memset", "memcpy", "cpu-generated"}
        if not set(kinds) <= known:
            raise ValueError(f"unknown kinds {sorted(set(kinds) - known)}; use some of {sorted(known)}")
        kernels = kernels[kernels["kind"].isin(kinds)]
    counts = kernels.groupby("step").size().reindex(trace.steps, fill_value=0)
    if counts.nunique() != 1:
        raise ValueError(f"steps launch different numbers of kernels: {counts.to_dict()}")
    return int(counts.iloc[0])


def kernels_under(trace: Trace, op: str) -> float:
    """Device events launched inside one call of `op`, children included, averaged over calls."""
    check_trace(trace)
    chain = trace.chain(op)
    calls = int(chain["calls_of_root"].iloc[0])
    launched = chain.loc[chain["kind"] != "op", "count"].sum()
    return float(launched) / calls


def op_costs(trace: Trace, names: Sequence[str]) -> pd.DataFrame:
    """Per-call self CPU time, device time and kernels (children included) of the named operators."""
    check_trace(trace)
    if isinstance(names, str) or not names:
        raise TypeError("names must be a non-empty list of operator names such as ['aten::t', 'aten::copy_']")
    ops = trace.ops().set_index("name")
    missing = [n for n in names if n not in ops.index]
    if missing:
        raise ValueError(f"operators {missing} are not in {trace.info.describe()}; present: {list(ops.index[:20])}")
    rows = []
    for n in names:
        row = ops.loc[n]
        calls = int(row["calls"])
        rows.append(
            {
                "name": n,
                "calls": calls,
                "self_cpu_us_per_call": float(row["self_cpu_us"]) / calls,
                "device_us_per_call": float(row["device_total_us"]) / calls,
                "kernels_per_call": kernels_under(trace, n),
            }
        )
    out = pd.DataFrame(rows)
    out.attrs["trace"] = trace.info.describe()
    return out


def op_call_times(trace: Trace, names: Sequence[str] | None = None) -> pd.DataFrame:
    """Each operator's calls per call: median and fastest next to the total. ``ops()`` sums calls as
    ``key_averages()`` does, so one stalled call can be the total; the median does not move."""
    check_trace(trace)
    if names is not None and (isinstance(names, str) or not names):
        raise TypeError("names must be a non-empty list of operator names such as ['aten::t', 'aten::addmm'], or None")
    ev = trace.events
    is_op = (ev["cat"] == "cpu_op") & ~ev["on_device"]
    if names is not None:
        is_op &= ev["name"].isin(list(names))
    calls = ev[is_op]
    if names is not None:
        missing = [n for n in names if n not in set(calls["name"])]
        if missing:
            raise ValueError(f"operators {missing} are not in {trace.info.describe()}")
    if calls.empty:
        raise ValueError(f"{trace.info.describe()} has no operator events (category cpu_op)")
    host_children = ev[(ev["parent"] >= 0) & ~ev["on_device"]].groupby("parent")["dur"].sum()
    self_us = calls["dur"] - host_children.reindex(calls.index, fill_value=0.0).to_numpy()
    grouped = calls.assign(self_us=self_us).groupby("name", sort=False)
    out = pd.DataFrame(
        {
            "calls": grouped.size(),
            "total_us": grouped["dur"].sum(),
            "median_us": grouped["dur"].median(),
            "min_us": grouped["dur"].min(),
            "max_us": grouped["dur"].max(),
            "self_median_us": grouped["self_us"].median(),
        }
    )
    out["worst_share"] = out["max_us"] / out["total_us"].where(out["total_us"] > 0)
    device = trace.ops().set_index("name")["device_total_us"]
    out["device_us_per_call"] = device.reindex(out.index).fillna(0.0) / out["calls"]
    out = out.reindex(list(names)) if names is not None else out.sort_values("median_us", ascending=False)
    out = out.reset_index().rename(columns={"index": "name"})
    cols = ["name", "calls", "total_us", "median_us", "min_us", "max_us", "worst_share", "self_median_us"]
    out = out[[*cols, "device_us_per_call"]]
    out.attrs["trace"] = trace.info.describe()
    return out


# The CUDA API calls a profile records on the CPU, and which API each belongs to.
_CUDA_API = {"cuda_runtime": "CUDA runtime API (libcudart)", "cuda_driver": "CUDA driver API (libcuda)"}


def launch_calls(trace: Trace, step: int | None = None) -> pd.DataFrame:
    """The CUDA API calls of one profiler step (default: the first) in order: runtime (``cuda*``) or driver
    (``cu*``), the operator they ran in, their CPU time and the device event they queued."""
    step = pick_step(trace, step)
    ev = trace.events
    api = ev[ev["cat"].isin(list(_CUDA_API)) & (ev["step"] == step)].sort_values("ts", kind="stable")
    names, cats, parent = ev["name"].to_numpy(), ev["cat"].to_numpy(), ev["parent"].to_numpy()
    launched = ev[ev["on_device"] & (ev["launch"] >= 0)]
    by_launch = dict(zip(launched["launch"].astype(int), launched["name"]))

    def caller(i: int) -> str | None:
        j = int(parent[i])
        while j >= 0 and cats[j] not in ("cpu_op", "user_annotation"):
            j = int(parent[j])
        return str(names[j]) if j >= 0 else None

    out = pd.DataFrame(
        {
            "call": api["name"].to_numpy(),
            "api": api["cat"].map(_CUDA_API).to_numpy(),
            "called_by": [caller(i) for i in api.index],
            "cpu_us": api["dur"].to_numpy(),
            "launches": [decode_kernel(by_launch[i])["short_name"] if i in by_launch else "" for i in api.index],
        }
    )
    out.attrs["trace"] = f"{trace.info.describe()}, step {step}"
    return out


@dataclass(frozen=True)
class OpInput:
    """The first tensor input of an operator as the profiler recorded it."""

    op: str
    shape: tuple[int, ...]
    dtype: str
    itemsize: int

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape)) if self.shape else 1

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize


def op_input(trace: Trace, op: str) -> OpInput:
    """Shape, dtype and size of the first tensor input of `op`, from the recorded shapes."""
    check_trace(trace)
    if not isinstance(op, str) or not op:
        raise TypeError(f"op must be an operator name such as 'aten::gelu', got {op!r}")
    ev = trace.events
    rows = ev[(ev["name"] == op) & (ev["cat"] == "cpu_op")]
    if rows.empty:
        raise ValueError(f"no operator {op!r} in {trace.info.describe()}")
    dims_text, types_text = rows["input_dims"].iloc[0], rows["input_types"].iloc[0]
    if not dims_text:
        raise ValueError(f"{trace.info.describe()} was recorded without shapes (record_shapes=False)")
    dims = ast.literal_eval(dims_text)
    types = ast.literal_eval(types_text) if types_text else []
    for i, d in enumerate(dims):
        if isinstance(d, list) and d and i < len(types) and types[i]:
            found = from_cpp(types[i])
            if found is None:
                raise ValueError(f"{op}: unknown element type {types[i]!r} of input {i}")
            return OpInput(op, tuple(int(v) for v in d), found.torch_name, found.itemsize)
    raise ValueError(f"{op} has no tensor input with a recorded shape in {trace.info.describe()}")
