"""The course's GeGLU pointwise Triton kernel (helpers/kernels/geglu_pointwise.py).

On a CPU-only machine (CI) these run the kernels in Triton's interpreter, which importing
``helpers.kernels`` switches on; shapes are kept small because the interpreter is slow. The tests
marked ``requires_cuda`` run the compiled kernels on a GPU.
"""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F
from support import kernel_device as device
from support import rel_err
from support import requires_compiled_kernels as requires_cuda
from support import seeded_randn as randn

from helpers import triton_env
from helpers.kernels import GeGLU, GeGLUFunction, geglu, geglu_backward, triton_mode
from helpers.mlp.model import geglu_reference


def test_mode_matches_machine() -> None:
    if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "") not in ("1", "true"):
        assert triton_mode() == "cuda"
    elif not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "0":
        # Importing helpers.kernels on a machine without CUDA must have switched the interpreter on.
        assert os.environ.get("TRITON_INTERPRET") == "1"
        assert triton_mode() == "interpreter"


@pytest.mark.parametrize("shape", [(9, 341), (1823, 781), (1, 1), (64, 1024)])
def test_fp32_matches_reference(shape: tuple[int, int]) -> None:
    gate, up = randn(*shape, seed=1), randn(*shape, seed=2) * 3
    out = torch.full(shape, float("nan"), device=gate.device)  # poisoned: every element must be written
    result = geglu(gate, up, out=out)
    assert result is out
    ref = F.gelu(gate.double(), approximate="tanh") * up.double()
    assert rel_err(out, ref) < 1e-4


def test_large_negative_and_positive_gates() -> None:
    # exp(-2z) would overflow without the clamp in _sigmoid_2z: results must stay finite and right.
    gate = torch.tensor([[-1e4, -50.0, -9.0, -1.0, 0.0, 1.0, 9.0, 50.0, 1e4]], device=device())
    up = torch.ones_like(gate)
    out = geglu(gate, up)
    ref = F.gelu(gate.double(), approximate="tanh")
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_io(dtype: torch.dtype) -> None:
    gate, up = randn(300, 200, dtype=dtype, seed=3), randn(300, 200, dtype=dtype, seed=4)
    out = geglu(gate, up)
    assert out.dtype == dtype and out.shape == gate.shape
    # Same inputs, fp32 math: only the final rounding to dtype differs (the interpreter rounds
    # toward zero where the GPU rounds to nearest, hence a few 1e-3 on CPU).
    assert rel_err(out, geglu_reference(gate.double(), up.double())) < 1e-2


def test_halves_of_one_wide_tensor_without_copy() -> None:
    M, H = 33, 100
    wide = randn(M, 2 * H, seed=5)
    gate, up = wide[:, :H], wide[:, H:]
    assert not gate.is_contiguous() and gate.stride() == (2 * H, 1)
    out = geglu(gate, up)
    assert out.is_contiguous()
    assert rel_err(out, geglu_reference(gate.double(), up.double())) < 1e-4
    # A strided destination works too: write into the first half of another wide tensor.
    dest = torch.full((M, 2 * H), float("nan"), device=wide.device)
    geglu(gate, up, out=dest[:, :H])
    assert torch.equal(dest[:, :H], out)
    assert torch.isnan(dest[:, H:]).all()  # untouched


def test_nd_inputs_flatten_leading_dims() -> None:
    gate, up = randn(2, 3, 5, 48, seed=6), randn(2, 3, 5, 48, seed=7)
    out = geglu(gate, up)
    assert out.shape == (2, 3, 5, 48)
    assert rel_err(out, geglu_reference(gate.double(), up.double())) < 1e-4
    # 1-D and a strided N-D half
    v = randn(77, seed=8)
    assert rel_err(geglu(v, v), geglu_reference(v.double(), v.double())) < 1e-4
    wide = randn(4, 6, 64, seed=9)
    g, u = wide.chunk(2, dim=-1)
    assert rel_err(geglu(g, u), geglu_reference(g.double(), u.double())) < 1e-4


def test_empty_input() -> None:
    gate = randn(0, 16)
    assert geglu(gate, gate).shape == (0, 16)


def test_module_and_function() -> None:
    x = randn(3, 7, 2 * 40, seed=10)
    gate, up = x[..., :40], x[..., 40:]
    ref = geglu_reference(gate.double(), up.double())
    assert rel_err(GeGLU()(x), ref) < 1e-4
    assert rel_err(GeGLU()(gate, up), ref) < 1e-4
    assert rel_err(GeGLUFunction.apply(gate, up), ref) < 1e-4


