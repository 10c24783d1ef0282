"""Whether the course's Triton kernels are compiled for a GPU or run by Triton's CPU interpreter: Triton reads
``TRITON_INTERPRET`` when a kernel is defined, so ``helpers/__init__.py`` imports this first. A value the user
set is kept; else no CUDA GPU means the interpreter. ``COURSE_PORTABLE_KERNELS=1`` forces the non-Hopper path.
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
    """``"interpreter"`` or ``"cuda"``, fixed by the first call (changing it later would not change kernels already
    defined); a driver without a usable GPU means the interpreter."""
    global _MODE
    if _MODE is None:
        if ENV not in os.environ:
            import torch

            if not torch.cuda.is_available():
                os.environ[ENV] = "1"
        _MODE = "interpreter" if interpreter_requested() else "cuda"
    return _MODE


def ensure_interpreter_ready() -> None:
    """In interpreter mode, make ``triton.language``'s own functions runnable inside interpreted kernels (needed
    when triton was imported first); RuntimeError with a fix when this Triton does not allow it."""
    if triton_mode() != "interpreter" or "triton" not in sys.modules:
        return
    try:
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction
    except ImportError as err:  # pragma: no cover - depends on the Triton version
        raise RuntimeError(_RESTART_ADVICE) from err
    _let_loop_bounds_be_one_element_arrays()
    for name, module in list(sys.modules.items()):
        if not name.startswith("triton.language") or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if type(value) is JITFunction:
                try:
                    setattr(module, attr, InterpretedFunction(value.fn))
                except Exception as err:  # pragma: no cover - depends on the Triton version
                    raise RuntimeError(_RESTART_ADVICE) from err


def _let_loop_bounds_be_one_element_arrays() -> None:
    """Some Triton interpreters (3.6 among them) turn a kernel's scalar into an index with ``int(array)``, which
    NumPy 2.4 refuses for a one-element array: ``range(0, K, BLOCK)`` then fails. Re-set ``__index__`` with
    ``.item()``, which takes any one-element array and still refuses a longer one."""
    from triton.runtime import interpreter

    patch = getattr(interpreter, "_patch_lang_tensor", None)
    if patch is None or getattr(patch, "course_index_fix", False):
        return

    def patch_with_item_index(tensor: Any, scope: Any) -> None:
        patch(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))

    patch_with_item_index.course_index_fix = True  # type: ignore[attr-defined]
    interpreter._patch_lang_tensor = patch_with_item_index


_RESTART_ADVICE = (
    "Triton was imported before its CPU interpreter was switched on, and this Triton version does not "
    "let helpers convert its library functions. Restart the Python kernel and `import helpers` before "
    "importing triton."
)


def check_device(*tensors: Any, what: str = "inputs") -> None:
    """ValueError unless `tensors` share one device that the current Triton mode runs (compiled: CUDA)."""
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
