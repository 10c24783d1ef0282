"""The course's own fused Triton kernels (notebook 06), in four layers each, like Liger-Kernel:
a ``@triton.jit`` kernel, a launcher that checks its inputs, an autograd Function, an nn.Module.

- ``geglu_pointwise.py``: ``gelu_tanh(gate) * up`` at the memory floor (``geglu``, ``GeGLUFunction``).
- ``gate_up.py``: gate and up projections in one GEMM with the GeGLU in its epilogue
  (``gate_up_geglu``, ``GateUpGeGLUFunction``, ``pack_gate_up``).
- ``modules.py``: the layers ``GeGLU``, ``CourseGeGLUMLP`` and ``FusedGeGLUMLP``.

On a machine without CUDA the kernels run, slowly, in Triton's CPU interpreter
(``helpers.triton_env`` decides which), so the notebooks and tests work on a laptop.
"""

from ..triton_env import triton_mode
from .gate_up import GateUpGeGLUFunction, gate_up_geglu, pack_gate_up, unpack_gate_up
from .geglu_pointwise import GeGLUFunction, geglu, geglu_backward
from .modules import CourseGeGLUMLP, FusedGeGLUMLP, GeGLU, config_sizes

__all__ = [
    "triton_mode",
    "geglu",
    "geglu_backward",
    "GeGLUFunction",
    "gate_up_geglu",
    "pack_gate_up",
    "unpack_gate_up",
    "GateUpGeGLUFunction",
    "GeGLU",
    "CourseGeGLUMLP",
    "FusedGeGLUMLP",
    "config_sizes",
]
