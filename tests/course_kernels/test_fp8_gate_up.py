"""The FP8 gate+up paths: rowwise e4m3 quantization (torch and one-pass Triton), the unfused (cuBLAS) and fused
(the gate+up kernels with row scales) paths, and their error against bf16 and float32 on awkward shapes."""

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


# ----------------------------------------------------------------------------------------------
# The fused FP8 path (helpers/kernels/fp8_gate_up_fused.py): on a CPU the kernels run in Triton's
# interpreter, which multiplies e4m3 tiles exactly; on a GPU they need compute capability 8.9+.
# ----------------------------------------------------------------------------------------------


def _fp8_device() -> str:
    device = kernel_device()
    if device == "cuda" and torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("e4m3 tensor-core products need a GPU of compute capability 8.9 or newer")
    return device


def _fp8_problem(m: int, dim: int, hidden: int, seed: int = 0):
    """bf16 x and packed weight, its e4m3 values and scales, and two float64 references: of the
    bf16 inputs, and of exactly the quantized operands the kernel multiplies."""
    from helpers.kernels.gate_up import pack_gate_up

    device = _fp8_device()
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, dim, generator=g).to(torch.bfloat16)
    wg = (torch.randn(hidden, dim, generator=g) * dim**-0.5).to(torch.bfloat16)
    wu = (torch.randn(hidden, dim, generator=g) * dim**-0.5).to(torch.bfloat16)
    packed = pack_gate_up(wg, wu)
    w_values, w_scales = quantize_rows(packed)
    gelu = torch.nn.functional.gelu
    reference = gelu(x.double() @ wg.double().t(), approximate="tanh") * (x.double() @ wu.double().t())
    x_values, x_scales = quantize_rows(x)
    both = (x_values.double() @ w_values.double().t()) * x_scales.double() * w_scales.double().t()
    quantized = gelu(both[:, 0::2], approximate="tanh") * both[:, 1::2]
    on = {"device": device}
    return x.to(**on), packed.to(**on), w_values.to(**on), w_scales.to(**on), reference, quantized


def test_one_pass_quantizer_matches_quantize_rows_exactly():
    from helpers.kernels.fp8_gate_up_fused import quantize_rows_fp8

    device = _fp8_device()
    g = torch.Generator().manual_seed(1)
    # magnitudes over many decades (e4m3 subnormals included), an all-zero row, K past one block
    t = torch.randn(9, 200, generator=g) * torch.exp2(torch.randint(-20, 8, (9, 200), generator=g).float())
    t[3] = 0.0
    for dtype in (torch.float32, torch.bfloat16):
        x = t.to(dtype)
        values, scales = quantize_rows_fp8(x.to(device))
        ref_values, ref_scales = quantize_rows(x)
        assert values.dtype == torch.float8_e4m3fn and scales.shape == (9,) and scales.dtype == torch.float32
        assert torch.equal(scales.cpu(), ref_scales[:, 0])
        assert torch.equal(values.cpu().float(), ref_values.float()), dtype  # same rounding, to the bit


@pytest.mark.parametrize("kernel", ["auto", "tma", "pointer"])
@pytest.mark.parametrize(("m", "dim", "hidden"), [(37, 48, 80), (128, 64, 176)])
def test_fused_fp8_matches_references(m, dim, hidden, kernel):
    from helpers.kernels.fp8_gate_up_fused import fp8_gate_up_geglu_fused
    from helpers.kernels.gate_up import gate_up_geglu

    x, packed, w_values, w_scales, reference, quantized = _fp8_problem(m, dim, hidden)
    if kernel == "tma" and x.is_cuda and torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("tensor descriptors (TMA) need Hopper")
    out = fp8_gate_up_geglu_fused(x, w_values, w_scales, kernel=kernel)
    assert out.shape == (m, hidden) and out.dtype == torch.bfloat16
    # Against the same quantized operands in float64: only fp32 accumulation and the bf16 output
    # rounding (2^-9 relative) remain, so well under 1 %.
    assert relative_error(out.cpu(), quantized) < 1e-2
    # Against float32 arithmetic on the bf16 inputs: e4m3's 3 mantissa bits cost a few percent at
    # these small dims (sums of few products average little of the rounding away).
    err_fp8 = relative_error(out.cpu(), reference)
    assert err_fp8 < 0.08, err_fp8
    # Against the course's fused kernel without quantization (bf16 on a GPU; fp32 in the
    # interpreter, whose bf16 arithmetic is not faithful): the same few percent, never more.
    exact = gate_up_geglu(x if x.is_cuda else x.float(), packed if x.is_cuda else packed.float())
    err_exact = relative_error(exact.cpu(), reference)
    assert err_exact < err_fp8 and relative_error(out.cpu(), exact.cpu()) < 0.08


