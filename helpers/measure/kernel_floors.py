"""Each kernel of a trace against its floor, from recorded shapes; a family with no known floor gets none
and ``basis`` says why: a floor is never guessed."""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..trace.categories import DEVICE_WORK_KIND, device_work_mask
from ..trace.dtypes import DType, from_cpp, lookup
from ..trace.kernel_names import decode_kernel
from ..trace.model import Trace, check_trace
from ..trace.queries import mm_dims, pick_step
from .ceilings import Ceilings, ceilings_for
from .roofline import achieved, gemm_bytes, gemm_flops

COLUMNS = [
    "step", "short_name", "family", "duration_us", "bytes_moved", "flops", "floor_us", "pct_of_floor", "bound_by",
    "achieved_tbps", "achieved_tflops", "basis", "gemm_mnk", "launched_by", "name"
]  # fmt: skip


def _tensors(dims_text: str, types_text: str) -> list[tuple[tuple[int, ...], DType]]:
    """(shape, element type) of each tensor argument with a recorded shape and a known element type."""
    try:
        dims = ast.literal_eval(dims_text) if dims_text else []
        types = ast.literal_eval(types_text) if types_text else []
    except (ValueError, SyntaxError):
        return []
    out = []
    for i, d in enumerate(dims):
        if isinstance(d, list) and d and all(isinstance(v, int) for v in d) and i < len(types):
            found = from_cpp(str(types[i]))
            if found is not None:
                out.append((tuple(d), found))
    return out


def _numel(shape: tuple[int, ...]) -> int:
    return int(math.prod(shape))


def _template_dims(tensors: list[tuple[tuple[int, ...], DType]]) -> tuple[int, int, int] | None:
    """(m, n, k) of an Inductor GEMM template called as (x [..., k], W [n, k] or [k, n], out [m, n])."""
    if len(tensors) < 3:
        return None
    (x, _), (w, _), (out, _) = tensors[0], tensors[1], tensors[2]
    if len(w) != 2 or len(out) != 2:
        return None
    m, k = _numel(x[:-1]), x[-1]
    n = w[0] if w[1] == k else w[1] if w[0] == k else None
    return (m, n, k) if n is not None and tuple(out) == (m, n) else None


@dataclass(frozen=True)
class Work:
    """What one device event must move and do; ``bytes_moved`` None when the course states no floor for it."""

    bytes_moved: float | None
    flops: float | None
    basis: str  # how it was counted, or why there is no floor
    gemm_mnk: tuple[int, int, int] | None = None


# Ops that read and write only the elements their indices pick (an embedding lookup reads a few
# rows of a large table): the tensors' sizes say nothing about their traffic.
INDEXED_OPS = frozenset({"scatter_gather", "index_select", "index", "embedding", "index_add", "gather", "scatter"})
# Elementwise ops whose result is a bool tensor (1 byte per element, whatever the inputs).
BOOL_RESULT_OPS = frozenset({
    "isnan", "isinf", "isneginf", "isposinf", "isfinite", "eq", "ne", "lt", "le", "gt", "ge", "logical_and",
    "logical_or", "logical_not", "logical_xor", "signbit"
})  # fmt: skip


def _converted_to(op: str | None) -> DType | None:
    """The dtype an ATen conversion kernel writes (``bfloat16_copy`` -> bf16), None for a plain copy."""
    if not op or not op.endswith("_copy") or op == "direct_copy":
        return None
    try:
        return lookup(op.removesuffix("_copy"))
    except ValueError:
        return None


