"""Achieved TFLOP/s of matrix products, attention and convolutions, from the shapes a trace recorded.

With ``record_shapes=True`` every operator event carries its inputs' shapes (``Input Dims``).
For the operators below the number of floating-point operations follows from those shapes
alone (a multiply-add counts 2), so dividing by the device time of the kernels the operator
launched gives the rate it achieved, with no torch and no re-run:

* matrix products: ``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``matmul``, ``linear``, ``addmv``,
  ``mv``, ``dot``, ``_scaled_mm``, ``_int_mm``: 2 x M x N x K (x batch);
* attention (``scaled_dot_product_attention`` and its flash / efficient / cuDNN forms, and
  ``_flash_attention_forward`` / ``_efficient_attention_forward`` which take [batch, seq, heads,
  dim]): 2 x batch x heads x L x S x (E + Ev) forward, 2.5 times that backward (five products
  instead of two). A causal mask is not in the shapes: the count is the full one, and a causal
  kernel does about half of it (said in ``note``);
* convolutions: 2 x N x C_out x (output positions) x C_in/groups x kernel area. The backward
  (``convolution_backward``) reads the output's size from the gradient's shape; the forward needs
  stride, padding and dilation, read from the trace's ``Concrete Inputs`` when the trace's JSON
  is kept (traces under 50 MB, live profiles); otherwise its row says the FLOPs are unknown.

Each kernel is credited to the innermost such operator above the op that launched it (``aten::linear``
-> ``aten::addmm`` -> the GEMM kernel credits ``aten::addmm``), so nothing is counted twice.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from functools import lru_cache

import numpy as np
import pandas as pd

from . import files as tracefile
from .aten_ops import op_base
from .categories import device_work_mask
from .model import Trace, check_trace

Shapes = list[list[int]]


@lru_cache(maxsize=4096)
def parse_shapes(text: str) -> tuple | None:
    """'[[8192, 768], [768, 3072]]' -> ((8192, 768), (768, 3072)); None when not a list of shapes."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, list):
        return None
    out = []
    for item in value:
        if isinstance(item, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in item):
            out.append(tuple(item))
        else:
            out.append(None)
    return tuple(out)


def _prod(values) -> int:
    return math.prod(int(v) for v in values)


def _mm(s):  # (a[M, K], b[K, N])
    (m, k), (_, n) = s[0], s[1]
    return 2 * m * n * k


def _addmm(s):  # (bias, a[M, K], b[K, N])
    return _mm(s[1:3])


def _bmm(s):  # (a[B, M, K], b[B, K, N])
    (b, m, k), (_, _, n) = s[0], s[1]
    return 2 * b * m * n * k


def _baddbmm(s):
    return _bmm(s[1:3])


def _matmul(s):
    a, b = s[0], s[1]
    if len(a) == 1 and len(b) == 1:
        return 2 * a[0]
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    m, k, n = a2[-2], a2[-1], b2[-1]
    batch_a, batch_b = a2[:-2], b2[:-2]
    width = max(len(batch_a), len(batch_b))
    batch_a = (1,) * (width - len(batch_a)) + tuple(batch_a)
    batch_b = (1,) * (width - len(batch_b)) + tuple(batch_b)
    return 2 * _prod(max(x, y) for x, y in zip(batch_a, batch_b)) * m * n * k


def _linear(s):  # (x[..., K], w[N, K], bias)
    x, w = s[0], s[1]
    return 2 * _prod(x[:-1]) * x[-1] * w[0]


def _mv(s):  # (A[M, N], x[N])
    m, n = s[0]
    return 2 * m * n


def _addmv(s):
    return _mv(s[1:3])


def _dot(s):
    return 2 * s[0][0]


def _sdpa(s, layout: str = "BHLE", backward: bool = False):
    q, k, v = (s[1], s[2], s[3]) if backward else (s[0], s[1], s[2])
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        raise ValueError("not 4-d")
    if layout == "BHLE":
        b, h, seq_q, e = q
        seq_k, ev = k[2], v[3]
    else:  # BLHE
        b, seq_q, h, e = q
        seq_k, ev = k[1], v[3]
    forward = 2 * b * h * seq_q * seq_k * (e + ev)
    return forward * 5 // 2 if backward else forward


