"""The ceilings of a device (memory roof, matmul rates), measured one way. A kernel's floor is its bytes and
FLOPs divided by these; a kernel faster than its floor means the ceiling is wrong."""

from __future__ import annotations

import datetime as _dt
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from functools import partial
from typing import Any

import pandas as pd
import torch

from ..checks import positive_int, positive_number
from ..trace.registry import REFERENCE_CEILINGS
from . import ceilings_cache
from .ceiling_gemms import CUDA_MATMUL_SHAPES, best_fp8_matmul_rate, best_matmul_rate
from .device import cpu_label, resolve_device
from .timing import time_device, time_per_call


@dataclass(frozen=True)
class Ceilings:
    """The ceilings of a device: copy bandwidth (bytes read + written), the bf16 matmul rate, the FP8 rate (None
    where not measured: FP8 GEMMs are then not judged), and whether they were measured here or recorded elsewhere."""

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
    # bytes per second of read-dominated traffic (the faster of a large torch.sum and torch.ne): HBM
    # reads run a few per cent faster than a copy's even mix, so read-heavy kernels beat a copy
    read_bytes_per_s: float | None = None
    # the device's last-level cache: memory-bound work smaller than it may never reach DRAM
    l2_bytes: int | None = None
    # bytes per second of write-only traffic (a large Tensor.fill_): on HBM a fill can stream
    # faster than a copy or a sum, so a kernel that mostly writes is judged against this
    write_bytes_per_s: float | None = None
    fp8_matmul_flop_per_s: float | None = None
    # who measured a set the lessons share (``lesson 03``, a script's name): shown in the label
    measured_by: str | None = None

    def __post_init__(self) -> None:
        if self.source not in ("measured", "reference"):
            raise ValueError(f"source must be 'measured' or 'reference', got {self.source!r}")
        for name in ("copy_bytes_per_s", "matmul_flop_per_s"):
            positive_number(name, getattr(self, name))
        if len(self.matmul_shape) != 3:
            raise ValueError(f"matmul_shape must be (m, n, k), got {self.matmul_shape!r}")
        for i, v in enumerate(self.matmul_shape):
            positive_int(f"matmul_shape[{i}]", v)
        if self.copy_bytes is not None:
            positive_int("copy_bytes", self.copy_bytes)
        for name in ("read_bytes_per_s", "write_bytes_per_s", "fp8_matmul_flop_per_s"):
            if getattr(self, name) is not None:
                positive_number(name, getattr(self, name))

    @property
    def bandwidth_bytes_per_s(self) -> float:
        """The memory roof: the fastest of the copy, read and write bandwidths (a floor no kernel may beat)."""
        return max(self.copy_bytes_per_s, self.read_bytes_per_s or 0.0, self.write_bytes_per_s or 0.0)

    @property
    def bandwidth_tbps(self) -> float:
        """The memory roof in TB/s."""
        return self.bandwidth_bytes_per_s / 1e12

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
        return self.matmul_flop_per_s / self.bandwidth_bytes_per_s

    @property
    def label(self) -> str:
        """Short text for titles: device and whether the numbers are a recorded reference."""
        if self.source == "measured" and self.measured_by and self.recorded:
            try:
                at = _dt.datetime.fromisoformat(self.recorded).strftime("%H:%M")
            except ValueError:
                at = self.recorded
            return f"{self.device} (measured by {self.measured_by} at {at})"
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
            (
                "read bandwidth",
                round(self.read_bytes_per_s / 1e12, 4) if self.read_bytes_per_s else None,
                "TB/s (bytes read by a sum)",
            ),
            (
                "write bandwidth",
                round(self.write_bytes_per_s / 1e12, 4) if self.write_bytes_per_s else None,
                "TB/s (bytes written by a fill; the memory roof is the fastest of the three)",
            ),
            (
                "matmul rate",
                round(self.matmul_tflops, 4),
                f"TFLOP/s ({self.matmul_dtype}, {'x'.join(map(str, self.matmul_shape))})",
            ),
            (
                "FP8 matmul rate",
                round(self.fp8_matmul_flop_per_s / 1e12, 4) if self.fp8_matmul_flop_per_s else None,
                "TFLOP/s (e4m3 torch._scaled_mm, bf16 out; none where not measured)",
            ),
            ("ridge point", round(self.ridge_flop_per_byte, 2), "FLOP/byte"),
            ("source", self.source, self.recorded or ""),
            ("method", self.method, ""),
            ("torch", self.torch_version, ""),
        ]
        return pd.DataFrame(rows, columns=["quantity", "value", "unit"]).set_index("quantity")


# fields a file recorded before they were measured may lack
OPTIONAL_FIELDS = (
    "recorded", "read_bytes_per_s", "l2_bytes", "write_bytes_per_s", "fp8_matmul_flop_per_s", "measured_by",
)  # fmt: skip


