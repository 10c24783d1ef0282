"""Achieved TFLOP/s of matrix products, attention and convolutions from the shapes a trace recorded, no re-run:
each kernel is credited to the innermost such operator above its launcher, so nothing counts twice."""

from __future__ import annotations

import ast
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from . import files as tracefile
from .aten_ops import op_base
from .categories import device_work_mask
from .correlation import graph_launched
from .dtypes import from_cpp
from .flop_counts import (
    CONVOLUTION_BASIS,
    CONVOLUTIONS,
    FORMULAS,
    OUT_DTYPE_AT,
    SCALAR_TYPES,
    conv_forward_flops,
    count,
    parse_shapes,
)
from .links import marked_ancestor
from .model import Trace, check_trace

__all__ = ["achieved_flops", "parse_shapes"]  # parse_shapes: read here by helpers.diagnose

# `Concrete Inputs` (a convolution's stride and padding, a scaled GEMM's out_dtype) are read back
# from a streamed trace's file up to this size
CONCRETE_INPUTS_MAX_BYTES = 50_000_000


def _concrete_inputs(trace: Trace, rows: np.ndarray) -> dict[int, list]:
    """`Concrete Inputs` of some operator rows, read from the trace's kept JSON (empty when not kept)."""
    if not len(rows):
        return {}
    doc = trace._document
    source = trace._tables.source
    if doc is None and source is not None and tracefile.text_size(source.path) < CONCRETE_INPUTS_MAX_BYTES:
        try:  # a streamed trace: read the file again, only now that a convolution asks for it
            source.check_unchanged()
            doc = tracefile.read_document(source.path, source.max_bytes)
        except (OSError, ValueError):
            return {}
    if not isinstance(doc, dict):
        return {}
    ev = trace.events
    wanted = {}
    for r in rows:
        wanted[(ev.at[r, "name"], float(ev.at[r, "ts"]), str(ev.at[r, "pid"]), str(ev.at[r, "tid"]))] = int(r)
    names = {k[0] for k in wanted}
    out: dict[int, list] = {}
    for e in doc.get("traceEvents") or []:
        if isinstance(e, dict) and e.get("name") in names and e.get("ph") == "X":
            key = (e.get("name"), float(e.get("ts", 0.0)), str(e.get("pid", "")), str(e.get("tid", "")))
            args = e.get("args")
            if key in wanted and isinstance(args, dict) and isinstance(args.get("Concrete Inputs"), list):
                out[wanted[key]] = args["Concrete Inputs"]
    return out


def _anchors(ev: pd.DataFrame, counted: np.ndarray) -> np.ndarray:
    """For each device work row: the innermost `counted` op at or above the op that launched it (-1 if none)."""
    kernels = np.flatnonzero(device_work_mask(ev))
    launcher = ev["launched_by"].to_numpy()[kernels]
    nearest = marked_ancestor(ev["parent"].to_numpy(), counted)
    anchor = np.full(len(ev), -1, dtype=np.int64)
    found = np.where(launcher >= 0, nearest[np.maximum(launcher, 0)], -1)
    anchor[kernels] = found
    return anchor


@lru_cache(maxsize=1024)
def _first_dtype(types_text: str) -> str:
    """The dtype of an operator's first input from its recorded ``Input type`` ('' when not recorded)."""
    try:
        kinds = ast.literal_eval(types_text) if types_text else None  # stored as Python's repr of a list
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return ""
    if not isinstance(kinds, (list, tuple)) or not kinds or not isinstance(kinds[0], str):
        return ""
    found = from_cpp(kinds[0])
    return found.short if found is not None else kinds[0]


def _ceiling_rates(ceilings: Any) -> tuple[float, float | None]:
    """(matmul FLOP/s, FP8 matmul FLOP/s or None) of a ceilings object, checked."""
    rate = getattr(ceilings, "matmul_flop_per_s", None)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0:
        raise TypeError(
            "ceilings must be a Ceilings (helpers.measure_ceilings(), or a recorded reference such as "
            f"helpers.measure.ceilings.reference_ceilings_for(device)), got {type(ceilings).__name__}"
        )
    fp8 = getattr(ceilings, "fp8_matmul_flop_per_s", None)
    return float(rate), (float(fp8) if isinstance(fp8, (int, float)) and fp8 > 0 else None)


COLUMNS = [
    "op", "family", "dtype", "input_shapes", "calls", "gflop_per_call", "device_us", "us_per_call", "tflops", "kernels",
    "basis", "note"
]  # fmt: skip
NO_FP8_CEILING = "no FP8 ceiling recorded"


