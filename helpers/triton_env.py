"""Whether the course's Triton kernels are compiled for a GPU or run by Triton's CPU interpreter.

The one place that decides it: Triton reads ``TRITON_INTERPRET`` when an ``@triton.jit`` function is
defined, so ``helpers/__init__.py`` imports this module first (it imports neither torch nor triton).
A value the user set is respected; otherwise no CUDA GPU means the interpreter.
:func:`ensure_interpreter_ready` fixes Triton's library functions when triton was imported first;
``COURSE_PORTABLE_KERNELS=1`` (:func:`portable_kernels`) makes the kernels take their non-Hopper path.
"""

from __future__ import annotations

import os
import sys
from typing import Any

ENV = "TRITON_INTERPRET"
PORTABLE_ENV = "COURSE_PORTABLE_KERNELS"
_TRUE = {"1", "true", "yes", "on"}


def _gpu_present() -> bool:
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "cuda"):
        return bool(torch.cuda.is_available())
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0")


def _decide() -> None:
    if ENV not in os.environ and not _gpu_present():
        os.environ[ENV] = "1"


_decide()


def interpreter_requested() -> bool:
    """True when ``TRITON_INTERPRET`` asks for the interpreter."""
    return os.environ.get(ENV, "").strip().lower() in _TRUE


def portable_kernels() -> bool:
    """True when ``COURSE_PORTABLE_KERNELS`` asks for the portable (non-TMA, non-Hopper) kernel path."""
    return os.environ.get(PORTABLE_ENV, "").strip().lower() in _TRUE


_MODE: str | None = None


def triton_mode() -> str:
    """``"interpreter"`` when Triton kernels run in its CPU interpreter, ``"cuda"`` when compiled.

    Fixed by the first call (the course's kernel modules make it before defining their kernels):
    changing the variable later would not change how already-defined kernels run. A machine whose
    driver node exists but where torch sees no usable GPU is switched to the interpreter here.
    """
    global _MODE
    if _MODE is None:
        if ENV not in os.environ:
            import torch

            if not torch.cuda.is_available():
                os.environ[ENV] = "1"
        _MODE = "interpreter" if interpreter_requested() else "cuda"
    return _MODE


def ensure_interpreter_ready() -> None:
    """In interpreter mode, make Triton's own library functions runnable inside interpreted kernels.

    Needed only when ``triton`` was imported before the interpreter was switched on (see the
    module docstring). Converts each compiled-mode ``JITFunction`` of ``triton.language`` into an
    ``InterpretedFunction``. Raises RuntimeError with a plain-words fix if this Triton version
    does not allow it.
    """
    if triton_mode() != "interpreter" or "triton" not in sys.modules:
        return
    try:
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction
    except ImportError as err:  # pragma: no cover - depends on the Triton version
        raise RuntimeError(_RESTART_ADVICE) from err
    for name, module in list(sys.modules.items()):
        if not name.startswith("triton.language") or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if type(value) is JITFunction:
                try:
                    setattr(module, attr, InterpretedFunction(value.fn))
                except Exception as err:  # pragma: no cover - depends on the Triton version
                    raise RuntimeError(_RESTART_ADVICE) from err


_RESTART_ADVICE = (
    "Triton was imported before its CPU interpreter was switched on, and this Triton version does not "
    "let helpers convert its library functions. Restart the Python kernel and `import helpers` before "
    "importing triton."
)


def check_device(*tensors: Any, what: str = "inputs") -> None:
    """Raise a clear ValueError if `tensors` cannot run in the current Triton mode.

    Compiled mode needs CUDA tensors; the interpreter takes CPU tensors (and CUDA ones, which it
    copies to the host). All tensors must share one device.
    """
    device = tensors[0].device
    if all(t.device == device for t in tensors[1:]) and (device.type == "cuda" or _MODE == "interpreter"):
        return  # the hot path: one cheap comparison per tensor
    devices = {t.device for t in tensors}
    if len(devices) != 1:
        names = ", ".join(str(d) for d in sorted(devices, key=str))
        raise ValueError(f"{what} are on different devices ({names}): move them to one device with .to(device)")
    (device,) = devices
    if device.type != "cuda" and triton_mode() == "cuda":
        raise ValueError(
            f"{what} are on {device}, but Triton is compiling for CUDA here: move them to the GPU with "
            f".cuda(), or set {ENV}=1 before importing helpers to use the CPU interpreter"
        )
