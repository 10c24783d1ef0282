"""The course's batch-1 GEMV for decode (helpers/kernels/decode_gemv.py): numerics against float32 torch on
awkward shapes, its fused prologues and epilogue, the module's fallback for more than one row.

On a CPU-only machine these run in Triton's interpreter (importing ``helpers.kernels`` switches it on), with
the interpreter's fixed blocks; the test marked ``requires_cuda`` runs the autotuned, compiled kernels.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from support import kernel_device as device
from support import rel_err
from support import requires_compiled_kernels as requires_cuda
from support import seeded_randn as randn

from helpers.kernels import decode_gemv as dg
from helpers.kernels.decode_gemv import DecodeGEMV, gemv, gemv_reference, launch_gemv
from helpers.mlp.model import SimpleGeGLUMLP

# relative error against float32 torch: fp32 sums in another order; bf16/fp16 round the output (and the
# interpreter rounds toward zero where a GPU rounds to nearest)
TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}


def _problem(N, K, prologue, residual, dtype, seed=0):
    x = randn(1, 1, 2 * K if prologue == "geglu" else K, dtype=dtype, seed=seed)
    w = randn(N, K, dtype=dtype, seed=seed + 1, scale=K**-0.5)
    norm_weight = (1 + randn(K, seed=seed + 2, scale=0.1)).to(dtype) if prologue == "rmsnorm" else None
    res = randn(1, 1, N, dtype=dtype, seed=seed + 3) if residual else None
    return x, w, norm_weight, res


# K and N off the blocks (300, 37, 45, 19), N = 1, the decoder's K (2048) and a Llama-style MLP width (5632)
SHAPES = [
    (37, 300, "none", False),
    (1, 2048, "none", True),
    (19, 2048, "rmsnorm", False),
    (1, 300, "rmsnorm", True),
    (45, 5632, "geglu", True),
    (3, 5632, "none", False),
    (17, 130, "geglu", False),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize(("N", "K", "prologue", "residual"), SHAPES)
def test_matches_float32_torch(N, K, prologue, residual, dtype):
    x, w, norm_weight, res = _problem(N, K, prologue, residual, dtype)
    out = gemv(x, w, prologue, norm_weight, 1e-5, res)
    assert out.shape == (1, 1, N) and out.dtype == dtype
    assert torch.isfinite(out).all()
    assert rel_err(out, gemv_reference(x, w, prologue, norm_weight, 1e-5, res)) < TOLERANCE[dtype]


@pytest.mark.parametrize("blocks", [(1, 64, 1), (8, 128, 4), (64, 32, 2)])
def test_every_block_shape_writes_every_row(blocks):
    x, w, _, res = _problem(45, 300, "none", True, torch.float32, seed=5)
    out = torch.full((45,), float("nan"), device=x.device)  # poisoned: every row must be written
    launch_gemv(x.reshape(-1), w, out, residual=res, blocks=blocks)
    assert rel_err(out, gemv_reference(x, w, residual=res).reshape(-1)) < 1e-5


def test_the_geglu_prologue_is_the_mlp_s_gelu():
    """gate+up, then GeGLU+down as two GEMVs equal SimpleGeGLUMLP (tanh GeLU) on one token."""
    torch.manual_seed(0)
    mlp = SimpleGeGLUMLP(48, 80).to(device())
    x = randn(1, 48, seed=7)
    gate_up = gemv(x, torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]).detach())
    with torch.no_grad():
        out, expected = gemv(gate_up, mlp.down_proj.weight.detach(), "geglu"), mlp(x)
    assert rel_err(out, expected) < 1e-5
    erf = F.linear(F.gelu(gate_up[:, :80]) * gate_up[:, 80:], mlp.down_proj.weight).detach()
    assert rel_err(out, erf) > 10 * rel_err(out, expected)  # the tanh approximation, not the erf GeLU


def test_bad_calls_are_refused():
    x, w, norm_weight, _ = _problem(8, 32, "rmsnorm", False, torch.float32)
    with pytest.raises(ValueError, match="one row"):
        gemv(randn(2, 32), w)
    with pytest.raises(ValueError, match="last dimension"):
        gemv(x, w, "geglu")
    with pytest.raises(ValueError, match="prologue"):
        gemv(x, w, "swiglu")
    with pytest.raises(ValueError, match="norm_weight"):
        gemv(x, w, "rmsnorm")
    with pytest.raises(ValueError, match="dtype"):
        gemv(x.half(), w)
    with pytest.raises(ValueError, match="residual"):
        gemv(x, w, residual=randn(9))
    with pytest.raises(ValueError, match="contiguous along K"):
        gemv(randn(8), w.t())
    with pytest.raises(TypeError, match="torch.Tensor"):
        gemv(x.tolist(), w)


def _module(prologue):
    torch.manual_seed(1)
    linear = torch.nn.Linear(40, 24, bias=False).to(device())
    norm = None
    if prologue == "rmsnorm":
        from helpers.decoder.model import RMSNorm

        norm = RMSNorm(40, eps=1e-6).to(device())
        with torch.no_grad():
            norm.weight.normal_(1.0, 0.1)
    return DecodeGEMV(linear, prologue, norm)


@pytest.mark.parametrize("prologue", ["none", "rmsnorm", "geglu"])
def test_module_runs_the_gemv_for_one_row_only(prologue, monkeypatch):
    layer = _module(prologue)
    k = 80 if prologue == "geglu" else 40
    calls = []
    real = dg.gemv
    monkeypatch.setattr(dg, "gemv", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    with torch.no_grad():
        one, res = randn(1, 1, k, seed=2), randn(1, 1, 24, seed=3)
        assert rel_err(layer(one, res), _composed(layer, one, res)) < 1e-5
        assert calls == [1]
        rows = randn(3, 5, k, seed=4)  # a prefill: the layers as they are, no GEMV
        assert torch.equal(layer(rows), _composed(layer, rows))
    assert calls == [1]
    trained = randn(1, 1, k, seed=5).requires_grad_()  # gradients: the layers as they are
    layer(trained).sum().backward()
    assert calls == [1] and trained.grad is not None


def _composed(layer, x, residual=None):
    """What the module's layers compute without it."""
    if layer.prologue == "rmsnorm":
        x = layer.norm(x)
    elif layer.prologue == "geglu":
        x = F.gelu(x[..., :40], approximate="tanh") * x[..., 40:]
    y = layer.linear(x)
    return y if residual is None else residual + y


