"""The FP8 gate+up path: rowwise e4m3 quantization, and the MLP's error against bf16 and float32 on awkward shapes."""

from __future__ import annotations

import pytest
import torch
from support import kernel_device

from helpers.kernels.fp8_gate_up import E4M3_MAX, Fp8GeGLUMLP, fp8_gate_up_geglu, quantize_rows
from helpers.measure.numerics import relative_error
from helpers.mlp.model import SimpleGeGLUMLP


def test_rows_are_scaled_to_the_largest_e4m3_value():
    t = torch.tensor([[1.0, -2.0, 0.5], [0.0, 0.0, 0.0], [1e-3, 3e-3, -2e-3]])
    values, scales = quantize_rows(t)
    assert values.dtype == torch.float8_e4m3fn and scales.shape == (3, 1)
    assert values.float().abs().amax(dim=1)[[0, 2]].tolist() == [E4M3_MAX, E4M3_MAX]
    assert torch.allclose(values.float() * scales, t, rtol=0.07, atol=1e-6)  # 3 mantissa bits: about 6 %
    assert torch.isfinite(values.float()).all()  # an all-zero row gets a tiny scale, not a division by zero


@pytest.mark.parametrize(("tokens", "dim", "hidden"), [(37, 48, 80), (128, 64, 176)])
def test_fp8_mlp_error_against_bf16_and_float32(tokens, dim, hidden):
    # where the course's GeGLU kernel runs: the GPU when Triton compiles (e4m3 products need sm89+), the CPU
    # interpreter elsewhere (row-wise scales in torch's CPU _scaled_mm need torch 2.13 or newer)
    device = kernel_device()
    if device == "cpu" and torch.__version__ < (2, 13):
        pytest.skip(f"torch {torch.__version__}'s CPU _scaled_mm takes per-tensor scales only")
    if device == "cuda" and torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("e4m3 matrix products need a GPU of compute capability 8.9 or newer")
    torch.manual_seed(0)
    mlp = SimpleGeGLUMLP(dim, hidden).eval().to(device)
    x = torch.randn(2, tokens, dim).to(device)
    with torch.no_grad():
        reference = mlp(x.double().to(torch.float32))
        bf16 = mlp.to(torch.bfloat16)(x.to(torch.bfloat16)).float()
        fp8 = Fp8GeGLUMLP.from_module(mlp)(x.to(torch.bfloat16)).float()
    err_bf16, err_fp8 = relative_error(bf16, reference), relative_error(fp8, reference)
    # e4m3 keeps 3 mantissa bits (bf16: 7): its error is several times bf16's, and stays a few percent
    assert err_bf16 < err_fp8 < 0.08, (err_bf16, err_fp8)


def test_bad_weights_are_refused_clearly():
    x = torch.randn(4, 8)
    with pytest.raises(ValueError, match=r"\[2\*hidden, dim\]"):
        fp8_gate_up_geglu(x, torch.randn(6, 8), torch.ones(6, 1))
    values, scales = quantize_rows(torch.randn(6, 8))
    with pytest.raises(ValueError, match="features"):
        fp8_gate_up_geglu(torch.randn(4, 9), values, scales)
    with pytest.raises(ValueError, match="2-D"):
        quantize_rows(torch.randn(2, 3, 4))