def test_fused_fp8_keeps_leading_dims_and_takes_fp16_out():
    from helpers.kernels.fp8_gate_up_fused import fp8_gate_up_geglu_fused

    x, _, w_values, w_scales, _, quantized = _fp8_problem(24, 32, 40)
    out = fp8_gate_up_geglu_fused(x.reshape(2, 12, 32), w_values, w_scales.reshape(-1), out_dtype=torch.float16)
    assert out.shape == (2, 12, 40) and out.dtype == torch.float16
    assert relative_error(out.reshape(24, 40).cpu(), quantized) < 1e-2
    assert fp8_gate_up_geglu_fused(x[:0], w_values, w_scales).shape == (0, 40)


def test_fused_fp8_module_matches_the_unfused_one():
    device = _fp8_device()
    if device == "cpu" and torch.__version__ < (2, 13):
        pytest.skip(f"torch {torch.__version__}'s CPU _scaled_mm takes per-tensor scales only")
    torch.manual_seed(0)
    mlp = SimpleGeGLUMLP(64, 96).eval().to(device, torch.bfloat16)
    x = torch.randn(3, 20, 64).to(device, torch.bfloat16)
    with torch.no_grad():
        fused = Fp8GeGLUMLP.from_module(mlp, fused=True)
        unfused = Fp8GeGLUMLP.from_module(mlp, fused=False)
        assert fused.w_values.shape == (192, 64) and fused.w_scales.shape == (192, 1)
        y_fused, y_unfused = fused(x).float(), unfused(x).float()
    # same quantized operands; the unfused path rounds the gate/up product to bf16 before the GeGLU
    assert relative_error(y_fused.cpu(), y_unfused.cpu()) < 2e-2


def test_fused_fp8_refuses_bad_inputs_clearly():
    from helpers.kernels.fp8_gate_up_fused import fp8_gate_up_geglu_fused, quantize_rows_fp8

    x, _, w_values, w_scales, _, _ = _fp8_problem(8, 32, 16)
    with pytest.raises(TypeError, match="torch.Tensor"):
        fp8_gate_up_geglu_fused(x.tolist(), w_values, w_scales)
    with pytest.raises(ValueError, match="e4m3"):
        fp8_gate_up_geglu_fused(x, w_values.float(), w_scales)
    with pytest.raises(ValueError, match=r"\[2\*hidden, dim\]"):
        fp8_gate_up_geglu_fused(x, w_values[:31], w_scales[:31])
    with pytest.raises(ValueError, match="multiple of 16"):
        fp8_gate_up_geglu_fused(x[:, :24], w_values[:, :24], w_scales)
    with pytest.raises(ValueError, match="one scale per weight row"):
        fp8_gate_up_geglu_fused(x, w_values, w_scales[:16])
    with pytest.raises(ValueError, match="one scale per weight row"):
        fp8_gate_up_geglu_fused(x, w_values, w_scales.double())
    with pytest.raises(ValueError, match="last dimension"):
        fp8_gate_up_geglu_fused(x[:, :16], w_values, w_scales)
    with pytest.raises(TypeError, match="bf16, fp16 or fp32"):
        fp8_gate_up_geglu_fused(x.to(torch.int32), w_values, w_scales)
    with pytest.raises(TypeError, match="out_dtype"):
        fp8_gate_up_geglu_fused(x, w_values, w_scales, out_dtype=torch.float32)
    with pytest.raises(ValueError, match="kernel must be one of"):
        fp8_gate_up_geglu_fused(x, w_values, w_scales, kernel="sideways")
    with pytest.raises(ValueError, match="2-D"):
        quantize_rows_fp8(x.reshape(2, 4, 32))
    with pytest.raises(ValueError, match="2-D bf16"):
        quantize_rows_fp8(w_values)