def test_module_refuses_what_it_cannot_run():
    with pytest.raises(TypeError, match="bias-free"):
        DecodeGEMV(torch.nn.Linear(4, 4))
    with pytest.raises(ValueError, match="norm"):
        DecodeGEMV(torch.nn.Linear(4, 4, bias=False), "rmsnorm")
    with pytest.raises(ValueError, match="prologue"):
        DecodeGEMV(torch.nn.Linear(4, 4, bias=False), "silu")


@requires_cuda
@pytest.mark.parametrize(
    ("N", "K", "prologue", "residual"),
    [(6144, 2048, "rmsnorm", False), (2048, 2048, "none", True), (16384, 2048, "rmsnorm", False),
     (2048, 8192, "geglu", True), (1000, 5632, "none", False), (1, 2048, "none", False)],
)  # fmt: skip
def test_autotuned_kernels_on_the_decoder_shapes(N, K, prologue, residual):
    x, w, norm_weight, res = _problem(N, K, prologue, residual, torch.bfloat16, seed=11)
    out = gemv(x, w, prologue, norm_weight, 1e-5, res)
    assert rel_err(out, gemv_reference(x, w, prologue, norm_weight, 1e-5, res)) < 1e-2
    graph = torch.cuda.CUDAGraph()  # a captured launch replays to the same result
    with torch.cuda.graph(graph):
        captured = gemv(x, w, prologue, norm_weight, 1e-5, res)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, out)
