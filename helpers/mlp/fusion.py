"""Where fusing the GeLU and the product wins, read from traces: eager's two memory-bound passes move 5
tensors, a fused kernel 3, so time follows bytes."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from ..measure import ceilings as ceilings_mod
from ..measure.roofline import achieved, dtype_size
from ..trace.kernel_names import decode_kernel
from ..trace.model import Trace, check_trace
from ..trace.queries import op_input
from .plans import POINTWISE_ROLES, TENSORS_MOVED, kernel_role


@dataclass(frozen=True)
class GeGLUSizes:
    """The size of the GeGLU's operands: ``tokens x hidden`` elements of ``dtype``."""

    tokens: int
    hidden: int
    dtype: str
    source: str  # where the sizes were read

    @property
    def elements(self) -> int:
        return self.tokens * self.hidden

    @property
    def itemsize(self) -> int:
        return dtype_size(self.dtype)

    def tensor_bytes(self) -> int:
        """Bytes of one [tokens, hidden] tensor."""
        return self.elements * self.itemsize


def geglu_sizes(trace: Trace) -> GeGLUSizes:
    """Tokens, hidden size and dtype of the GeGLU in `trace`: from the recording's provenance, else the first
    ``aten::mm`` recorded with shapes (the gate projection)."""
    check_trace(trace)
    extra = trace.info.extra or {}
    shapes, dtype = extra.get("shapes"), extra.get("dtype")
    if isinstance(shapes, dict) and {"batch", "seq", "hidden"} <= set(shapes) and dtype:
        return GeGLUSizes(int(shapes["batch"]) * int(shapes["seq"]), int(shapes["hidden"]), str(dtype), "provenance")
    ev = trace.events
    mm = ev[(ev["name"] == "aten::mm") & (ev["cat"] == "cpu_op") & (ev["input_dims"] != "")]
    if mm.empty:
        raise ValueError(
            f"{trace.info.describe()}: no provenance shapes and no aten::mm with recorded shapes; "
            "profile with record_shapes=True (helpers.profile does by default)"
        )
    first = op_input(trace, "aten::mm")  # the activations [tokens, dim] and their dtype
    dims = ast.literal_eval(mm["input_dims"].iloc[0])  # [[tokens, dim], [dim, hidden], (out)]
    if len(first.shape) != 2 or len(dims) < 2 or len(dims[1]) != 2:
        raise ValueError(f"unexpected aten::mm shapes {dims} in {trace.info.describe()}")
    return GeGLUSizes(first.shape[0], int(dims[1][1]), first.dtype, "shapes of the first aten::mm")


def geglu_work(trace: Trace) -> pd.DataFrame:
    """The events computing the GeGLU, per step: a fused kernel or eager's gelu and mul (on a CPU: the generated
    C++ kernel or the ``aten::gelu``/``aten::mul`` ops)."""
    check_trace(trace)
    kernels = trace.kernels(allow_empty=True)
    if not kernels.empty:
        rows = kernels.assign(role=[kernel_role(n) for n in kernels["name"]])
        rows = rows[rows["role"].isin(list(TENSORS_MOVED))]
        if not rows.empty:
            where = rows["kind"].map({"cpu-generated": "CPU kernel"}).fillna("device kernel")
            return pd.DataFrame(
                {
                    "step": rows["step"].to_numpy(),
                    "name": rows["name"].to_numpy(),
                    "role": rows["role"].to_numpy(),
                    "duration_us": rows["duration_us"].to_numpy(),
                    "where": where.to_numpy(),
                }
            )
    if trace.device_lanes:
        raise ValueError(f"{trace.info.describe()} has device kernels but none computes gelu*mul")
    ev = trace.events
    ops = ev[(ev["cat"] == "cpu_op") & ev["name"].isin(["aten::gelu", "aten::mul"]) & (ev["step"] >= 0)]
    if ops.empty:
        raise ValueError(
            f"no GeGLU work found in {trace.info.describe()}: no fused kernel, no gelu/mul kernels "
            "or operators. (A Triton kernel run by the CPU interpreter leaves no event to time.)"
        )
    self_us = ops["dur"] - ev.loc[ev["parent"].isin(ops.index) & ~ev["on_device"]].groupby("parent")[
        "dur"
    ].sum().reindex(ops.index, fill_value=0.0)
    return pd.DataFrame(
        {
            "step": ops["step"].to_numpy(),
            "name": ops["name"].to_numpy(),
            "role": ops["name"].str.removeprefix("aten::").to_numpy(),
            "duration_us": self_us.to_numpy(),
            "where": "CPU operator",
        }
    )


