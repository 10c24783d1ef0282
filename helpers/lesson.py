"""Building blocks the lessons share: what machine this is, which trace is which, small pictures.

Every function returns something a notebook displays (a DataFrame, a figure, an object with an
HTML view); none of them prints. The notebooks call these instead of copying code:

- :func:`environment_report`: hardware and versions, and which path (GPU or CPU) the lessons take;
- :func:`trace_cards` and :func:`side_by_side`: a live profile next to a reference trace, each
  labelled with where and when it was recorded;
- :func:`kernel_table`, :func:`kernels_per_forward`, :func:`kernels_under`, :func:`op_costs`,
  :func:`op_call_times`, :func:`op_input`, :func:`mm_dims`, :func:`device_properties`: the
  measurements the lessons assert on; :func:`chain_tree`: a dispatch tree to read;
  :func:`tile_waves`: how a GEMM's output splits into tiles and waves;
- :func:`layout_table`, :func:`storage_index`, :func:`strides_figure`: storage, shape and stride.
"""

from __future__ import annotations

import ast
import datetime as _dt
import html
import importlib.metadata
import platform
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from .kernel_names import decode_kernel
from .roofline import cpu_name
from .trace import CPU_GENERATED_KERNEL, NoKernelsError, Trace

GPU_PATH = "GPU: profiles run live on this GPU and are compared with the H200 reference traces"
CPU_PATH = ("CPU only: profiles run live on this CPU (smaller shapes, float32); GPU lessons read the "
            "reference traces recorded on an NVIDIA H200")

# Element sizes of the C++ type names the profiler writes into "Input type".
_TYPE_BYTES = {
    "float": ("float32", 4), "double": ("float64", 8), "c10::BFloat16": ("bfloat16", 2),
    "c10::Half": ("float16", 2), "c10::Float8_e4m3fn": ("float8_e4m3fn", 1),
    "c10::Float8_e5m2": ("float8_e5m2", 1), "int": ("int32", 4), "long int": ("int64", 8),
    "signed char": ("int8", 1), "unsigned char": ("uint8", 1), "bool": ("bool", 1),
}


def _check_trace(trace: Any, name: str = "trace") -> Trace:
    if not isinstance(trace, Trace):
        raise TypeError(f"{name} must be a helpers.Trace (from helpers.profile or helpers.load_trace), "
                        f"got {type(trace).__name__}")
    return trace


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


# ---------------------------------------------------------------------------------------------
# where am I
# ---------------------------------------------------------------------------------------------

def on_gpu() -> bool:
    """True when a CUDA GPU is usable here: the lessons then profile the GPU live."""
    return torch.cuda.is_available()


def lesson_path() -> str:
    """One sentence saying which path the lessons take on this machine (GPU or CPU only)."""
    return GPU_PATH if on_gpu() else CPU_PATH


def environment_report() -> pd.DataFrame:
    """Hardware and versions on this machine, one row per item (columns ``item``, ``value``).

    Covers the CPU and its torch threads, the CUDA version torch was built with, each GPU (name,
    memory, compute capability, multiprocessors) when one is present, Python, torch, triton,
    kernels, pandas, plotly, and the path the lessons take here.
    """
    rows: list[tuple[str, str]] = [
        ("date", _dt.date.today().isoformat()),
        ("python", platform.python_version()),
        ("platform", platform.platform(terse=True)),
        ("CPU", cpu_name()),
        ("torch CPU threads", str(torch.get_num_threads())),
        ("torch", torch.__version__),
        ("torch built with CUDA", str(torch.version.cuda or "no (CPU-only build)")),
        ("CUDA GPU available", str(torch.cuda.is_available())),
    ]
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            rows += [
                (f"GPU {i}", props.name),
                (f"GPU {i} memory", f"{props.total_memory / 2**30:.0f} GiB"),
                (f"GPU {i} compute capability", f"{props.major}.{props.minor}"),
                (f"GPU {i} multiprocessors", str(props.multi_processor_count)),
            ]
    rows += [
        ("triton", _version("triton")),
        ("kernels", _version("kernels")),
        ("pandas", _version("pandas")),
        ("plotly", _version("plotly")),
        ("lesson path", lesson_path()),
    ]
    return pd.DataFrame(rows, columns=["item", "value"])