def achieved_flops(trace: Trace, ceilings: Any = None) -> pd.DataFrame:
    """Achieved TFLOP/s per (operator, input shapes), sorted by device time (kernels and the memsets they
    launched); a captured operator counts one call per graph replay of its kernels. With `ceilings`, the share
    of the matmul rate (FP8 rows: of the FP8 rate, when one was measured)."""
    check_trace(trace)
    rates = None if ceilings is None else _ceiling_rates(ceilings)
    cols = COLUMNS[:9] + (["ceiling_tflops", "pct_of_ceiling"] if rates else []) + COLUMNS[9:]
    ev = trace.events
    names = ev["name"].to_numpy(dtype=object)
    uniq, codes = np.unique(names, return_inverse=True)
    base = np.array([op_base(str(u)) or "" for u in uniq], dtype=object)
    known_u = np.array([b in FORMULAS or b in CONVOLUTIONS for b in base], dtype=bool)
    counted = known_u[codes] & (ev["cat"].to_numpy(dtype=object) == "cpu_op") & ~ev["on_device"].to_numpy()
    anchor = _anchors(ev, counted)
    kernels = np.flatnonzero(anchor >= 0)
    if not len(kernels):
        return pd.DataFrame(columns=cols)
    per_call = pd.DataFrame(
        {
            "call": anchor[kernels],
            "dur": ev["dur"].to_numpy()[kernels],
            "kernel": names[kernels],
            # a captured operator's kernels run once per graph replay: each replay is one more run of the call
            "replay": np.where(graph_launched(ev, kernels), ev["launch"].to_numpy()[kernels], -1),
        }
    )
    calls = per_call.groupby("call").agg(
        device_us=("dur", "sum"),
        kernels=("kernel", lambda s: sorted(set(s))),
        runs=("replay", lambda r: max(1, int(r[r >= 0].nunique()))),
    )
    call_rows = calls.index.to_numpy()
    dims = ev["input_dims"].to_numpy(dtype=object)[call_rows]
    types = ev["input_types"].to_numpy(dtype=object)[call_rows]
    ops = [str(op_base(str(n))) for n in names[call_rows]]
    asks = [r for r, op in zip(call_rows, ops) if op in CONVOLUTIONS or op in OUT_DTYPE_AT]
    concrete = _concrete_inputs(trace, np.array(asks, dtype=np.int64))
    flops, family, notes, bases = [], [], [], []
    for r, op, text in zip(call_rows, ops, dims):
        shapes = parse_shapes(text)
        note, basis = "", ""
        if op in CONVOLUTIONS:
            fam = "convolution"
            value = conv_forward_flops(shapes, concrete.get(int(r)), CONVOLUTIONS[op]) if shapes else None
            basis = CONVOLUTION_BASIS if value is not None else ""
            if value is None:
                note = "stride/padding not recorded (Concrete Inputs): FLOPs unknown"
        else:
            fam = FORMULAS[op][0]
            try:
                value, basis = count(op, shapes) if shapes else (None, "")
            except (TypeError, ValueError, IndexError):
                value = None
            if value is None:
                note = "shapes not recorded (record_shapes=True)" if not text else "shapes not understood"
            elif fam == "attention":
                note = "full count; a causal mask does about half"
        if op in OUT_DTYPE_AT and basis:
            given = concrete.get(int(r)) or []
            at = OUT_DTYPE_AT[op]
            out = SCALAR_TYPES.get(str(given[at])) if at < len(given) else None
            basis += f"; out {out}" if out else ""
        flops.append(np.nan if value is None else float(value))
        family.append(fam)
        notes.append(note)
        bases.append(basis)
    table = pd.DataFrame(
        {
            "op": [names[r] for r in call_rows],
            "family": family,
            "dtype": [_first_dtype(t) if isinstance(t, str) else "" for t in types],
            "input_shapes": dims,
            "flops": flops,
            "device_us": calls["device_us"].to_numpy(),
            "runs": calls["runs"].to_numpy(),
            "kernels": ["; ".join(k) for k in calls["kernels"]],
            "basis": bases,
            "note": notes,
        }
    )
    keys = ["op", "family", "dtype", "input_shapes", "kernels", "basis", "note"]
    grouped = table.groupby(keys, sort=False, dropna=False).agg(
        calls=("runs", "sum"), flops=("flops", "first"), device_us=("device_us", "sum")
    )
    out = grouped.reset_index()
    out["gflop_per_call"] = out["flops"] / 1e9
    out["us_per_call"] = out["device_us"] / out["calls"]
    out["tflops"] = out["flops"] * out["calls"] / (out["device_us"] * 1e6)
    if rates:
        matmul, fp8 = rates
        is_fp8 = out["dtype"].str.startswith("fp8").to_numpy()
        peak = np.where(is_fp8, np.nan if fp8 is None else fp8, matmul) / 1e12
        out["ceiling_tflops"] = peak
        out["pct_of_ceiling"] = 100.0 * out["tflops"] / peak
        if fp8 is None and is_fp8.any():
            out.loc[is_fp8, "note"] = [
                f"{n}; {NO_FP8_CEILING}" if n else NO_FP8_CEILING for n in out.loc[is_fp8, "note"]
            ]
    out = out.sort_values("device_us", ascending=False, kind="stable").reset_index(drop=True)
    return out[cols]
