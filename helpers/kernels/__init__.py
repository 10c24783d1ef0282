"""The course's own fused Triton kernels (notebook 06), in Liger-Kernel's four layers: kernel, checked launcher,
autograd Function, nn.Module. Without CUDA they run in Triton's CPU interpreter (``helpers.triton_env``)."""

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
    "gemv": ".decode_gemv", "DecodeGEMV": ".decode_gemv",
    "CourseGeGLUMLP": ".modules", "FusedGeGLUMLP": ".modules", "GeGLU": ".modules", "config_sizes": ".modules",
}  # fmt: skip

__all__ = list(_NAMES)


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module 'helpers.kernels' has no attribute {name!r}")
    return getattr(importlib.import_module(_NAMES[name], __name__), name)