# ---------------------------------------------------------------------------------------------
# which trace is which
# ---------------------------------------------------------------------------------------------

def trace_cards(*traces: Trace) -> pd.DataFrame:
    """One row per trace: what it is, where and when it was recorded, and what it holds.

    Columns: ``label``, ``kind`` (live profile / reference trace / trace file), ``device``,
    ``torch``, ``recorded_on``, ``steps``, ``device_events_per_step`` (kernels, memsets and
    memcpys; 0 for a CPU-only trace), ``cpu_ops_per_step``.
    """
    if not traces:
        raise ValueError("trace_cards needs at least one Trace")
    rows = []
    for i, trace in enumerate(traces):
        _check_trace(trace, f"traces[{i}]")
        info = trace.info
        ev = trace.events
        n_steps = max(len(trace.steps), 1)
        kernels = trace.kernels(allow_empty=True)
        device_events = int((kernels["kind"] != "cpu-generated").sum())
        rows.append({
            "label": info.label,
            "kind": {"live": "live profile", "reference": "reference trace", "file": "trace file"}.get(
                info.source, info.source),
            "device": info.device,
            "torch": info.torch_version,
            "recorded_on": info.recorded_on,
            "steps": len(trace.steps),
            "device_events_per_step": device_events / n_steps,
            "cpu_ops_per_step": int((ev["cat"] == "cpu_op").sum()) / n_steps,
        })
    return pd.DataFrame(rows)


def device_properties(trace: Trace) -> dict[str, Any]:
    """The GPU's properties as the profiler wrote them into the trace (``name``, ``numSms``, ...).

    Kineto records them for every GPU it saw; this returns the first one's. Raises ValueError for
    a trace without them (a CPU-only run), so a lesson never computes with a missing SM count.
    """
    _check_trace(trace)
    props = [p for p in trace._tables.device_properties if isinstance(p, dict)]
    if not props:
        raise ValueError(f"{trace.info.describe()} records no GPU properties (a CPU-only profile?)")
    return dict(props[0])


@dataclass(frozen=True)
class SideBySide:
    """Panels shown next to each other in a notebook, each under its own title."""

    panels: tuple[tuple[str, Any], ...]

    def _panel_html(self, obj: Any) -> str:
        if isinstance(obj, pd.DataFrame):
            styler = (obj.style.hide(axis="index").format(precision=2, thousands=",")
                      .set_properties(**{"text-align": "left", "white-space": "pre"})
                      .set_table_styles([{"selector": "th", "props": [("text-align", "left")]}]))
            return styler.to_html()
        if hasattr(obj, "_repr_html_"):
            out = obj._repr_html_()
            if out is not None:
                return out
        return f"<pre>{html.escape(str(obj))}</pre>"

    def _repr_html_(self) -> str:
        cells = "".join(
            '<div style="flex:1 1 0;min-width:320px;overflow-x:auto">'
            f'<div style="font-weight:bold;margin-bottom:4px">{html.escape(title)}</div>{self._panel_html(obj)}</div>'
            for title, obj in self.panels)
        return f'<div class="course-side-by-side" style="display:flex;gap:24px;align-items:flex-start">{cells}</div>'

    def __repr__(self) -> str:
        parts = []
        for title, obj in self.panels:
            body = obj.to_string(index=False) if isinstance(obj, pd.DataFrame) else str(obj)
            parts.append(f"== {title} ==\n{body}")
        return "\n\n".join(parts)


def side_by_side(*panels: Any, titles: Sequence[str] | None = None) -> SideBySide:
    """Show DataFrames (or anything with an HTML view) next to each other, each with a title.

    Pass ``(title, obj)`` pairs, or objects plus ``titles=[...]``. A DataFrame made by this module
    from a trace carries the trace's description in ``df.attrs["trace"]``, used when no title is
    given, so a live CPU profile and an H200 reference trace are never confused.
    """
    if not panels:
        raise ValueError("side_by_side needs at least one panel")
    if titles is not None:
        if isinstance(titles, str) or len(titles) != len(panels):
            raise ValueError(f"titles must be a list with one title per panel ({len(panels)}), got {titles!r}")
        pairs = list(zip(titles, panels))
    else:
        pairs = []
        for i, p in enumerate(panels):
            if isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str):
                pairs.append(p)
            elif isinstance(p, pd.DataFrame) and "trace" in p.attrs:
                pairs.append((str(p.attrs["trace"]), p))
            else:
                raise ValueError(f"panel {i} has no title: pass (title, obj) pairs or titles=[...]")
    for title, _ in pairs:
        if not isinstance(title, str):
            raise TypeError(f"titles must be strings, got {type(title).__name__}")
    return SideBySide(tuple(pairs))


