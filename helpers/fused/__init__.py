"""The course's own fused Triton kernels (notebook 06), in four layers each like Liger-Kernel:
a ``@triton.jit`` kernel, a launcher that checks its inputs, an autograd Function, an nn.Module.

- ``geglu(gate, up)`` / ``GeGLU``: the pointwise ``gelu_tanh(gate) * up`` at the memory floor.
- ``gate_up_geglu(x, w_packed)`` / ``FusedGeGLUMLP``: gate and up projections in one GEMM with the
  GeGLU in its epilogue; with cuBLAS's down projection, the MLP in two kernels.

Importing this package on a machine without CUDA sets ``TRITON_INTERPRET=1`` (see ``_backend``):
the same kernels then run, slowly, in Triton's CPU interpreter, so the notebooks and tests work
on a laptop. ``triton_mode()`` says which mode is active.
"""

from ._backend import triton_mode  # first: decides the Triton mode before any kernel is defined
from .geglu import GeGLU, GeGLUFunction, geglu, geglu_backward
from .geglu_mlp import FusedGeGLUMLP, GateUpGeGLUFunction, gate_up_geglu, pack_gate_up, unpack_gate_up

__all__ = [
    "triton_mode",
    "geglu",
    "geglu_backward",
    "GeGLUFunction",
    "GeGLU",
    "gate_up_geglu",
    "pack_gate_up",
    "unpack_gate_up",
    "GateUpGeGLUFunction",
    "FusedGeGLUMLP",
]
