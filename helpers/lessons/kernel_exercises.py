"""Used by notebook 06: check and time the learner's GeGLU kernel. Outputs start as NaN (an unwritten element
is caught) with guard regions after each tensor (an unmasked store is reported, not a crash)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd
import torch

from ..measure.ceilings import Ceilings, measure_ceilings
from ..measure.numerics import relative_error
from ..measure.profile import profile
from ..measure.timing import time_device
from ..mlp.model import geglu_reference
from ..mlp.plans import geglu_bytes
from ..triton_env import ensure_interpreter_ready, triton_mode
from .exercises import Feedback, check

EXPECTED = "matches geglu_reference"
GeGLULauncher = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], object]
# Interpreter shapes stay small (it runs each program in Python); GPU shapes include the blog's.
CPU_SHAPES: tuple[tuple[int, int], ...] = ((37, 341), (3, 1000))
GPU_SHAPES: tuple[tuple[int, int], ...] = ((1823, 781), (8192, 3072))
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 1e-2, torch.float16: 1e-2}
# Elements of guard after each tensor, at least the largest BLOCK a launcher uses: an unmasked
# store lands there instead of in someone else's memory (in the interpreter: a corrupted heap).
GUARD = 64 * 1024
GUARD_INPUT = 7.0  # what the input guards hold; the output guard holds NaN


def kernel_device() -> torch.device:
    """Used by notebook 06: where Triton kernels run here (the GPU when compiling, else the CPU interpreter)."""
    return torch.device("cuda" if triton_mode() == "cuda" and torch.cuda.is_available() else "cpu")


def _inputs(
    shape: tuple[int, int], dtype: torch.dtype, device: torch.device, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    gate = (torch.randn(shape, generator=g) * 2).to(device, dtype)
    up = torch.randn(shape, generator=g).to(device, dtype)
    return gate, up


def _guarded(t: torch.Tensor, fill: float) -> tuple[torch.Tensor, torch.Tensor]:
    """A contiguous copy of `t` as a view into a larger buffer, and the guard that follows it, filled with `fill`."""
    buf = torch.empty(t.numel() + GUARD, dtype=t.dtype, device=t.device)
    buf[t.numel() :].fill_(fill)
    view = buf[: t.numel()].view(t.shape)
    view.copy_(t)
    return view, buf[t.numel() :]


def check_geglu_kernel(
    fn: GeGLULauncher | None,
    name: str = "kernel 1: GeGLU in Triton",
    shapes: Sequence[tuple[int, int]] | None = None,
    dtype: torch.dtype | None = None,
) -> Feedback:
    """Used by notebook 06: run ``fn(gate, up, out)`` on awkward shapes and compare with the float32 reference."""
    hint = (
        "Fill in the three TODOs of my_geglu_kernel: load gate and up with the mask (as float32), "
        "compute gelu_tanh(g) * u, store it with the mask"
    )
    if fn is None or fn is Ellipsis:
        return check(name, None, EXPECTED, hint=hint, source="reference")
    if not callable(fn):
        raise TypeError(
            f"pass your launcher function, e.g. my_geglu (a callable fn(gate, up, out)), got {type(fn).__name__}"
        )
    ensure_interpreter_ready()
    device = kernel_device()
    dtype = dtype or (torch.bfloat16 if device.type == "cuda" else torch.float32)
    if dtype not in TOLERANCE:
        raise ValueError(f"dtype must be one of {list(TOLERANCE)}, got {dtype}")
    tol = TOLERANCE[dtype]
    shapes = list(shapes or (GPU_SHAPES if device.type == "cuda" else CPU_SHAPES))
    worst = 0.0
    for i, shape in enumerate(shapes):
        gate, up = _inputs(shape, dtype, device, seed=i)
        # the reference first, from copies: a kernel that rewrites its inputs cannot move the target
        ref = geglu_reference(gate.float().clone(), up.float().clone())
        (gate_in, gate_guard), (up_in, up_guard) = _guarded(gate, GUARD_INPUT), _guarded(up, GUARD_INPUT)
        given = (gate_in, up_in)
        out, out_guard = _guarded(torch.full(shape, float("nan"), dtype=dtype, device=device), float("nan"))
        where = f"a [{shape[0]}, {shape[1]}] {str(dtype).removeprefix('torch.')} input"
        try:
            fn(*given, out)
            if device.type == "cuda":
                torch.cuda.synchronize()
        except Exception as err:  # noqa: BLE001 - feedback, not a traceback
            msg = str(err).strip().splitlines()[-1][:300] if str(err).strip() else ""
            return check(
                name,
                f"raised {type(err).__name__}" + (f": {msg.rstrip('.')}" if msg else "") + f" on {where}",
                EXPECTED,
                source="reference",
                subject="your kernel",
                explain="read the error, fix the kernel cell, run it and this cell again.",
            )
        overrun = [n for n, g in (("out", out_guard), ("gate", gate_guard), ("up", up_guard)) if not _intact(g, n)]
        if overrun:
            return check(
                name,
                f"writes past the end of {' and '.join(overrun)} on {where}",
                EXPECTED,
                source="reference",
                subject="your kernel",
                explain="the last block runs past the end; mask the store (tl.store(..., mask=mask)).",
            )
        written = ~torch.isnan(out)
        if not bool(written.any()):
            return check(name, None, EXPECTED, hint=f"Your kernel wrote nothing yet. {hint}", source="reference")
        if not bool(written.all()):
            missing = int((~written).sum())
            return check(
                name,
                f"leaves {missing} of {out.numel()} elements unwritten on {where}",
                EXPECTED,
                source="reference",
                subject="your kernel",
                explain="every element must be stored; check the offsets, the mask and the grid.",
            )
        changed = [
            n for n, before, after in (("gate", gate, given[0]), ("up", up, given[1])) if not torch.equal(before, after)
        ]
        if changed:
            return check(
                name,
                f"changed its input {' and '.join(changed)} on {where}",
                EXPECTED,
                source="reference",
                subject="your kernel",
                explain="a GeGLU kernel only reads gate and up and stores into out.",
            )
        err = relative_error(out, ref)
        worst = max(worst, err)
        if not err <= tol:  # also catches NaN
            return check(
                name,
                f"relative error {err:.1e} against the reference on {where}, above the limit of {tol:.0e}",
                EXPECTED,
                source="reference",
                subject="your kernel",
                explain="check the formula: gelu_tanh(g) = g * sigmoid(2z), "
                "2z = 1.5957691216057308 * (g + 0.044715 * g**3), then multiply by u.",
            )
    return check(
        name,
        EXPECTED,
        EXPECTED,
        source="reference",
        explain=f"largest relative error {worst:.1e} (limit {tol:.0e}) on {len(shapes)} shapes, "
        f"{str(dtype).removeprefix('torch.')}, {'GPU' if device.type == 'cuda' else 'Triton CPU interpreter'}.",
    )


def _intact(guard: torch.Tensor, name: str) -> bool:
    return bool(torch.isnan(guard).all()) if name == "out" else bool((guard == GUARD_INPUT).all())


def _kernel_us(fn: Callable[[], object], repeats: int) -> float:
    """Mean summed duration (us) of the GPU kernels of one ``fn()`` call, read from a profile: the GPU's work
    alone, without the host's launch work that a wall clock per call also counts."""
    trace = profile(fn, steps=repeats, warmup=1, label="geglu kernel")
    kernels = trace.kernels(allow_empty=True)
    if kernels.empty:
        raise ValueError("the profile holds no GPU kernel of this launcher")
    return float(kernels["duration_us"].sum()) / len(trace.steps)


