"""Ceilings (copy bandwidth, matmul rate), byte/FLOP formulas, and how close a kernel gets.

A kernel time means little alone. Divide the bytes it must move by the best bandwidth the device
reaches, and the FLOPs it must do by the best matmul rate: the larger quotient is the *floor*, the
time no implementation can beat. `achieved()` reports a measured duration against that floor.

* `measure_ceilings(device)` measures both ceilings on this machine, once per process per device.
* `H200_REFERENCE` holds the H200 figures recorded for the course (2026-11-29), so a CPU-only
  learner can judge the reference traces against the hardware they were recorded on. It is a
  recorded reference, not a live measurement, and says so (`source == "reference"`).

Units: bytes, FLOPs, microseconds in; bytes/s and FLOP/s inside `Ceilings`; TB/s and TFLOP/s
(10**12) in the tables.
"""

from __future__ import annotations

import datetime as _dt
import math
import numbers
import platform
import statistics
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import torch

# ---------------------------------------------------------------------------------------------
# dtypes and input checks
# ---------------------------------------------------------------------------------------------

_DTYPE_ALIASES: dict[str, torch.dtype] = {
    "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
    "fp16": torch.float16, "float16": torch.float16, "half": torch.float16,
    "fp32": torch.float32, "float32": torch.float32, "float": torch.float32,
    "fp64": torch.float64, "float64": torch.float64, "double": torch.float64,
    "fp8": torch.float8_e4m3fn, "fp8_e4m3fn": torch.float8_e4m3fn, "float8_e4m3fn": torch.float8_e4m3fn,
    "fp8_e5m2": torch.float8_e5m2, "float8_e5m2": torch.float8_e5m2,
    "int8": torch.int8, "uint8": torch.uint8, "int16": torch.int16, "int32": torch.int32,
    "int64": torch.int64,
}


def dtype_size(dtype: torch.dtype | str) -> int:
    """Bytes per element of a torch dtype or a name such as "bf16", "float32"."""
    if isinstance(dtype, torch.dtype):
        return dtype.itemsize
    if isinstance(dtype, str):
        key = dtype.strip().lower().removeprefix("torch.")
        if key in _DTYPE_ALIASES:
            return _DTYPE_ALIASES[key].itemsize
        raise ValueError(f"unknown dtype {dtype!r}; use a torch.dtype or one of {sorted(_DTYPE_ALIASES)}")
    raise TypeError(f"dtype must be a torch.dtype or str, got {type(dtype).__name__}: {dtype!r}")


def _positive_int(name: str, value: Any) -> int:
    # bool is an int subclass; True as a matrix size is a bug, not a 1
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a positive int, got {type(value).__name__}: {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value}")
    return int(value)


