"""An FP8 path for the MLP's gate+up GEMM: e4m3 inputs with per-row scales, bf16 out, then the course's GeGLU.

Hopper multiplies e4m3 at about twice the bf16 rate. This unfused path (cuBLAS's GEMM, then the GeGLU)
is the CPU route and the baseline that ``fp8_gate_up_fused.py`` improves on.
"""

from __future__ import annotations

import torch
from torch import nn

from ..measure.ceiling_gemms import fp8_supported

E4M3 = torch.float8_e4m3fn
E4M3_MAX = 448.0


def quantize_rows(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(values, scales)``: ``t`` (2-D) as e4m3 with one float32 scale per row, ``t ~ values * scales``."""
    if not isinstance(t, torch.Tensor) or t.dim() != 2:
        raise ValueError(f"quantize_rows needs a 2-D tensor, got {getattr(t, 'shape', type(t).__name__)}")
    if not t.is_floating_point():
        raise TypeError(f"quantize_rows needs a floating-point tensor, got {t.dtype}")
    amax = t.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-12)
    scales = amax / E4M3_MAX
    values = (t.float() / scales).clamp(-E4M3_MAX, E4M3_MAX).to(E4M3)
    return values, scales


def fp8_gate_up_geglu(
    x: torch.Tensor, w_values: torch.Tensor, w_scales: torch.Tensor, out_dtype: torch.dtype = torch.bfloat16
) -> torch.Tensor:
    """GeGLU of the gate+up product in e4m3: ``x`` [..., dim]; ``w_values`` [2*hidden, dim] e4m3 (gate rows, then up
    rows) with ``w_scales`` [2*hidden, 1] from :func:`quantize_rows`; returns [..., hidden] in ``out_dtype``."""
    if w_values.dtype != E4M3 or w_values.dim() != 2 or w_values.shape[0] % 2:
        raise ValueError(
            "w_values must be a 2-D e4m3 tensor of [2*hidden, dim] (quantize_rows of the gate and up rows)"
        )
    if x.shape[-1] != w_values.shape[1]:
        raise ValueError(f"x has {x.shape[-1]} features, the weight {w_values.shape[1]}")
    if not (x.device.type == "cpu" or fp8_supported(x.device)):  # torch's CPU _scaled_mm takes e4m3 too
        raise ValueError(f"no e4m3 matrix products on {x.device}: they need compute capability 8.9 or newer")
    rows = x.reshape(-1, x.shape[-1])
    x_values, x_scales = quantize_rows(rows)
    both = torch._scaled_mm(
        x_values, w_values.t(), scale_a=x_scales, scale_b=w_scales.reshape(1, -1), out_dtype=out_dtype
    )
    hidden = w_values.shape[0] // 2
    gate, up = both[:, :hidden], both[:, hidden:]
    if x.device.type == "cuda":
        from .geglu_pointwise import geglu

        out = geglu(gate, up)
    else:  # the interpreter is slow on a CPU: the same arithmetic in torch
        out = (torch.nn.functional.gelu(gate.float(), approximate="tanh") * up.float()).to(out_dtype)
    return out.reshape(*x.shape[:-1], hidden)


class Fp8GeGLUMLP(nn.Module):
    """A GeGLU MLP with its gate+up GEMM in e4m3 (weights packed as ``pack_gate_up`` and quantized once,
    per row), the down GEMM as given.

    ``fused``: True runs ``fp8_gate_up_fused.fp8_gate_up_geglu_fused`` (one Triton kernel; on a CPU in
    Triton's interpreter, slowly); False the unfused :func:`fp8_gate_up_geglu`; None (default) fused
    on a GPU, unfused on a CPU.
    """

    def __init__(self, gate: nn.Linear, up: nn.Linear, down: nn.Linear, fused: bool | None = None) -> None:
        super().__init__()
        if gate.bias is not None or up.bias is not None:
            raise ValueError("the FP8 gate+up path takes bias-free gate and up projections")
        from .gate_up import pack_gate_up  # (imports Triton: only when a module is built)

        values, scales = quantize_rows(pack_gate_up(gate.weight.detach(), up.weight.detach()))
        self.register_buffer("w_values", values)  # [2*hidden, dim] e4m3, rows interleaved gate, up
        self.register_buffer("w_scales", scales)  # [2*hidden, 1] float32
        self.down = down
        self.fused = fused
        self.out_dtype = gate.weight.dtype if gate.weight.dtype in (torch.bfloat16, torch.float16) else torch.bfloat16

    @classmethod
    def from_module(cls, mlp: nn.Module, fused: bool | None = None) -> Fp8GeGLUMLP:
        """From any module with ``gate_proj``, ``up_proj`` and ``down_proj`` linears (the course's MLPs, Llama's)."""
        try:
            return cls(mlp.gate_proj, mlp.up_proj, mlp.down_proj, fused=fused)
        except AttributeError as err:
            raise TypeError(f"{type(mlp).__name__} has no gate_proj/up_proj/down_proj linears") from err

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fused = self.fused if self.fused is not None else x.device.type == "cuda"
        if fused:
            from .fp8_gate_up_fused import fp8_gate_up_geglu_fused

            h = fp8_gate_up_geglu_fused(x, self.w_values, self.w_scales, out_dtype=self.out_dtype)
        else:  # the unfused path takes gate rows, then up rows: undo the interleaving
            n2, dim = self.w_values.shape
            values = self.w_values.reshape(n2 // 2, 2, dim).transpose(0, 1).reshape(n2, dim)
            scales = self.w_scales.reshape(n2 // 2, 2, 1).transpose(0, 1).reshape(n2, 1)
            h = fp8_gate_up_geglu(x, values, scales, self.out_dtype)
        return self.down(h.to(self.down.weight.dtype))
