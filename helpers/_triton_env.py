"""Switch Triton to its CPU interpreter on machines without a GPU, before anything imports triton.

Triton reads ``TRITON_INTERPRET`` when a ``@triton.jit`` function is defined, and its own standard
library (``tl.cdiv``, ...) is defined when triton is first imported. torch imports triton early
(``torch._dynamo``, ``torch.compile``), so if triton came in before the variable was set, the
course's kernels fail in the interpreter with "Cannot call @triton.jit'd outside of the scope of a
kernel". ``helpers/__init__.py`` therefore imports this module first, and it must stay cheap: it
imports neither triton nor torch (``import helpers`` is kept light for reading traces).

The decision: a value the user set is respected; otherwise, if torch is already imported, ask it
whether CUDA is available; if not, look for the NVIDIA driver's device node. No GPU -> interpreter.
"""

from __future__ import annotations

import os
import sys

ENV = "TRITON_INTERPRET"


def _gpu_present() -> bool:
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "cuda"):
        return bool(torch.cuda.is_available())
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0")


if ENV not in os.environ and "triton" not in sys.modules and not _gpu_present():
    os.environ[ENV] = "1"
