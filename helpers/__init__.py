"""Helpers for the course "Reading PyTorch profiles": profile, load, read and draw traces.

The public surface (see ../shared/NOTES.md section 4 and README.md):

- :func:`profile` and :func:`load_trace` return a :class:`Trace`;
- ``Trace.ops()``, ``.kernels()``, ``.chain(op)``, ``.timeline()``, ``.save(path)``;
- :func:`decode_kernel` reads a kernel name; :mod:`helpers.roofline` turns times into rates;
- :func:`compare` and :func:`compare_kernels` put traces side by side.

Reading traces needs no torch: the names that need it (``profile``, the models, workloads,
rooflines) are imported on first use, so ``helpers.load_trace`` stays light (importing torch
costs about 300 MB and a few seconds; benchmarks/trace_loading.py measures the loader).
"""

from __future__ import annotations

import importlib
from typing import Any

from . import _triton_env  # noqa: F401  (first: Triton's CPU interpreter on machines without a GPU)
from .compare import compare, compare_kernels
from .kernel_names import decode_kernel, decode_kernels
from .paths import LOCAL_TRACES_DIR, REPO_ROOT, TRACES_DIR, reference_trace_path
from .trace import NoKernelsError, Trace, TraceInfo, load_trace

# name -> module (relative) that defines it; imported when first used.
_LAZY = {
    "BLOG_SHAPE": "models", "CPU_SHAPE": "models", "MLPShape": "models", "SimpleGeGLUMLP": "models",
    "geglu_reference": "models",
    "infer_device": "profiling", "profile": "profiling",
}
_LAZY_MODULES = {"exercises", "roofline", "workloads"}

__all__ = [
    "BLOG_SHAPE", "CPU_SHAPE", "MLPShape", "SimpleGeGLUMLP", "geglu_reference",
    "LOCAL_TRACES_DIR", "REPO_ROOT", "TRACES_DIR", "reference_trace_path",
    "infer_device", "profile", "workloads", "exercises", "roofline", "decode_kernel", "decode_kernels",
    "NoKernelsError", "Trace", "TraceInfo", "load_trace", "compare", "compare_kernels",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    elif name in _LAZY_MODULES:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