# The ceilings of the machine that recorded a trace (one owner: helpers.measure.ceilings).
default_ceilings = ceilings_mod.ceilings_for


def geglu_row(label: str, trace: Trace, ceilings: ceilings_mod.Ceilings | None = None) -> dict:
    """One variant: what computes the GeGLU, how long per forward (median over the profiled steps),
    bytes moved, share of the bandwidth."""
    work = geglu_work(trace)
    sizes = geglu_sizes(trace)
    ceil = ceilings or default_ceilings(trace)
    steps = sorted(work["step"].unique())
    per_step = work.groupby("step")["duration_us"].sum()
    first = work[work["step"] == steps[0]]
    nbytes = sum(TENSORS_MOVED[r] for r in first["role"]) * sizes.tensor_bytes()
    duration = float(per_step.median())  # robust to one slow step on a busy CPU
    rate = achieved(duration, bytes_moved=nbytes, ceilings=ceil)
    return {
        "variant": label,
        "device": trace.info.device,
        "computed by": " + ".join(first["name"].map(lambda n: decode_kernel(n)["short_name"])),
        "launches": len(first),
        "tensors moved": sum(TENSORS_MOVED[r] for r in first["role"]),
        "MB moved": nbytes / 1e6,
        "time_us": duration,
        "achieved_TBps": rate["achieved_tbps"],
        "pct_of_bandwidth": rate["pct_of_bandwidth"],
        "floor_us": rate["memory_floor_us"],
        "shape": f"[{sizes.tokens}, {sizes.hidden}] {sizes.dtype}",
        "ceilings": ceil.label,
    }


def geglu_table(traces: Mapping[str, Trace], ceilings: ceilings_mod.Ceilings | None = None) -> pd.DataFrame:
    """One row per variant (label -> trace): see :func:`geglu_row`. Variants are kept in the given order."""
    if not isinstance(traces, Mapping) or not traces:
        raise TypeError("traces must be a non-empty dict {label: Trace}")
    return pd.DataFrame([geglu_row(label, t, ceilings) for label, t in traces.items()])


ROLE_ORDER = ("gate/up GEMMs", "GeGLU pointwise", "down GEMM", "other", "memset")


def kernels_by_role(traces: Mapping[str, Trace], ceilings: ceilings_mod.Ceilings | None = None) -> pd.DataFrame:
    """Each variant's time by part of the MLP (gate/up GEMMs, down GEMM, GeGLU pointwise, memset, other), from
    recorded shapes and kernel names, never from what a variant is supposed to do, against its floor."""
    from ..measure.kernel_floors import kernel_floors

    if not isinstance(traces, Mapping) or not traces:
        raise TypeError("traces must be a non-empty dict {label: Trace}")
    rows = []
    for label, trace in traces.items():
        hidden = geglu_sizes(trace).hidden
        floors = kernel_floors(trace, ceilings if ceilings is not None else default_ceilings(trace), step="all")

        def role(row: pd.Series) -> str:
            if row["family"] == "memset":
                return "memset"
            if row["gemm_mnk"] is not None and not (isinstance(row["gemm_mnk"], float) and pd.isna(row["gemm_mnk"])):
                _m, n, k = row["gemm_mnk"]
                return "gate/up GEMMs" if n == hidden else "down GEMM" if k == hidden else "other"
            return "GeGLU pointwise" if kernel_role(row["name"]) in POINTWISE_ROLES else "other"

        floors["role"] = floors.apply(role, axis=1)
        per_step = floors.groupby(["role", "step"]).agg(
            us=("duration_us", "sum"), floor=("floor_us", lambda s: s.sum(min_count=1)), launches=("name", "size")
        )
        for r, group in per_step.groupby(level="role"):
            names = floors.loc[floors["role"] == r, "short_name"]
            us, floor = float(group["us"].median()), float(group["floor"].median())
            rows.append(
                {
                    "role": r,
                    "variant": label,
                    "kernels": ", ".join(dict.fromkeys(names)),
                    "launches": float(group["launches"].median()),
                    "us_per_forward": us,
                    "floor_us": floor,
                    "pct_of_floor": 100 * floor / us if us > 0 and floor == floor else float("nan"),
                }
            )
    out = pd.DataFrame(rows)
    out["_o"] = out["role"].map({r: i for i, r in enumerate(ROLE_ORDER)})
    out["_v"] = out["variant"].map({v: i for i, v in enumerate(traces)})
    return out.sort_values(["_o", "_v"], kind="stable").drop(columns=["_o", "_v"]).reset_index(drop=True)