def _conv_backward(s):  # (grad_out[N, O, *out], input, weight[O, C/g, *kernel], ...)
    grad, weight = s[0], s[2]
    return 2 * 2 * grad[0] * grad[1] * _prod(grad[2:]) * weight[1] * _prod(weight[2:])  # dgrad + wgrad


FORMULAS: dict[str, tuple[str, Callable]] = {
    "mm": ("gemm", _mm),
    "addmm": ("gemm", _addmm),
    "_addmm_activation": ("gemm", _addmm),
    "_scaled_mm": ("gemm", _mm),
    "_int_mm": ("gemm", _mm),
    "bmm": ("gemm", _bmm),
    "baddbmm": ("gemm", _baddbmm),
    "matmul": ("gemm", _matmul),
    "linear": ("gemm", _linear),
    "mv": ("gemm", _mv),
    "addmv": ("gemm", _addmv),
    "dot": ("gemm", _dot),
    "scaled_dot_product_attention": ("attention", _sdpa),
    "_scaled_dot_product_flash_attention": ("attention", _sdpa),
    "_scaled_dot_product_efficient_attention": ("attention", _sdpa),
    "_scaled_dot_product_cudnn_attention": ("attention", _sdpa),
    "_scaled_dot_product_flash_attention_for_cpu": ("attention", _sdpa),
    "_flash_attention_forward": ("attention", lambda s: _sdpa(s, "BLHE")),
    "_efficient_attention_forward": ("attention", lambda s: _sdpa(s, "BLHE")),
    "_scaled_dot_product_flash_attention_backward": ("attention", lambda s: _sdpa(s, backward=True)),
    "_scaled_dot_product_efficient_attention_backward": ("attention", lambda s: _sdpa(s, backward=True)),
    "_scaled_dot_product_cudnn_attention_backward": ("attention", lambda s: _sdpa(s, backward=True)),
    "_flash_attention_backward": ("attention", lambda s: _sdpa(s, "BLHE", backward=True)),
    "_efficient_attention_backward": ("attention", lambda s: _sdpa(s, "BLHE", backward=True)),
    "convolution_backward": ("convolution", _conv_backward),
}
# Forward convolutions: (position of stride, padding, dilation, transposed) among the inputs
# `Concrete Inputs` (a convolution's stride and padding) are read back from a streamed trace's file up to this size
CONCRETE_INPUTS_MAX_BYTES = 50_000_000
CONVOLUTIONS = {
    "convolution": (3, 4, 5, 6),
    "_convolution": (3, 4, 5, 6),
    "conv1d": (3, 4, 5, None),
    "conv2d": (3, 4, 5, None),
    "conv3d": (3, 4, 5, None),
    "cudnn_convolution": (3, 2, 4, None),
    "miopen_convolution": (4, 3, 5, None),
    "mkldnn_convolution": (3, 2, 4, None),
}