def test_backward_matches_autograd() -> None:
    gate = randn(37, 90, seed=11).requires_grad_()
    up = randn(37, 90, seed=12).requires_grad_()
    dout = randn(37, 90, seed=13)
    GeGLUFunction.apply(gate, up).backward(dout)
    g_ref = gate.detach().double().requires_grad_()
    u_ref = up.detach().double().requires_grad_()
    (F.gelu(g_ref, approximate="tanh") * u_ref).backward(dout.double())
    assert rel_err(gate.grad, g_ref.grad) < 1e-4
    assert rel_err(up.grad, u_ref.grad) < 1e-4
    # The functional form, with a non-contiguous dout.
    dg, du = geglu_backward(dout.t().contiguous().t(), gate.detach(), up.detach())
    assert rel_err(dg, g_ref.grad) < 1e-4 and rel_err(du, u_ref.grad) < 1e-4


def test_module_backward_through_wide_input() -> None:
    x = randn(5, 2 * 24, seed=14).requires_grad_()
    GeGLU()(x).sum().backward()
    x_ref = x.detach().double().requires_grad_()
    (F.gelu(x_ref[:, :24], approximate="tanh") * x_ref[:, 24:]).sum().backward()
    assert rel_err(x.grad, x_ref.grad) < 1e-4


# ---------------------------------------------------------------------------------------------
# Bad inputs: clear messages that say what to do
# ---------------------------------------------------------------------------------------------


def test_rejects_shape_mismatch() -> None:
    with pytest.raises(ValueError, match="same shape"):
        geglu(randn(4, 8), randn(4, 9))


def test_rejects_dtype_mismatch() -> None:
    with pytest.raises(ValueError, match=r"same dtype.*\.to\(dtype\)"):
        geglu(randn(4, 8), randn(4, 8, dtype=torch.float16))


def test_rejects_unsupported_dtype() -> None:
    x = torch.zeros(4, 8, dtype=torch.float64, device=device())
    with pytest.raises(ValueError, match="not supported"):
        geglu(x, x)


def test_rejects_non_tensor() -> None:
    with pytest.raises(TypeError, match="up must be a torch.Tensor, got list"):
        geglu(randn(2, 2), [[1.0, 2.0], [3.0, 4.0]])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        GeGLU()("not a tensor")  # type: ignore[arg-type]


def test_rejects_non_unit_inner_stride() -> None:
    x = randn(16, 8)
    with pytest.raises(ValueError, match=r"contiguous in its last dimension.*\.contiguous\(\)"):
        geglu(x.t(), x.t())


def test_rejects_mixed_devices() -> None:
    a = torch.zeros(4, 8, device=device())
    b = torch.zeros(4, 8, device="meta")
    with pytest.raises(ValueError, match="different devices"):
        geglu(a, b)


def test_compiled_mode_rejects_cpu_tensors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(triton_env, "_MODE", "cuda")
    x = torch.zeros(4, 8)
    with pytest.raises(ValueError, match=r"\.cuda\(\).*TRITON_INTERPRET=1"):
        geglu(x, x)


def test_rejects_bad_out() -> None:
    x = randn(4, 8)
    with pytest.raises(ValueError, match="out must match gate"):
        geglu(x, x, out=randn(4, 9))
    with pytest.raises(TypeError, match="out must be a torch.Tensor"):
        geglu(x, x, out=3)  # type: ignore[arg-type]


def test_module_rejects_odd_wide_input() -> None:
    with pytest.raises(ValueError, match="even last dimension"):
        GeGLU()(randn(3, 7))


# ---------------------------------------------------------------------------------------------
# GPU: the compiled kernels
# ---------------------------------------------------------------------------------------------


@requires_cuda
@pytest.mark.parametrize("shape", [(8192, 3072), (9, 341), (1823, 781), (3, 5, 129)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_gpu_half_precision(shape: tuple[int, ...], dtype: torch.dtype) -> None:
    gate = torch.randn(*shape, device="cuda", dtype=dtype)
    up = torch.randn(*shape, device="cuda", dtype=dtype)
    out = geglu(gate, up)
    ref = geglu_reference(gate.double(), up.double())
    assert rel_err(out, ref) < 1e-2
    # Against the fp32-math reference rounded the same way, nearly every element is identical.
    same = (out == geglu_reference(gate, up)).float().mean().item()
    assert same > 0.99


@requires_cuda
def test_gpu_blog_shape_halves_and_fp32() -> None:
    wide = torch.randn(8192, 2 * 3072, device="cuda", dtype=torch.bfloat16)
    g, u = wide[:, :3072], wide[:, 3072:]
    assert rel_err(geglu(g, u), geglu_reference(g.double(), u.double())) < 1e-2
    g32, u32 = g.float(), u.float()
    assert rel_err(geglu(g32, u32), geglu_reference(g32.double(), u32.double())) < 1e-5