def test_fp8_tiles_follow_the_waves(monkeypatch):
    import helpers.kernels.fp8_gate_up_fused as F8
    from helpers.kernels.gate_up_tuning import gate_up_config

    own = gate_up_config(32, 32, 32, 1, 4)
    assert F8.fp8_configs("tma", 8192, 6144, torch.device("cpu"), own) == ([own], "caller")
    monkeypatch.setattr(F8, "triton_mode", lambda: "cuda")
    monkeypatch.setattr(F8, "num_sms", lambda index: 132)
    cuda0 = torch.device("cuda", 0)
    big, source = F8.fp8_configs("tma", 8192, 6144, cuda0)
    assert source == "default (fp8)" and len(big) == len(F8.FP8_CONFIGS["tma"])
    assert (big[0].kwargs["BLOCK_M"], big[0].kwargs["BLOCK_N"], big[0].kwargs["BLOCK_K"]) == (128, 256, 128)
    small, _ = F8.fp8_configs("tma", 128, 6144, cuda0)  # decode-sized M: smaller tiles fill the SMs
    assert small[0].kwargs["BLOCK_M"] == 64
    assert all(c.kwargs["BLOCK_K"] % 32 == 0 for cs in F8.FP8_CONFIGS.values() for c, _ in cs)  # fp8 MMA: K by 32
    with pytest.raises(ValueError, match="path must be"):
        F8.fp8_configs("sideways", 1, 1, cuda0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (CI has none): compiled tiles")
def test_gpu_fp8_every_swept_tile_compiles_and_is_right():
    # The Hopper tiles the benchmark sweeps (and the defaults), on a shape with a partial last tile
    # in M and a hidden size whose bf16 rows need a padded stride (1001 columns).
    from helpers.kernels.fp8_gate_up_fused import FP8_CONFIGS, FP8_SWEEP, fp8_gate_up_geglu_fused

    x, _, w_values, w_scales, reference, quantized = _fp8_problem(300, 768, 1001)
    hopper = torch.cuda.get_device_capability()[0] >= 9
    configs = (FP8_SWEEP + [c for c, _ in FP8_CONFIGS["tma"]]) if hopper else [c for c, _ in FP8_CONFIGS["pointer"]]
    out_default = fp8_gate_up_geglu_fused(x, w_values, w_scales)
    assert relative_error(out_default.cpu(), quantized) < 1e-2
    for cfg in configs:
        out = fp8_gate_up_geglu_fused(x, w_values, w_scales, config=cfg, kernel="tma" if hopper else "pointer")
        assert out.shape == (300, 1001)
        assert relative_error(out.cpu(), quantized) < 1e-2, cfg
        assert relative_error(out.cpu(), reference) < 0.08, cfg  # e4m3 itself: about 5 % here


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (CI has none)")
def test_gpu_fp8_refuses_gpus_before_ada(monkeypatch):
    from helpers.kernels.fp8_gate_up_fused import fp8_gate_up_geglu_fused

    x, _, w_values, w_scales, _, _ = _fp8_problem(8, 32, 16)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *args: (8, 0))
    with pytest.raises(ValueError, match="compute capability 8.9"):
        fp8_gate_up_geglu_fused(x, w_values, w_scales)
