"""The course's own fused Triton kernels (notebook 06), in four layers each, like Liger-Kernel:
a ``@triton.jit`` kernel, a launcher that checks its inputs, an autograd Function, an nn.Module.

- ``geglu_pointwise.py``: ``gelu_tanh(gate) * up`` at the memory floor (``geglu``, ``GeGLUFunction``).
- ``gate_up.py``: gate and up projections in one GEMM with the GeGLU in its epilogue
  (``gate_up_geglu``, ``pack_gate_up``); ``gate_up_backward.py``: the backward's GEMM with a
  GeGLU-backward epilogue (``geglu_backward_gemm``). Their kernels in ``gate_up_kernels.py``; the
  path and configuration choice in ``gate_up_choice.py``; tile candidates, defaults and the tuned
  table (``gate_up_table.json``, written by ``benchmarks/geglu_kernels.py``) in
  ``gate_up_tuning.py``; per-shape launch plans in ``launch_plans.py``.
- ``mlp_function.py``: the whole MLP as one autograd Function, training in ``save`` or
  ``recompute`` mode (``GeGLUMLPFunction``).
- ``modules.py``: the layers ``GeGLU``, ``CourseGeGLUMLP`` and ``FusedGeGLUMLP``.

On a machine without CUDA the kernels run, slowly, in Triton's CPU interpreter
(``helpers.triton_env`` decides which), so the notebooks and tests work on a laptop.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> module: loaded on first use, so a plain-torch model that only checks an MLP's layout
# (``layout.projections``) never imports Triton.
_NAMES: dict[str, str] = {
    "triton_mode": "..triton_env",
    "gate_up_forward": ".gate_up", "gate_up_geglu": ".gate_up", "geglu_backward_gemm": ".gate_up",
    "pack_gate_up": ".gate_up", "unpack_gate_up": ".gate_up",
    "GeGLUFunction": ".geglu_pointwise", "geglu": ".geglu_pointwise", "geglu_backward": ".geglu_pointwise",
    "clear_plans": ".launch_plans", "plans_table": ".launch_plans",
    "MODES": ".mlp_function", "GateUpGeGLUFunction": ".mlp_function", "GeGLUMLPFunction": ".mlp_function",
    "CourseGeGLUMLP": ".modules", "FusedGeGLUMLP": ".modules", "GeGLU": ".modules", "config_sizes": ".modules",
}  # fmt: skip

__all__ = [
    "triton_mode",
    "geglu",
    "geglu_backward",
    "GeGLUFunction",
    "gate_up_geglu",
    "gate_up_forward",
    "geglu_backward_gemm",
    "GeGLUMLPFunction",
    "MODES",
    "clear_plans",
    "plans_table",
    "pack_gate_up",
    "unpack_gate_up",
    "GateUpGeGLUFunction",
    "GeGLU",
    "CourseGeGLUMLP",
    "FusedGeGLUMLP",
    "config_sizes",
]


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module 'helpers.kernels' has no attribute {name!r}")
    return getattr(importlib.import_module(_NAMES[name], __name__), name)
