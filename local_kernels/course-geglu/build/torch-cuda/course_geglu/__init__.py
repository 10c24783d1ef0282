"""course-geglu, variant torch-cuda: the course's Triton GeGLU kernel compiled for the GPU.

The kernel is not copied here: it lives in the course's package (helpers/kernels/geglu_pointwise.py).
"""

from helpers.kernels import geglu

from . import layers

__all__ = ["geglu", "layers"]