def time_geglu_kernel(
    fns: dict[str, GeGLULauncher],
    m: int,
    hidden: int,
    dtype: torch.dtype = torch.bfloat16,
    ceilings: Ceilings | None = None,
) -> pd.DataFrame:
    """Used by notebook 06: each launcher's kernel time on a GPU (profiler), its bandwidth and share of the memory
    roof, beside its median time per call between CUDA events (``call_us``: the Python launcher included)."""
    if kernel_device().type != "cuda":
        raise ValueError("timing a Triton kernel needs a CUDA GPU: in the CPU interpreter its speed means nothing")
    ceilings = ceilings or measure_ceilings("cuda")
    gate, up = _inputs((m, hidden), dtype, torch.device("cuda"), seed=0)
    out = torch.empty_like(gate)
    nbytes = geglu_bytes(m, hidden, dtype)
    floor_us = nbytes / ceilings.bandwidth_bytes_per_s * 1e6
    rows = []
    for label, fn in fns.items():
        call_us = time_device(lambda fn=fn: fn(gate, up, out), repeats=50, warmup=5) * 1e6
        us = _kernel_us(lambda fn=fn: fn(gate, up, out), repeats=20)
        rows.append(
            {
                "kernel": label,
                "kernel_us": us,
                "tbps": nbytes / us / 1e6,
                "pct_of_memory_roof": 100 * floor_us / us,
                "floor_us": floor_us,
                "call_us": call_us,
            }
        )
    return pd.DataFrame(rows)