def kernel_work(name: str, kind: str, launcher: str, dims_text: str, types_text: str) -> Work:
    """The :class:`Work` of one device event, from its name and its launcher's recorded shapes and types."""
    if kind == "memset":
        return Work(None, None, "no floor: a memset a library issues (a few bytes)")
    decoded = decode_kernel(name)
    family = decoded["family"]
    tensors = _tensors(dims_text, types_text)
    if not tensors:
        return Work(None, None, f"no floor: {launcher or 'its launcher'} recorded no tensor shapes")
    if decoded.get("op") == "split-K reduction":
        return Work(None, None, "no floor: part of a split-K GEMM (the GEMM's floor covers both kernels)")
    if decoded.get("op") in INDEXED_OPS:
        return Work(None, None, "no floor: the bytes it moves depend on the indices, not the tensors' sizes")
    if family == "gemm":
        dims = None
        try:
            dims = mm_dims(dims_text)
            how = f"{launcher}'s shapes"
        except ValueError:
            dims = _template_dims(tensors)
            how = "the template's arguments (x, W, out)"
        if dims is None:
            return Work(None, None, f"no floor: GEMM sizes not readable from {dims_text}")
        m, n, k = dims
        nbytes = gemm_bytes(m, n, k, tensors[0][1].short)
        return Work(float(nbytes), float(gemm_flops(m, n, k)), f"GEMM m={m} n={n} k={k} from {how}", (m, n, k))
    largest_shape, dtype = max(tensors, key=lambda t: _numel(t[0]))
    tensor_bytes = _numel(largest_shape) * dtype.itemsize
    shape_text = "x".join(map(str, largest_shape))
    converted = _converted_to(decoded.get("op"))
    if converted is not None:  # a dtype conversion (x.to(bf16)): read one dtype, write another
        n, src = _numel(tensors[0][0]), tensors[0][1]
        return Work(
            float(n * (src.itemsize + converted.itemsize)), None, f"copy: {src.short} read, {converted.short} written"
        )
    if family == "copy" or kind == "memcpy":
        n, src = _numel(tensors[0][0]), tensors[0][1]
        same_size = [t for shape, t in tensors if _numel(shape) == n]
        if len(same_size) >= 2:  # copy_(dst, src) records both ends, whatever their dtypes
            return Work(
                float(n * (same_size[0].itemsize + same_size[1].itemsize)), None, "copy: read once, written once"
            )
        return Work(2.0 * n * src.itemsize, None, "copy: read once, written once")
    if {"gelu", "mul"} <= set(decoded.get("fused_ops") or []):
        return Work(3.0 * tensor_bytes, None, f"fused GeGLU: read gate and up, write the product ({shape_text})")
    if family == "elementwise" and decoded.get("op") in ("fill", "zero"):
        return Work(float(tensor_bytes), None, f"fill: one {shape_text} written, nothing read")
    if family == "elementwise":
        reads = sum(_numel(s) * t.itemsize for s, t in tensors)
        # the output has the inputs' dtype, except for tests (isnan, eq, ...), which write bools
        written = _numel(largest_shape) if decoded.get("op") in BOOL_RESULT_OPS else tensor_bytes
        return Work(
            float(reads + written), None, f"elementwise: {len(tensors)} input(s) read, one {shape_text} written"
        )
    return Work(None, None, f"no floor: the course states none for a {family} kernel")


def kernel_floors(trace: Trace, ceilings: Ceilings | None = None, step: int | str | None = None) -> pd.DataFrame:
    """Every device event of a profiler step (None: the first; ``"all"``) with its floor and ``pct_of_floor``
    (100 means at the ceiling), against the ceilings of the machine that recorded it by default."""
    check_trace(trace)
    ceil = ceilings if ceilings is not None else ceilings_for(trace)
    if not isinstance(ceil, Ceilings):
        raise TypeError(f"ceilings must be a helpers.Ceilings, got {type(ceil).__name__}")
    ev = trace.events
    rows = ev[device_work_mask(ev)]
    if step != "all":
        rows = rows[rows["step"] == pick_step(trace, step)]
    names, dims, types = ev["name"].to_numpy(), ev["input_dims"].to_numpy(), ev["input_types"].to_numpy()
    records: list[dict[str, Any]] = []
    for r in rows.sort_values("ts", kind="stable").itertuples():
        j = int(r.launched_by)
        launcher = str(names[j]) if j >= 0 else ""
        kind = DEVICE_WORK_KIND[r.cat]
        work = kernel_work(r.name, kind, launcher, dims[j] if j >= 0 else "", types[j] if j >= 0 else "")
        rec: dict[str, Any] = {
            "step": int(r.step),
            "short_name": decode_kernel(r.name)["short_name"],
            "family": "memset" if kind == "memset" else decode_kernel(r.name)["family"],
            "duration_us": float(r.dur),
            "basis": work.basis,
            "gemm_mnk": work.gemm_mnk,
            "launched_by": launcher or None,
            "name": r.name,
        }
        if work.bytes_moved is not None and work.bytes_moved <= 0:
            rec["basis"] = f"no floor: it moves no data ({work.basis})"  # an empty tensor's launch
        elif work.bytes_moved is not None and work.flops is None and ceil.l2_bytes and work.bytes_moved < ceil.l2_bytes:
            # memory-bound work that fits in the L2 cache may never reach DRAM: no DRAM floor holds,
            # but the bytes it moves and the rate it reached are still facts worth a column
            rec["bytes_moved"] = work.bytes_moved
            if r.dur > 0:
                rec["achieved_tbps"] = work.bytes_moved / (float(r.dur) * 1e-6) / 1e12
            rec["basis"] = (
                f"no floor: its {work.bytes_moved / 1e6:.0f} MB fit in the {ceil.l2_bytes / 1e6:.0f} MB "
                f"L2 cache ({work.basis})"
            )
        elif work.bytes_moved is not None and r.dur > 0:
            rec.update(achieved(float(r.dur), work.bytes_moved, work.flops or None, ceilings=ceil))
        records.append(rec)
    out = pd.DataFrame(records).reindex(columns=COLUMNS)
    out.attrs["trace"] = trace.info.describe()
    out.attrs["ceilings"] = ceil.label
    return out