def ceilings_from_dict(d: Mapping[str, Any]) -> Ceilings:
    """`Ceilings` from a dict (``Ceilings.as_dict()``); missing or unknown keys raise ValueError, so a typo in a
    stored file is never ignored."""
    if not isinstance(d, Mapping):
        raise TypeError(f"ceilings_from_dict expects a dict, got {type(d).__name__}")
    known = {f.name for f in fields(Ceilings)}
    required = {f.name for f in fields(Ceilings) if f.name not in OPTIONAL_FIELDS}
    missing = sorted(required - set(d))
    extra = sorted(set(d) - known)
    if missing or extra:
        raise ValueError(f"ceilings dict: missing keys {missing}, unknown keys {extra}")
    values = dict(d)
    shape = values["matmul_shape"]
    if not isinstance(shape, (list, tuple)):
        raise ValueError(f"matmul_shape must be a list of three ints, got {shape!r}")
    values["matmul_shape"] = tuple(shape)
    for key in (
        "copy_bytes_per_s",
        "matmul_flop_per_s",
        "read_bytes_per_s",
        "write_bytes_per_s",
        "fp8_matmul_flop_per_s",
    ):
        if values.get(key) is not None:
            positive_number(key, values[key])
            values[key] = float(values[key])
    return Ceilings(**values)


def reference_ceilings_for(device: str) -> Ceilings | None:
    """The recorded ceilings registered for a device name (``trace.registry``), or None when none is."""
    for fragment, load in REFERENCE_CEILINGS.items():
        if fragment in str(device):
            return load()
    return None


# How many timed runs each ceiling is the median of, after how many untimed warm-ups.
CUDA_REPEATS, CUDA_WARMUP = 10, 3
CPU_REPEATS, CPU_WARMUP = 10, 2


def gemm_flops_cube(n: int) -> int:
    """FLOPs of an n x n x n matrix product (the ceiling's matmul)."""
    return 2 * n * n * n


def _measure_cpu() -> Ceilings:
    # Buffers larger than a laptop's caches, so the copy runs from DRAM; enough runs that the median
    # outvotes scheduler stalls on a shared machine, while the whole measurement stays short on CI.
    numel = 32 * 1024 * 1024
    src = torch.ones(numel, dtype=torch.float32)  # written, so reads do not hit the zero page
    dst = torch.empty_like(src)
    repeats, warmup = CPU_REPEATS, CPU_WARMUP
    copy_s = time_per_call(dst.copy_, src, repeats=repeats, warmup=warmup)
    copy_bytes = 2 * numel * src.element_size()
    read_rate = max(
        numel * src.element_size() / time_per_call(torch.sum, src, repeats=repeats, warmup=warmup),
        numel * (src.element_size() + 1) / time_per_call(torch.ne, src, 0.0, repeats=repeats, warmup=warmup),
    )
    write_rate = numel * dst.element_size() / time_per_call(dst.fill_, 1.0, repeats=repeats, warmup=warmup)
    del src, dst
    n = 1024
    a = torch.randn(n, n, dtype=torch.float32)
    b = torch.randn(n, n, dtype=torch.float32)
    mm_s = time_per_call(torch.mm, a, b, repeats=repeats, warmup=warmup)
    threads = torch.get_num_threads()
    return Ceilings(
        device=cpu_label(threads),
        device_type="cpu",
        copy_bytes_per_s=copy_bytes / copy_s,
        matmul_flop_per_s=gemm_flops_cube(n) / mm_s,
        matmul_dtype="float32",
        matmul_shape=(n, n, n),
        copy_bytes=copy_bytes,
        read_bytes_per_s=read_rate,
        write_bytes_per_s=write_rate,
        method=(
            f"median of {repeats} timed runs after {warmup} warm-ups (time_per_call: wall clock, one call at a time), "
            f"{threads} torch thread{'' if threads == 1 else 's'}: Tensor.copy_, torch.sum, torch.ne and Tensor.fill_ of {numel * 4 // 2**20} MiB float32, "
            f"torch.mm {n}x{n}x{n} float32"
        ),
        torch_version=torch.__version__,
        source="measured",
        recorded=_dt.datetime.now().isoformat(timespec="seconds"),
    )