def _non_negative_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a non-negative int, got {type(value).__name__}: {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be a non-negative int, got {value}")
    return int(value)


def _positive_number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a positive number, got {type(value).__name__}: {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value}")
    return float(value)


# ---------------------------------------------------------------------------------------------
# byte and FLOP formulas
# ---------------------------------------------------------------------------------------------

def gemm_flops(m: int, n: int, k: int) -> int:
    """FLOPs of an [m, k] x [k, n] matrix product: one multiply and one add per term, 2*m*n*k."""
    return 2 * _positive_int("m", m) * _positive_int("n", n) * _positive_int("k", k)


def gemm_bytes(m: int, n: int, k: int, dtype: torch.dtype | str) -> int:
    """Minimum bytes of a GEMM: read A [m, k] and B [k, n] once, write C [m, n] once.

    Real kernels re-read tiles from L2; this is the DRAM traffic an ideal kernel needs.
    """
    m, n, k = _positive_int("m", m), _positive_int("n", n), _positive_int("k", k)
    return (m * k + k * n + m * n) * dtype_size(dtype)


def elementwise_bytes(numel: int, dtype: torch.dtype | str, reads: int, writes: int) -> int:
    """Bytes an elementwise kernel moves: `reads` input tensors and `writes` outputs of `numel`."""
    numel = _positive_int("numel", numel)
    reads, writes = _non_negative_int("reads", reads), _non_negative_int("writes", writes)
    if reads + writes == 0:
        raise ValueError("an elementwise kernel reads or writes at least one tensor (reads + writes > 0)")
    return numel * dtype_size(dtype) * (reads + writes)


def geglu_bytes(m: int, hidden: int, dtype: torch.dtype | str) -> int:
    """Bytes of `gelu(gate) * up` on [m, hidden]: read gate and up, write the product.

    At the blog's shape (m = 64 * 128 = 8192, hidden = 3072, bf16) this is 150,994,944 B = 151 MB.
    """
    return elementwise_bytes(_positive_int("m", m) * _positive_int("hidden", hidden), dtype, reads=2, writes=1)


def geglu_mlp_flops(m: int, dim: int, hidden: int) -> int:
    """FLOPs of the GeGLU MLP's three GEMMs (gate, up: [m, dim] x [dim, hidden]; down: back).

    The GeLU and the product add a few FLOPs per element of [m, hidden], under 1 % of the GEMMs,
    and are left out. At the blog's shape (8192, 768, 3072): 115,964,116,992 = 116 GFLOP.
    """
    m, dim, hidden = _positive_int("m", m), _positive_int("dim", dim), _positive_int("hidden", hidden)
    return 2 * gemm_flops(m, hidden, dim) + gemm_flops(m, dim, hidden)


# ---------------------------------------------------------------------------------------------
# ceilings
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Ceilings:
    """The two ceilings of a device and how they were obtained.

    `copy_bytes_per_s` counts bytes read + bytes written by a large device-to-device copy;
    `matmul_flop_per_s` is 2*m*n*k / time of a large matmul. `source` is "measured" (by
    `measure_ceilings` in this process) or "reference" (recorded elsewhere, loaded from a dict).
    """

    device: str
    device_type: str
    copy_bytes_per_s: float
    matmul_flop_per_s: float
    matmul_dtype: str
    matmul_shape: tuple[int, int, int]
    copy_bytes: int | None
    method: str
    torch_version: str
    source: str
    recorded: str | None = None

    def __post_init__(self) -> None:
        if self.source not in ("measured", "reference"):
            raise ValueError(f"source must be 'measured' or 'reference', got {self.source!r}")
        for name in ("copy_bytes_per_s", "matmul_flop_per_s"):
            _positive_number(name, getattr(self, name))
        if len(self.matmul_shape) != 3:
            raise ValueError(f"matmul_shape must be (m, n, k), got {self.matmul_shape!r}")
        for i, v in enumerate(self.matmul_shape):
            _positive_int(f"matmul_shape[{i}]", v)
        if self.copy_bytes is not None:
            _positive_int("copy_bytes", self.copy_bytes)

    @property
    def copy_tbps(self) -> float:
        """Copy bandwidth in TB/s (10**12 bytes per second)."""
        return self.copy_bytes_per_s / 1e12

    @property
    def matmul_tflops(self) -> float:
        """Matmul rate in TFLOP/s."""
        return self.matmul_flop_per_s / 1e12

    @property
    def ridge_flop_per_byte(self) -> float:
        """Arithmetic intensity where the two roofs meet: below it a kernel is memory bound."""
        return self.matmul_flop_per_s / self.copy_bytes_per_s

    @property
    def label(self) -> str:
        """Short text for titles: device and whether the numbers are a recorded reference."""
        when = f", {self.recorded}" if self.recorded else ""
        kind = "recorded reference" if self.source == "reference" else "measured here"
        return f"{self.device} ({kind}{when})"

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `ceilings_from_dict` reads it back."""
        d = asdict(self)
        d["matmul_shape"] = list(self.matmul_shape)
        return d

    def to_frame(self) -> pd.DataFrame:
        """A small table for a notebook: one row per quantity, with units."""
        rows = [
            ("device", self.device, ""),
            ("copy bandwidth", round(self.copy_tbps, 4), "TB/s (bytes read + written)"),
            ("matmul rate", round(self.matmul_tflops, 4), f"TFLOP/s ({self.matmul_dtype}, "
                                                          f"{'x'.join(map(str, self.matmul_shape))})"),
            ("ridge point", round(self.ridge_flop_per_byte, 2), "FLOP/byte"),
            ("source", self.source, self.recorded or ""),
            ("method", self.method, ""),
            ("torch", self.torch_version, ""),
        ]
        return pd.DataFrame(rows, columns=["quantity", "value", "unit"]).set_index("quantity")


def ceilings_from_dict(d: Mapping[str, Any]) -> Ceilings:
    """Build `Ceilings` from a dict such as one read from JSON (`Ceilings.as_dict()` output).

    Missing or unknown keys raise ValueError naming them, so that a typo in a stored file is not
    silently ignored.
    """
    if not isinstance(d, Mapping):
        raise TypeError(f"ceilings_from_dict expects a dict, got {type(d).__name__}")
    known = {f.name for f in fields(Ceilings)}
    required = {f.name for f in fields(Ceilings) if f.name != "recorded"}
    missing = sorted(required - set(d))
    extra = sorted(set(d) - known)
    if missing or extra:
        raise ValueError(f"ceilings dict: missing keys {missing}, unknown keys {extra}")
    values = dict(d)
    shape = values["matmul_shape"]
    if not isinstance(shape, (list, tuple)):
        raise ValueError(f"matmul_shape must be a list of three ints, got {shape!r}")
    values["matmul_shape"] = tuple(shape)
    for key in ("copy_bytes_per_s", "matmul_flop_per_s"):
        _positive_number(key, values[key])
        values[key] = float(values[key])
    return Ceilings(**values)


_H200_REFERENCE_DICT: dict[str, Any] = {
    "device": "NVIDIA H200",
    "device_type": "cuda",
    "copy_bytes_per_s": 4.14e12,
    "matmul_flop_per_s": 673e12,
    "matmul_dtype": "bfloat16",
    "matmul_shape": [8192, 8192, 8192],
    "copy_bytes": None,  # the buffer size of that run was not recorded
    "method": ("recorded reference, not measured in this process: one run on an H200 for the "
               "course (shared NOTES.md section 2), device copy bandwidth counted as bytes read + "
               "written, bf16 8192^3 matmul"),
    "torch_version": "2.11.0+cu130",
    "source": "reference",
    "recorded": "2026-11-29",
}
H200_REFERENCE: Ceilings = ceilings_from_dict(_H200_REFERENCE_DICT)


def _resolve_device(device: torch.device | str | None) -> torch.device:
    if device is None:
        return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    if isinstance(device, str):
        try:
            device = torch.device(device)
        except RuntimeError as err:
            raise ValueError(f"not a device: {device!r} ({err})") from None
    if not isinstance(device, torch.device):
        raise TypeError(f"device must be a torch.device, str or None, got {type(device).__name__}: {device!r}")
    if device.type == "cpu":
        return torch.device("cpu")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device} requested but CUDA is not available here")
        index = torch.cuda.current_device() if device.index is None else device.index
        if not 0 <= index < torch.cuda.device_count():
            raise ValueError(f"device {device}: only {torch.cuda.device_count()} CUDA device(s) here")
        return torch.device("cuda", index)
    raise ValueError(f"measure_ceilings supports cpu and cuda devices, got {device}")


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _time_cpu(fn, repeats: int) -> float:
    fn()  # warm-up: first touch of pages, thread pool start, BLAS kernel selection
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _time_cuda(fn, repeats: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
    for start, end in pairs:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in pairs) / 1e3


def _measure_cpu() -> Ceilings:
    # 128 MiB float32 buffers (256 MiB moved per copy): larger than a laptop's caches, so the copy
    # runs from DRAM; and a 1024^3 float32 matmul: ~2 GFLOP, tens of ms on two cores. Three timed
    # runs each keep the whole measurement under a second on a 2-core CI runner.
    numel = 32 * 1024 * 1024
    src = torch.ones(numel, dtype=torch.float32)  # written, so reads do not hit the zero page
    dst = torch.empty_like(src)
    repeats = 3
    copy_s = _time_cpu(lambda: dst.copy_(src), repeats)
    copy_bytes = 2 * numel * src.element_size()
    del src, dst
    n = 1024
    a = torch.randn(n, n, dtype=torch.float32)
    b = torch.randn(n, n, dtype=torch.float32)
    mm_s = _time_cpu(lambda: torch.mm(a, b), repeats)
    threads = torch.get_num_threads()
    return Ceilings(
        device=f"CPU: {cpu_name()} ({threads} threads)",
        device_type="cpu",
        copy_bytes_per_s=copy_bytes / copy_s,
        matmul_flop_per_s=gemm_flops(n, n, n) / mm_s,
        matmul_dtype="float32",
        matmul_shape=(n, n, n),
        copy_bytes=copy_bytes,
        method=(f"median of {repeats} timed runs after one warm-up (time.perf_counter), "
                f"{threads} torch threads: Tensor.copy_ of {numel * 4 // 2**20} MiB float32, "
                f"torch.mm {n}x{n}x{n} float32"),
        torch_version=torch.__version__,
        source="measured",
        recorded=_dt.datetime.now().isoformat(timespec="seconds"),
    )


def _measure_cuda(device: torch.device) -> Ceilings:
    with torch.cuda.device(device):
        free, _total = torch.cuda.mem_get_info()
        # 1 GiB source (2 GiB moved per copy), smaller on a small or busy GPU
        src_bytes = min(2**30, free // 8)
        numel = max(src_bytes // 4, 1 << 20)
        src = torch.ones(numel, dtype=torch.float32, device=device)
        dst = torch.empty_like(src)
        repeats, warmup = 10, 3
        copy_s = _time_cuda(lambda: dst.copy_(src), repeats, warmup)
        copy_bytes = 2 * numel * src.element_size()
        del src, dst
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        n = 8192
        a = torch.randn(n, n, dtype=dtype, device=device)
        b = torch.randn(n, n, dtype=dtype, device=device)
        mm_s = _time_cuda(lambda: torch.mm(a, b), repeats, warmup)
        del a, b
        name = torch.cuda.get_device_name(device)
    return Ceilings(
        device=name,
        device_type="cuda",
        copy_bytes_per_s=copy_bytes / copy_s,
        matmul_flop_per_s=gemm_flops(n, n, n) / mm_s,
        matmul_dtype=str(dtype).removeprefix("torch."),
        matmul_shape=(n, n, n),
        copy_bytes=copy_bytes,
        method=(f"median of {repeats} runs timed with CUDA events after {warmup} warm-ups: "
                f"Tensor.copy_ of {numel * 4 // 2**20} MiB float32 on {device}, torch.mm "
                f"{n}x{n}x{n} {str(dtype).removeprefix('torch.')}"),
        torch_version=torch.__version__,
        source="measured",
        recorded=_dt.datetime.now().isoformat(timespec="seconds"),
    )


_CACHE: dict[str, Ceilings] = {}


def measure_ceilings(device: torch.device | str | None = None, refresh: bool = False) -> Ceilings:
    """Measure copy bandwidth and matmul rate of `device` (None: CUDA if available, else CPU).

    Measured once per process per device and cached: later calls return the same object;
    `refresh=True` measures again and replaces the cached value. Raises ValueError for a device
    that is not cpu/cuda or not present, TypeError for something that is not a device at all.
    """
    resolved = _resolve_device(device)
    key = str(resolved)
    if refresh or key not in _CACHE:
        _CACHE[key] = _measure_cpu() if resolved.type == "cpu" else _measure_cuda(resolved)
    return _CACHE[key]


# ---------------------------------------------------------------------------------------------
# achieved rates
# ---------------------------------------------------------------------------------------------

ACHIEVED_KEYS: tuple[str, ...] = (
    "duration_us", "bytes_moved", "flops", "arithmetic_intensity", "achieved_tbps", "achieved_tflops",
    "pct_of_bandwidth", "pct_of_peak_flops", "memory_floor_us", "compute_floor_us", "floor_us",
    "pct_of_floor", "bound_by",
)


def achieved(
    duration_us: float,
    bytes_moved: float | None = None,
    flops: float | None = None,
    *,
    ceilings: Ceilings,
) -> dict[str, Any]:
    """How a measured duration compares with the ceilings.

    Give the bytes the kernel must move, the FLOPs it must do, or both. Returns a dict with the
    keys of `ACHIEVED_KEYS`; a value that needs the missing input is None:

    * `achieved_tbps`, `achieved_tflops`: bytes and FLOPs over the duration (10**12 per second);
    * `pct_of_bandwidth`, `pct_of_peak_flops`: those rates as % of the ceilings;
    * `memory_floor_us` = bytes / bandwidth, `compute_floor_us` = FLOPs / peak, `floor_us` = the
      larger of the two: no kernel doing this work can take less time;
    * `pct_of_floor` = floor_us / duration_us * 100: 100 means running at the floor, 50 means
      taking twice the floor;
    * `bound_by`: "memory" or "compute", whichever floor is larger (the resource that bounds it).

    The ceilings are measured rates, not datasheet peaks, so a kernel can pass 100 %: on the H200
    the gate GEMM (8192x3072x768, 56.2 us) runs at 688 TFLOP/s, above the 673 of the 8192^3 matmul.

    `ceilings` is required and keyword-only: judging an H200 trace with laptop ceilings (or the
    reverse) gives nonsense, so the caller says which ceilings apply.
    """
    if not isinstance(ceilings, Ceilings):
        raise TypeError("ceilings must be a Ceilings (from measure_ceilings() or H200_REFERENCE), "
                        f"got {type(ceilings).__name__}")
    duration_us = _positive_number("duration_us", duration_us)
    if bytes_moved is None and flops is None:
        raise ValueError("give bytes_moved, flops, or both")
    nbytes = _positive_number("bytes_moved", bytes_moved) if bytes_moved is not None else None
    nflops = _positive_number("flops", flops) if flops is not None else None
    seconds = duration_us * 1e-6
    out: dict[str, Any] = dict.fromkeys(ACHIEVED_KEYS)
    out.update(duration_us=duration_us, bytes_moved=bytes_moved, flops=flops)
    if nbytes is not None:
        out["achieved_tbps"] = nbytes / seconds / 1e12
        out["pct_of_bandwidth"] = 100.0 * nbytes / seconds / ceilings.copy_bytes_per_s
        out["memory_floor_us"] = nbytes / ceilings.copy_bytes_per_s * 1e6
    if nflops is not None:
        out["achieved_tflops"] = nflops / seconds / 1e12
        out["pct_of_peak_flops"] = 100.0 * nflops / seconds / ceilings.matmul_flop_per_s
        out["compute_floor_us"] = nflops / ceilings.matmul_flop_per_s * 1e6
    if nbytes is not None and nflops is not None:
        out["arithmetic_intensity"] = nflops / nbytes
    mem, comp = out["memory_floor_us"], out["compute_floor_us"]
    if comp is None or (mem is not None and mem >= comp):
        out["floor_us"], out["bound_by"] = mem, "memory"
    else:
        out["floor_us"], out["bound_by"] = comp, "compute"
    out["pct_of_floor"] = 100.0 * out["floor_us"] / duration_us
    return out


def _row_values(row: Any, i: int) -> tuple[str, Any, Any, Any]:
    if isinstance(row, Mapping):
        try:
            name, duration = row["name"], row["duration_us"]
        except KeyError as err:
            raise ValueError(f"row {i}: a dict row needs 'name' and 'duration_us', missing {err}") from None
        nbytes = row.get("bytes_moved", row.get("bytes"))
        return name, duration, nbytes, row.get("flops")
    if isinstance(row, (tuple, list)) and len(row) == 4:
        return tuple(row)  # type: ignore[return-value]
    raise ValueError(f"row {i}: expected (name, duration_us, bytes, flops) or a dict, got {row!r}")


def roofline_frame(rows: Iterable[Any], ceilings: Ceilings) -> pd.DataFrame:
    """One row per variant: `name` plus the keys of `achieved()`.

    `rows` holds (name, duration_us, bytes, flops) tuples (bytes or flops may be None), or dicts
    with keys name, duration_us, bytes (or bytes_moved), flops.
    """
    records = []
    for i, row in enumerate(rows):
        name, duration, nbytes, nflops = _row_values(row, i)
        if not isinstance(name, str) or not name:
            raise ValueError(f"row {i}: name must be a non-empty str, got {name!r}")
        try:
            records.append({"name": name, **achieved(duration, nbytes, nflops, ceilings=ceilings)})
        except (TypeError, ValueError) as err:
            raise type(err)(f"row {i} ({name}): {err}") from None
    frame = pd.DataFrame(records, columns=["name", *ACHIEVED_KEYS])
    frame.attrs["ceilings"] = ceilings.label
    return frame


def roofline_figure(df: pd.DataFrame, ceilings: Ceilings) -> go.Figure:
    """Roofline plot of a `roofline_frame`: FLOP/byte (log x) against achieved TFLOP/s (log y).

    Draws the memory slope (bandwidth x intensity) and the compute roof, one marker trace per
    variant with its numbers on hover. Rows without both bytes and FLOPs have no intensity and are
    listed under the plot instead of drawn. Returns the figure; does not show it.
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"df must be a DataFrame from roofline_frame, got {type(df).__name__}")
    if not isinstance(ceilings, Ceilings):
        raise TypeError(f"ceilings must be a Ceilings, got {type(ceilings).__name__}")
    needed = {"name", "arithmetic_intensity", "achieved_tflops", "duration_us", "achieved_tbps",
              "pct_of_floor", "bound_by"}
    missing = sorted(needed - set(df.columns))
    if missing:
        raise ValueError(f"df lacks columns {missing}: build it with roofline_frame")
    plotted = df[df["arithmetic_intensity"].notna() & df["achieved_tflops"].notna()]
    skipped = [str(n) for n in df.loc[~df.index.isin(plotted.index), "name"]]

    ridge = ceilings.ridge_flop_per_byte
    xs = [ridge] + [float(v) for v in plotted["arithmetic_intensity"]]
    x_lo, x_hi = min(xs) / 10, max(xs) * 10
    peak = ceilings.matmul_tflops
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=[x_lo, ridge], y=[ceilings.copy_tbps * x_lo, peak], mode="lines",
        name=f"memory roof ({ceilings.copy_tbps:.3g} TB/s)", line={"color": "gray", "dash": "dash"},
        hovertemplate="memory roof: %{y:.3g} TFLOP/s at %{x:.3g} FLOP/byte<extra></extra>"))
    fig.add_trace(go.Scatter(
        x=[ridge, x_hi], y=[peak, peak], mode="lines",
        name=f"compute roof ({peak:.3g} TFLOP/s)", line={"color": "black"},
        hovertemplate="compute roof: %{y:.3g} TFLOP/s<extra></extra>"))
    for _, row in plotted.iterrows():
        hover = (f"<b>{row['name']}</b><br>{row['duration_us']:.1f} us, "
                 f"{row['achieved_tflops']:.3g} TFLOP/s, {row['achieved_tbps']:.3g} TB/s<br>"
                 f"{row['arithmetic_intensity']:.3g} FLOP/byte, {row['bound_by']} bound, "
                 f"{row['pct_of_floor']:.0f}% of floor<extra></extra>")
        fig.add_trace(go.Scatter(
            x=[row["arithmetic_intensity"]], y=[row["achieved_tflops"]], mode="markers",
            name=str(row["name"]), marker={"size": 11}, hovertemplate=hover))
    fig.update_xaxes(type="log", title="arithmetic intensity (FLOP/byte)")
    fig.update_yaxes(type="log", title="achieved TFLOP/s")
    fig.update_layout(title=f"Roofline: {ceilings.label}", template="plotly_white",
                      legend={"title": "variant"})
    if skipped:
        fig.add_annotation(text="not drawn (need bytes and FLOPs): " + ", ".join(skipped),
                           xref="paper", yref="paper", x=0, y=-0.18, showarrow=False, align="left")
    return fig
