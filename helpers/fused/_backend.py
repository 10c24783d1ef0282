"""How the course's Triton kernels run on this machine: compiled for a CUDA GPU, or interpreted.

Triton decides at *decoration* time whether an ``@triton.jit`` function is compiled or run by its
interpreter: ``triton.jit`` reads ``TRITON_INTERPRET`` when the function is defined, not when it is
called. So on a machine without CUDA this module sets ``TRITON_INTERPRET=1`` and it must be imported
before any kernel module of ``helpers.fused`` defines its kernels (``helpers/fused/__init__.py`` and
each kernel module import it first). Importing ``helpers.fused`` on a CPU-only machine therefore
changes the process environment; that is deliberate and it is the only side effect.

A value the user already set is respected: ``TRITON_INTERPRET=1`` on a GPU machine runs the
kernels in the interpreter (useful to debug them with ``print``), ``TRITON_INTERPRET=0`` on a CPU
machine leaves Triton compiling, and the launchers then refuse CPU tensors with a clear message.

Interpreter limits the kernels are written around (NOTES.md): no libdevice (so ``tanh`` is written
with ``sigmoid``), bf16 arithmetic is wrong (every kernel converts to fp32 before computing), and it
is slow (keep shapes small in CPU tests).
"""

from __future__ import annotations

import os

import torch

# Must happen before any @triton.jit in this package runs (see the module docstring); the
# decision lives in helpers/_triton_env.py so that `import helpers` makes it before torch
# imports triton.
from .._triton_env import ENV as _ENV

if _ENV not in os.environ and not torch.cuda.is_available():
    # helpers/_triton_env.py could not decide early (torch not imported, a driver node present)
    os.environ[_ENV] = "1"

_TRUE = {"1", "true", "yes", "on"}


def _interpret_requested() -> bool:
    return os.environ.get(_ENV, "").strip().lower() in _TRUE


# Fixed at import: triton.jit reads TRITON_INTERPRET when each kernel is *defined*, so changing
# the variable later would not change how this package's kernels run (and reading the
# environment on every launch would cost time on the hot path).
_MODE = "interpreter" if _interpret_requested() else "cuda"


def triton_mode() -> str:
    """``"interpreter"`` when Triton kernels run in its CPU interpreter, ``"cuda"`` when compiled."""
    return _MODE


def check_device(*tensors: torch.Tensor, what: str = "inputs") -> None:
    """Raise a clear error if ``tensors`` cannot run in the current Triton mode.

    Compiled mode needs CUDA tensors; the interpreter takes CPU tensors (and CUDA ones, which it
    copies to the host). All tensors must share one device.
    """
    device = tensors[0].device
    if all(t.device == device for t in tensors[1:]) and (device.type == "cuda" or triton_mode() != "cuda"):
        return  # the hot path: one cheap comparison per tensor
    devices = {t.device for t in tensors}
    if len(devices) != 1:
        names = ", ".join(str(d) for d in sorted(devices, key=str))
        raise ValueError(f"{what} are on different devices ({names}): move them to one device with .to(device)")
    (device,) = devices
    if triton_mode() == "cuda" and device.type != "cuda":
        raise ValueError(
            f"{what} are on {device}, but Triton is compiling for CUDA here: move them to the GPU with "
            f".cuda(), or set {_ENV}=1 before importing helpers.fused to use the CPU interpreter"
        )