def _measure_cuda(device: torch.device) -> Ceilings:
    with torch.cuda.device(device):
        free, _total = torch.cuda.mem_get_info()
        repeats, warmup = CUDA_REPEATS, CUDA_WARMUP
        # The roof is the best rate measured, over buffers of 128 MiB and 1 GiB (smaller on a small
        # or busy GPU): a working set of twice the L2 still gets some help from it, and kernels on
        # such tensors would otherwise beat the roof.
        copy_rate = read_rate = write_rate = 0.0
        copy_bytes = 0
        for src_bytes in sorted({min(2**27, free // 8), min(2**30, free // 8)}):
            numel = max(src_bytes // 4, 1 << 20)
            src = torch.ones(numel, dtype=torch.float32, device=device)
            dst = torch.empty_like(src)
            moved = 2 * numel * src.element_size()
            rate = moved / time_device(partial(dst.copy_, src), repeats, warmup)
            if rate > copy_rate:
                copy_rate, copy_bytes = rate, moved
            # read-dominated traffic: a sum (reads only) and a comparison (4 bytes read, 1 written);
            # HBM moves reads faster than a copy's even mix
            read_rate = max(
                read_rate,
                numel * src.element_size() / time_device(partial(torch.sum, src), repeats, warmup),
                numel * (src.element_size() + 1) / time_device(partial(torch.ne, src, 0.0), repeats, warmup),
            )
            # write-only traffic: a fill reads nothing
            write_rate = max(
                write_rate, numel * dst.element_size() / time_device(partial(dst.fill_, 1.0), repeats, warmup)
            )
            del src, dst
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        mm_rate, mm_shape = best_matmul_rate(device, dtype, repeats, warmup)
        fp8 = best_fp8_matmul_rate(device, repeats, warmup)
        name = torch.cuda.get_device_name(device)
        l2_bytes = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)) or None
    return Ceilings(
        device=name,
        device_type="cuda",
        copy_bytes_per_s=copy_rate,
        matmul_flop_per_s=mm_rate,
        matmul_dtype=str(dtype).removeprefix("torch."),
        matmul_shape=mm_shape,
        copy_bytes=copy_bytes,
        read_bytes_per_s=read_rate,
        write_bytes_per_s=write_rate,
        l2_bytes=l2_bytes,
        fp8_matmul_flop_per_s=fp8[0] if fp8 else None,
        method=(
            f"median of {repeats} runs timed with CUDA events after {warmup} warm-ups, best of 128 MiB and 1 GiB "
            f"float32 buffers on {device}: Tensor.copy_, torch.sum, torch.ne and Tensor.fill_; best torch.mm of "
            f"{', '.join('x'.join(map(str, mnk)) for mnk in CUDA_MATMUL_SHAPES)} {str(dtype).removeprefix('torch.')}, "
            "A row- and column-major"
            + (
                f"; best e4m3 torch._scaled_mm (bf16 out, tensor-wise scales, with and without fast accumulation) "
                f"of the same shapes, fastest {'x'.join(map(str, fp8[1]))}"
                if fp8
                else "; no FP8 matmul (torch._scaled_mm e4m3 needs compute capability 8.9+)"
            )
        ),
        torch_version=torch.__version__,
        source="measured",
        recorded=_dt.datetime.now().isoformat(timespec="seconds"),
    )


_CACHE: dict[str, Ceilings] = {}


def _device_name(resolved: torch.device) -> str:
    return cpu_label(torch.get_num_threads()) if resolved.type == "cpu" else torch.cuda.get_device_name(resolved)


def measure_ceilings(device: torch.device | str | None = None, refresh: bool = False) -> Ceilings:
    """Measure the copy bandwidth and matmul rates of `device` (None: CUDA if available, else CPU), once per
    process per device unless `refresh`. The first measurement of a machine is kept in ``$COURSE_CEILINGS_CACHE``
    (the lessons set it to the local traces folder) and reused by later lessons for a few hours under the same torch version, so a session's
    lessons share one set; a stale, other or unreadable file is measured again (an unreadable one with a note)."""
    if not isinstance(refresh, bool):
        raise TypeError(f"refresh must be True or False, got {refresh!r}")
    resolved = resolve_device(device)
    key = str(resolved)
    if not refresh and key in _CACHE:
        return _CACHE[key]
    path, name = ceilings_cache.cache_path(), _device_name(resolved)
    if path is not None and not refresh:
        stored, note = ceilings_cache.read_entry(path, name, torch.__version__, _dt.datetime.now())
        if stored is not None:
            try:
                _CACHE[key] = ceilings_from_dict(stored)
                return _CACHE[key]
            except (TypeError, ValueError) as err:
                note = f"the cached ceilings in {path} are unreadable ({err}); measuring again"
        if note:
            warnings.warn(note, stacklevel=2)
    measured = _measure_cpu() if resolved.type == "cpu" else _measure_cuda(resolved)
    _CACHE[key] = replace(measured, measured_by=ceilings_cache.who_measures())
    note = ceilings_cache.write_entry(path, name, _CACHE[key].as_dict()) if path is not None else ""
    if note:
        warnings.warn(note, stacklevel=2)
    return _CACHE[key]


def ceilings_for(trace: Any) -> Ceilings:
    """The ceilings of the machine that recorded `trace`: measured here for a live profile, the registered set for
    a recorded trace's device; ValueError otherwise (never this machine's for another's trace)."""
    from ..trace.model import check_trace

    check_trace(trace)
    if trace.info.source == "live":
        return measure_ceilings("cuda" if trace.device_lanes else "cpu")
    recorded = reference_ceilings_for(trace.info.device)
    if recorded is not None:
        return recorded
    raise ValueError(
        f"no known ceilings for {trace.info.describe()}: pass ceilings=... measured on the machine that "
        "recorded it (helpers.measure_ceilings() there, or benchmarks/ceilings.py)"
    )
