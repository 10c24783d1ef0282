"""course-geglu, variant torch-cpu: the course's Triton GeGLU kernel run by Triton's CPU interpreter.

The kernel is not copied here: it lives in the course's package (helpers/kernels/geglu_pointwise.py).
"""

from helpers.kernels import geglu, triton_mode

from . import layers

if triton_mode() != "interpreter":
    raise ImportError(
        "course-geglu's torch-cpu variant runs the Triton kernel in Triton's interpreter, but "
        "TRITON_INTERPRET is switched off in this process: unset TRITON_INTERPRET (or set it to 1) "
        "before importing helpers"
    )

__all__ = ["geglu", "layers"]