# ---------------------------------------------------------------------------------------------
# measurements the lessons assert on
# ---------------------------------------------------------------------------------------------

_DECODED = ("short_name", "family", "source", "op", "tile", "layout", "bias")
_KIND_OF_CATEGORY = {"kernel": "kernel", "gpu_memset": "memset", "gpu_memcpy": "memcpy"}


def kernel_table(trace: Trace, step: int | None = None, decode: bool = True) -> pd.DataFrame:
    """The device events of one profiler step (default: the first), in launch order, decoded.

    Columns: ``name``, ``kind`` (kernel / memset / memcpy / cpu-generated), ``duration_us``,
    ``launched_by`` (the operator that launched it), ``input_shapes`` (that operator's recorded
    input shapes), and with `decode` the fields of :func:`helpers.kernel_names.decode_kernel`
    that the lessons read: ``short_name``, ``family``, ``source``, ``op``, ``tile``, ``layout``,
    ``bias`` (None where the name does not say). Raises NoKernelsError for a step without kernels.
    """
    _check_trace(trace)
    steps = trace.steps
    if step is None:
        if not steps:
            raise ValueError(f"{trace.info.describe()} has no profiler steps: pass step= explicitly")
        step = steps[0]
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)):
        raise TypeError(f"step must be a profiler step number, got {step!r}")
    if step not in steps:
        raise ValueError(f"step {step!r} is not in this trace; it has steps {steps}")
    ev = trace.events
    on_device = ev["on_device"] & (ev["cat"] != "gpu_user_annotation")
    cpu_generated = ~ev["on_device"] & ev["name"].str.contains(CPU_GENERATED_KERNEL)
    rows = ev[(on_device | cpu_generated) & (ev["step"] == step)].sort_values("ts", kind="stable")
    if rows.empty:
        raise NoKernelsError(
            f"step {step} of {trace.info.describe()} holds no kernels: on a CPU-only profile eager "
            "PyTorch launches none (read ops() instead)")
    # the launching op: for a device event the cpu_op around its launch call, for a generated
    # CPU kernel the op it runs inside
    launcher = np.where(rows["on_device"], rows["launched_by"], rows["parent"]).astype(int)
    names = ev["name"].to_numpy()
    dims = ev["input_dims"].to_numpy()
    out = pd.DataFrame({
        "name": rows["name"].to_numpy(),
        "kind": [_KIND_OF_CATEGORY.get(c, "cpu-generated") for c in rows["cat"]],
        "duration_us": rows["dur"].to_numpy(),
        "launched_by": [names[j] if j >= 0 else None for j in launcher],
        "input_shapes": [dims[j] if j >= 0 else "" for j in launcher],
    })
    if decode:
        decoded = [decode_kernel(n) for n in out["name"]]
        for key in _DECODED:
            out[key] = pd.Series([d.get(key) for d in decoded], dtype=object)
        out = out[["short_name", "kind", "family", "source", "op", "tile", "layout", "bias",
                   "duration_us", "launched_by", "input_shapes", "name"]]
    out.attrs["trace"] = f"{trace.info.describe()}, step {step}"
    return out


def mm_dims(input_shapes: str) -> tuple[int, int, int]:
    """``(m, n, k)`` of a matrix product from its recorded input shapes ``"[[m, k], [k, n]]"``.

    The order matches :func:`helpers.roofline.gemm_flops(m, n, k)`. Extra inputs (addmm's bias,
    scalars) are ignored: the two 2-D shapes are the operands; for addmm they come after the bias.
    """
    if not isinstance(input_shapes, str):
        raise TypeError(f"input_shapes must be the recorded text such as '[[8192, 768], [768, 3072]]', "
                        f"got {type(input_shapes).__name__}")
    try:
        shapes = ast.literal_eval(input_shapes) if input_shapes else []
    except (ValueError, SyntaxError) as err:
        raise ValueError(f"cannot read shapes from {input_shapes!r}") from err
    matrices = [s for s in shapes if isinstance(s, list) and len(s) == 2]
    if len(matrices) < 2:
        raise ValueError(f"{input_shapes!r} does not hold two matrix operands")
    (m, k), (k2, n) = matrices[-2], matrices[-1]
    if k != k2:
        raise ValueError(f"inner dimensions differ in {input_shapes!r}: {k} vs {k2}")
    return int(m), int(n), int(k)


