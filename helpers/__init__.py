"""Helpers for the course "Reading PyTorch profiles": profile, load, read and draw traces.

The public surface (see ../shared/NOTES.md section 4 and README.md):

- :func:`profile` and :func:`load_trace` return a :class:`Trace`;
- ``Trace.ops()``, ``.kernels()``, ``.chain(op)``, ``.timeline()``, ``.save(path)``;
- :func:`decode_kernel` reads a kernel name; :mod:`helpers.roofline` turns times into rates.
"""

from . import exercises, roofline, workloads
from .kernel_names import decode_kernel, decode_kernels
from .models import BLOG_SHAPE, CPU_SHAPE, MLPShape, SimpleGeGLUMLP, geglu_reference
from .paths import LOCAL_TRACES_DIR, REPO_ROOT, TRACES_DIR, reference_trace_path
from .profiling import infer_device, profile
from .trace import NoKernelsError, Trace, TraceInfo, load_trace

__all__ = [
    "BLOG_SHAPE", "CPU_SHAPE", "MLPShape", "SimpleGeGLUMLP", "geglu_reference",
    "LOCAL_TRACES_DIR", "REPO_ROOT", "TRACES_DIR", "reference_trace_path",
    "infer_device", "profile", "workloads", "exercises", "roofline", "decode_kernel", "decode_kernels",
    "NoKernelsError", "Trace", "TraceInfo", "load_trace",
]