def _conv_forward(shapes: tuple, concrete: list | None, positions: tuple) -> int | None:
    """FLOPs of a forward convolution from input/weight shapes and its stride/padding/dilation values."""
    x, w = shapes[0], shapes[1]
    if concrete is None or x is None or w is None or len(x) < 3:
        return None
    stride_at, pad_at, dil_at, transposed_at = positions
    try:
        stride, padding, dilation = (json.loads(concrete[i]) for i in (stride_at, pad_at, dil_at))
        if transposed_at is not None and concrete[transposed_at] not in ("False", "0", "false"):
            return None  # transposed convolutions: not counted
    except (IndexError, ValueError, TypeError):
        return None
    dims = len(x) - 2

    def per_dim(v):
        return list(v) * dims if isinstance(v, list) and len(v) == 1 else (v if isinstance(v, list) else [v] * dims)

    stride, padding, dilation = per_dim(stride), per_dim(padding), per_dim(dilation)
    out = [(x[2 + i] + 2 * padding[i] - dilation[i] * (w[2 + i] - 1) - 1) // stride[i] + 1 for i in range(dims)]
    if min(out) <= 0:
        return None
    return 2 * x[0] * w[0] * _prod(out) * w[1] * _prod(w[2:])


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
    current = ev["launched_by"].to_numpy()[kernels].copy()
    parent = ev["parent"].to_numpy()
    anchor = np.full(len(ev), -1, dtype=np.int64)
    found = np.full(len(kernels), -1, dtype=np.int64)
    for _ in range(64):  # nesting depth; real traces stay far below
        alive = (current >= 0) & (found < 0)
        if not alive.any():
            break
        hit = alive & counted[np.maximum(current, 0)]
        found[hit] = current[hit]
        move = alive & ~hit
        current[move] = parent[current[move]]
    anchor[kernels] = found
    return anchor


def achieved_flops(trace: Trace) -> pd.DataFrame:
    """Achieved TFLOP/s of each matrix product, attention and convolution, by operator and shapes.

    One row per (operator, input shapes): ``op``, ``family`` (gemm / attention / convolution),
    ``input_shapes``, ``calls``, ``gflop_per_call`` (NaN when the shapes do not give it),
    ``device_us`` (time of all the device work the calls launched: kernels, and memsets such as
    cuBLAS's workspace zeroing; see the module docstring),
    ``us_per_call``, ``tflops`` (achieved rate), ``kernels`` (distinct kernel names), ``note``.
    Sorted by device time. Empty when no such operator launched a kernel (record with
    ``record_shapes=True`` to get shapes).
    """
    check_trace(trace)
    ev = trace.events
    names = ev["name"].to_numpy(dtype=object)
    uniq, codes = np.unique(names, return_inverse=True)
    base = np.array([op_base(str(u)) or "" for u in uniq], dtype=object)
    known_u = np.array([b in FORMULAS or b in CONVOLUTIONS for b in base], dtype=bool)
    counted = known_u[codes] & (ev["cat"].to_numpy(dtype=object) == "cpu_op") & ~ev["on_device"].to_numpy()
    anchor = _anchors(ev, counted)
    kernels = np.flatnonzero(anchor >= 0)
    cols = [
        "op",
        "family",
        "input_shapes",
        "calls",
        "gflop_per_call",
        "device_us",
        "us_per_call",
        "tflops",
        "kernels",
        "note",
    ]
    if not len(kernels):
        return pd.DataFrame(columns=cols)
    per_call = pd.DataFrame({"call": anchor[kernels], "dur": ev["dur"].to_numpy()[kernels], "kernel": names[kernels]})
    calls = per_call.groupby("call").agg(device_us=("dur", "sum"), kernels=("kernel", lambda s: sorted(set(s))))
    call_rows = calls.index.to_numpy()
    dims = ev["input_dims"].to_numpy(dtype=object)[call_rows]
    ops = [str(op_base(str(n))) for n in names[call_rows]]
    conv_rows = [r for r, op in zip(call_rows, ops) if op in CONVOLUTIONS]
    concrete = _concrete_inputs(trace, np.array(conv_rows, dtype=np.int64))
    flops, family, notes = [], [], []
    for r, op, text in zip(call_rows, ops, dims):
        shapes = parse_shapes(text)
        note = ""
        if op in CONVOLUTIONS:
            fam = "convolution"
            value = _conv_forward(shapes, concrete.get(int(r)), CONVOLUTIONS[op]) if shapes else None
            if value is None:
                note = "stride/padding not recorded (Concrete Inputs): FLOPs unknown"
        else:
            fam, formula = FORMULAS[op]
            try:
                value = formula(shapes) if shapes else None
            except (TypeError, ValueError, IndexError):
                value = None
            if value is None:
                note = "shapes not recorded (record_shapes=True)" if not text else "shapes not understood"
            elif fam == "attention":
                note = "full count; a causal mask does about half"
        flops.append(np.nan if value is None else float(value))
        family.append(fam)
        notes.append(note)
    table = pd.DataFrame(
        {
            "op": [names[r] for r in call_rows],
            "family": family,
            "input_shapes": dims,
            "flops": flops,
            "device_us": calls["device_us"].to_numpy(),
            "kernels": ["; ".join(k) for k in calls["kernels"]],
            "note": notes,
        }
    )
    grouped = table.groupby(["op", "family", "input_shapes", "kernels", "note"], sort=False, dropna=False).agg(
        calls=("flops", "size"), flops=("flops", "first"), device_us=("device_us", "sum")
    )
    out = grouped.reset_index()
    out["gflop_per_call"] = out["flops"] / 1e9
    out["us_per_call"] = out["device_us"] / out["calls"]
    out["tflops"] = out["flops"] * out["calls"] / (out["device_us"] * 1e6)
    out = out.sort_values("device_us", ascending=False, kind="stable").reset_index(drop=True)
    return out[cols]