def tile_waves(problems: Mapping[str, tuple[int, int]], tiles: Iterable[str], sms: int) -> pd.DataFrame:
    """How each output tile size splits each GEMM output into tiles, and the tiles into waves.

    `problems` maps a name to ``(rows, cols)`` of the output as the GEMM kernel sees it, with the
    tile's first size along `rows`; `tiles` are tile strings such as ``"256x128"`` or
    ``"256x128x64"`` (a trailing K-step is ignored); `sms` is the number of multiprocessors.
    Columns: ``gemm``, ``output``, ``tile``, ``tiles``, ``waves`` (tiles / sms), ``last_wave_busy``
    (fraction of multiprocessors with a tile in the last wave).
    """
    if isinstance(sms, bool) or not isinstance(sms, (int, np.integer)) or sms < 1:
        raise ValueError(f"sms must be a positive integer, got {sms!r}")
    if not isinstance(problems, Mapping) or not problems:
        raise TypeError("problems must be a non-empty dict {name: (rows, cols)}")
    tiles = list(tiles)
    if not tiles:
        raise ValueError("tiles must name at least one tile such as '256x128'")
    rows = []
    for name, dims in problems.items():
        if len(dims) != 2 or any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1 for d in dims):
            raise ValueError(f"{name}: output must be (rows, cols) positive integers, got {dims!r}")
        r, c = (int(d) for d in dims)
        for tile in tiles:
            parts = str(tile).split("x")
            if len(parts) < 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
                raise ValueError(f"tile {tile!r} is not of the form '256x128' or '256x128x64'")
            tr, tc = int(parts[0]), int(parts[1])
            count = -(-r // tr) * -(-c // tc)
            rows.append({"gemm": name, "output": f"{r}x{c}", "tile": f"{tr}x{tc}", "tiles": count,
                         "waves": count / sms, "last_wave_busy": (count % sms or sms) / sms})
    return pd.DataFrame(rows)


def kernels_per_forward(trace: Trace, kinds: Iterable[str] | None = ("kernel",)) -> int:
    """How many device events one profiled call launches (each profiler step holds one call).

    `kinds` filters ``Trace.kernels()["kind"]``: the default counts compute kernels only;
    ``("kernel", "memset", "memcpy")`` or None counts every device event. Raises ValueError when
    the steps disagree (then there is no single answer) and NoKernelsError without kernels.
    """
    _check_trace(trace)
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


def chain_tree(trace: Trace, op: str) -> pd.DataFrame:
    """``Trace.chain(op)`` for reading: indented names, kernels shown by their short decoded name.

    Columns: ``tree`` (indented; a kernel's ATen C++ signature becomes e.g.
    ``elementwise_kernel<copy>``), ``kind`` (op / kernel / memset / ...), ``count``.
    """
    _check_trace(trace)
    chain = trace.chain(op)
    names = [row["name"] if row["kind"] == "op" else decode_kernel(row["name"])["short_name"]
             for _, row in chain.iterrows()]
    # non-breaking spaces survive HTML rendering, where ordinary leading spaces collapse
    indent = ["\u00a0\u00a0\u00a0" * (d - 1) + "\u2514\u2500 " if d else "" for d in chain["depth"]]
    out = pd.DataFrame({"tree": [i + n for i, n in zip(indent, names)],
                        "kind": chain["kind"], "count": chain["count"]})
    out.attrs["trace"] = f"{trace.info.describe()}: {op}"
    return out


def kernels_under(trace: Trace, op: str) -> float:
    """Device events launched inside one call of `op`, its children included, averaged over calls.

    0.0 for an operator that launches nothing (a view on a GPU; every op on a CPU-only trace).
    """
    _check_trace(trace)
    chain = trace.chain(op)
    calls = int(chain["calls_of_root"].iloc[0])
    launched = chain.loc[chain["kind"] != "op", "count"].sum()
    return float(launched) / calls


def op_costs(trace: Trace, names: Sequence[str]) -> pd.DataFrame:
    """Per-call costs of the named operators: where time goes and whether anything ran on a device.

    Columns: ``name``, ``calls``, ``self_cpu_us_per_call``, ``device_us_per_call`` (device time of
    everything the op launched, children included), ``kernels_per_call`` (children included).
    Raises ValueError naming any operator absent from the trace.
    """
    _check_trace(trace)
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
        rows.append({
            "name": n,
            "calls": calls,
            "self_cpu_us_per_call": float(row["self_cpu_us"]) / calls,
            "device_us_per_call": float(row["device_total_us"]) / calls,
            "kernels_per_call": kernels_under(trace, n),
        })
    out = pd.DataFrame(rows)
    out.attrs["trace"] = trace.info.describe()
    return out


def op_call_times(trace: Trace, names: Sequence[str]) -> pd.DataFrame:
    """Wall time on the CPU of each call of the named operators, summarised per operator.

    Columns: ``name``, ``calls``, ``median_us``, ``min_us``, ``max_us`` (total CPU time of one call,
    children included). The median resists the odd call slowed down by another process, which a
    sum over calls (as in ``ops()``) does not. Raises ValueError naming operators absent from the trace.
    """
    _check_trace(trace)
    if isinstance(names, str) or not names:
        raise TypeError("names must be a non-empty list of operator names such as ['aten::t', 'aten::addmm']")
    ev = trace.events
    calls = ev[(ev["cat"] == "cpu_op") & ev["name"].isin(list(names))]
    missing = [n for n in names if n not in set(calls["name"])]
    if missing:
        raise ValueError(f"operators {missing} are not in {trace.info.describe()}")
    grouped = calls.groupby("name")["dur"]
    out = pd.DataFrame({"calls": grouped.size(), "median_us": grouped.median(), "min_us": grouped.min(),
                        "max_us": grouped.max()}).reindex(list(names)).reset_index()
    out.attrs["trace"] = trace.info.describe()
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
    """Shape, dtype and size of the first tensor input of `op`, read from the recorded shapes.

    Needs a trace recorded with shapes (``helpers.profile`` records them by default). Raises
    ValueError when the op is absent, was recorded without shapes, or has an unknown element type.
    """
    _check_trace(trace)
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
            ctype = types[i]
            if ctype not in _TYPE_BYTES:
                raise ValueError(f"{op}: unknown element type {ctype!r} of input {i}")
            dtype, size = _TYPE_BYTES[ctype]
            return OpInput(op, tuple(int(v) for v in d), dtype, size)
    raise ValueError(f"{op} has no tensor input with a recorded shape in {trace.info.describe()}")


# ---------------------------------------------------------------------------------------------
# storage, shape and stride
# ---------------------------------------------------------------------------------------------

def _check_views(views: Any) -> dict[str, torch.Tensor]:
    if not isinstance(views, Mapping) or not views:
        raise TypeError("views must be a non-empty dict {name: tensor}, e.g. {'x': x, 'x.t()': x.t()}")
    for name, t in views.items():
        if not isinstance(name, str):
            raise TypeError(f"view names must be strings, got {name!r}")
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} is a {type(t).__name__}, not a tensor")
    return dict(views)


def _storage_ptr(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def layout_table(views: Mapping[str, torch.Tensor]) -> pd.DataFrame:
    """Shape, stride, storage offset and storage of each tensor, compared with the first one.

    Columns: ``name``, ``shape``, ``stride``, ``storage_offset``, ``is_contiguous``,
    ``storage_elements`` (elements of the underlying buffer), ``shares_storage_with_first``.
    """
    items = _check_views(views)
    first = next(iter(items.values()))
    rows = []
    for name, t in items.items():
        rows.append({
            "name": name,
            "shape": tuple(t.shape),
            "stride": tuple(t.stride()),
            "storage_offset": t.storage_offset(),
            "is_contiguous": t.is_contiguous(),
            "storage_elements": t.untyped_storage().nbytes() // t.element_size(),
            "shares_storage_with_first": _storage_ptr(t) == _storage_ptr(first),
        })
    return pd.DataFrame(rows)


def storage_index(t: torch.Tensor) -> torch.Tensor:
    """For each element of `t`, the index in its storage it reads: offset + sum(i_d * stride_d)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"expected a tensor, got {type(t).__name__}")
    index = torch.zeros(t.shape, dtype=torch.long)
    for dim, (size, stride) in enumerate(zip(t.shape, t.stride())):
        shape = [1] * t.dim()
        shape[dim] = size
        index = index + torch.arange(size).reshape(shape) * stride
    return index + t.storage_offset()


def strides_figure(views: Mapping[str, torch.Tensor], max_elements: int = 64):
    """A matplotlib figure: one buffer (top strip) and each tensor as a grid of the indices it reads.

    Every tensor must share the first one's storage (views of one buffer) and have 1 or 2
    dimensions and at most `max_elements` elements. Colours follow the storage index, so the same
    element has the same colour in the buffer and in every view. Returns the figure.
    """
    import matplotlib.pyplot as plt
    from matplotlib import colormaps

    items = _check_views(views)
    first = next(iter(items.values()))
    n_storage = first.untyped_storage().nbytes() // first.element_size()
    if n_storage > max_elements:
        raise ValueError(f"the buffer holds {n_storage} elements; draw at most {max_elements} "
                         "(use a small tensor, e.g. torch.arange(12).reshape(3, 4))")
    for name, t in items.items():
        if _storage_ptr(t) != _storage_ptr(first):
            raise ValueError(f"{name} does not share the first tensor's storage: it is a copy, not a view "
                             "(draw it separately, or compare with layout_table)")
        if t.dim() not in (1, 2):
            raise ValueError(f"{name} has {t.dim()} dimensions; strides_figure draws 1-D and 2-D tensors")
    cmap = colormaps["viridis"]

    def color(i: int):
        return cmap(0.15 + 0.8 * i / max(n_storage - 1, 1))

    grids = [(name, storage_index(t)) for name, t in items.items()]
    grids = [(name, idx.reshape(1, -1) if idx.dim() == 1 else idx) for name, idx in grids]
    heights = [1.2] + [max(idx.shape[0], 1) * 0.55 + 0.9 for _, idx in grids]
    width = max([n_storage * 0.45] + [idx.shape[1] * 0.55 + 0.5 for _, idx in grids] + [5.0])
    fig, axes = plt.subplots(len(grids) + 1, 1, figsize=(min(width, 14), sum(heights)),
                             gridspec_kw={"height_ratios": heights})
    ax = axes[0]
    for i in range(n_storage):
        ax.add_patch(plt.Rectangle((i, 0), 0.95, 0.95, color=color(i)))
        ax.text(i + 0.47, 0.47, str(i), ha="center", va="center", color="white", fontsize=9)
    ax.set_xlim(-0.1, n_storage)
    ax.set_ylim(-0.1, 1.0)
    ax.set_title(f"storage: one buffer of {n_storage} elements, in memory order", fontsize=10, loc="left")
    ax.axis("off")
    for ax, (name, idx) in zip(axes[1:], grids):
        t = items[name]
        r, c = idx.shape
        for i in range(r):
            for j in range(c):
                k = int(idx[i, j])
                ax.add_patch(plt.Rectangle((j, r - 1 - i), 0.95, 0.95, color=color(k)))
                ax.text(j + 0.47, r - 1 - i + 0.47, str(k), ha="center", va="center", color="white", fontsize=9)
        ax.set_xlim(-0.1, max(c, 1))
        ax.set_ylim(-0.1, r)
        ax.set_aspect("equal")
        ax.set_anchor("W")
        ax.set_title(f"{name}: shape {tuple(t.shape)}, stride {tuple(t.stride())}, offset {t.storage_offset()}"
                     f"{'' if t.is_contiguous() else '  (not contiguous)'}", fontsize=10, loc="left")
        ax.axis("off")
    fig.suptitle("Each cell shows the storage index it reads", fontsize=10, x=0.01, ha="left")
    fig.tight_layout()
    plt.close(fig)  # the notebook displays the returned figure once, not twice
    return fig
