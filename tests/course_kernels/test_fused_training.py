"""Training through the fused MLP (helpers/kernels/mlp_function.py): forward + backward in both modes.

On CPU the kernels run in Triton's interpreter, in float32, on awkward shapes (M no multiple of a
tile, dims no powers of two, a hidden size whose rows cannot be described for TMA): every gradient
is compared with eager PyTorch's in float32, gradcheck-style. The GPU tests do the same in bf16.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from support import kernel_device as device
from support import rel_err
from support import requires_compiled_kernels as requires_cuda
from support import seeded_randn as randn

from helpers.kernels import (
    FusedGeGLUMLP,
    GateUpGeGLUFunction,
    GeGLUMLPFunction,
    clear_plans,
    gate_up_forward,
    geglu_backward_gemm,
    pack_gate_up,
    plans_table,
    unpack_gate_up,
)
from helpers.measure.memory import saved_bytes
from helpers.mlp.model import MLPConfig, SimpleGeGLUMLP

# (M, dim, hidden, bias): 37 and 70 tokens are no multiple of a tile; hidden 13 in fp32 has
# 52-byte rows (no TMA descriptor: the backward GEMM takes the pointer kernel, the forward pads).
SHAPES = [(37, 40, 24, True), (70, 48, 80, False), (5, 16, 13, False)]


def grads(mlp: torch.nn.Module, x: torch.Tensor, dy: torch.Tensor) -> dict[str, torch.Tensor]:
    """Gradients of every parameter and of x after one backward of ``mlp(x)`` against ``dy``."""
    x = x.detach().clone().requires_grad_(True)
    mlp.zero_grad(set_to_none=True)
    mlp(x).backward(dy)
    out = {"x": x.grad}
    if isinstance(mlp, FusedGeGLUMLP):
        out["gate.weight"], out["up.weight"] = unpack_gate_up(mlp.gate_up_weight.grad)
        if mlp.gate_up_bias is not None:
            out["gate.bias"], out["up.bias"] = unpack_gate_up(mlp.gate_up_bias.grad)
    else:
        out["gate.weight"], out["up.weight"] = mlp.gate_proj.weight.grad, mlp.up_proj.weight.grad
        if mlp.gate_proj.bias is not None:
            out["gate.bias"], out["up.bias"] = mlp.gate_proj.bias.grad, mlp.up_proj.bias.grad
    out["down.weight"] = mlp.down_proj.weight.grad
    if mlp.down_proj.bias is not None:
        out["down.bias"] = mlp.down_proj.bias.grad
    return out


@pytest.mark.parametrize("portable", [False, True])
@pytest.mark.parametrize("mode", ["save", "recompute"])
@pytest.mark.parametrize("M,D,H,bias", SHAPES)
def test_backward_matches_eager_fp32(
    M: int, D: int, H: int, bias: bool, mode: str, portable: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COURSE_PORTABLE_KERNELS", "1" if portable else "0")
    clear_plans()
    torch.manual_seed(M + D + H)
    mlp = SimpleGeGLUMLP(D, H, bias=bias).to(device())
    fused = FusedGeGLUMLP.from_module(mlp, mode=mode)
    x, dy = randn(M, D, seed=1), randn(M, D, seed=2)
    y = fused(x.requires_grad_(True))
    assert rel_err(y, mlp(x)) < 1e-5
    got, want = grads(fused, x, dy), grads(mlp, x, dy)
    assert set(got) == set(want)
    for name in want:
        assert rel_err(got[name], want[name]) < 1e-4, name
    paths = set(plans_table()["path"])
    assert paths == {"pointer"} if portable else paths <= {"tma", "pointer"}
    clear_plans()


def test_backward_gemm_alone_and_in_place() -> None:
    M, D, H = 45, 32, 40
    x, wd, dy = randn(M, D, seed=3), randn(D, H, seed=4, scale=0.2), randn(M, D, seed=5)
    w = pack_gate_up(randn(H, D, seed=6, scale=0.2), randn(H, D, seed=7, scale=0.2))
    _, gu = gate_up_forward(x, w, store_gu=True)
    # reference, float64: dh = dy @ Wd, then the GeGLU backward on the interleaved pairs
    gate, up = gu.double()[:, 0::2].requires_grad_(), gu.double()[:, 1::2].requires_grad_()
    h = F.gelu(gate, approximate="tanh") * up
    h.backward(dy.double() @ wd.double())
    ref = torch.stack((gate.grad, up.grad), dim=-1).flatten(-2)
    dgu, h_out = geglu_backward_gemm(dy, wd, gu, store_h=True)
    assert rel_err(dgu, ref) < 1e-5 and rel_err(h_out, h.detach()) < 1e-5
    same = gu.clone()
    dgu2, none = geglu_backward_gemm(dy, wd, same, dgu=same)  # in place: gu's memory becomes dgu
    assert dgu2.data_ptr() == same.data_ptr() and none is None and torch.equal(dgu2, dgu)
    with pytest.raises(ValueError, match="shapes do not fit"):
        geglu_backward_gemm(dy, wd, gu[:, :-2])
    with pytest.raises(ValueError, match="same shape|gu's shape"):
        geglu_backward_gemm(dy, wd, gu, dgu=gu[:, :-2])
    with pytest.raises(TypeError, match="dy must be a torch.Tensor"):
        geglu_backward_gemm("dy", wd, gu)  # type: ignore[arg-type]


def test_save_mode_refuses_a_second_backward_recompute_allows_it() -> None:
    torch.manual_seed(0)
    mlp = SimpleGeGLUMLP(24, 40).to(device())
    x = randn(19, 24, seed=8).requires_grad_(True)
    saving = FusedGeGLUMLP.from_module(mlp, mode="save")
    y = saving(x).sum()
    y.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="mode='recompute'"):
        y.backward()
    recomputing = FusedGeGLUMLP.from_module(mlp, mode="recompute")
    x.grad = None
    y = recomputing(x).sum()
    y.backward(retain_graph=True)
    first = x.grad.clone()
    y.backward()
    assert rel_err(x.grad, 2 * first) < 1e-6


def test_what_each_mode_keeps_for_the_backward() -> None:
    M, D, H = 33, 24, 40
    torch.manual_seed(1)
    mlp = SimpleGeGLUMLP(D, H).to(device())
    x = randn(M, D, seed=9).requires_grad_(True)
    act = M * H * x.element_size()  # one [M, hidden] tensor
    params = tuple(mlp.parameters())
    assert saved_bytes(lambda: mlp(x), exclude=(*params, x)) == 4 * act  # gate, up, gelu(gate), h
    for mode, expected in (("save", 3 * act), ("recompute", 0)):  # gu (2) and h; nothing
        fused = FusedGeGLUMLP.from_module(mlp, mode=mode)
        assert saved_bytes(lambda f=fused: f(x), exclude=(*fused.parameters(), x)) == expected, mode


def test_inference_skips_autograd_and_training_uses_the_function() -> None:
    torch.manual_seed(2)
    fused = FusedGeGLUMLP.from_module(SimpleGeGLUMLP(16, 24).to(device()))
    x = randn(7, 16, seed=10)
    with torch.no_grad():
        assert fused(x).grad_fn is None
    y = fused(x)  # the weights require grad: a graph node
    assert y.grad_fn is not None and "GeGLUMLPFunction" in type(y.grad_fn).__name__
    for p in fused.parameters():
        p.requires_grad_(False)
    assert fused(x).grad_fn is None  # nothing requires grad: the inference path, grad mode or not


def test_module_constructors_and_modes() -> None:
    a = FusedGeGLUMLP(MLPConfig(hidden_size=16, intermediate_size=24), device=device())
    b = FusedGeGLUMLP(SimpleNamespace(hidden_size=16, intermediate_size=24), mode="recompute", device=device())
    c = FusedGeGLUMLP(16, 24, bias=True, device=device())
    assert a.gate_up_weight.shape == b.gate_up_weight.shape == c.gate_up_weight.shape == (48, 16)
    assert a.config.hidden_size == 16 and (a.dim, a.hidden) == (16, 24)
    assert a.mode == "save" and b.mode == "recompute" and "mode='recompute'" in repr(b)
    b.mode = "save"
    assert b.mode == "save"
    with pytest.raises(ValueError, match="mode must be one of"):
        b.mode = "checkpoint"
    with pytest.raises(ValueError, match="mode must be one of"):
        FusedGeGLUMLP(16, 24, mode="none")
    with pytest.raises(TypeError, match="hidden_size"):
        FusedGeGLUMLP(SimpleNamespace(dim=16))
    with pytest.raises(TypeError, match="not a config and a hidden size"):
        FusedGeGLUMLP(MLPConfig(hidden_size=16, intermediate_size=24), 24)
    mlp = SimpleGeGLUMLP(16, 24).to(device()).train()
    assert FusedGeGLUMLP.from_module(mlp, mode="recompute").training
    assert not FusedGeGLUMLP.from_module(mlp.eval()).training
    with pytest.raises(ValueError, match="mode must be one of"):
        GeGLUMLPFunction.apply(randn(2, 16), a.gate_up_weight, None, a.down_proj.weight, None, "bad")


def test_gate_up_function_alone() -> None:
    x = randn(21, 24, seed=11).requires_grad_(True)
    wg, wu = randn(40, 24, seed=12, scale=0.2), randn(40, 24, seed=13, scale=0.2)
    w = pack_gate_up(wg, wu).requires_grad_(True)
    dh = randn(21, 40, seed=14)
    GateUpGeGLUFunction.apply(x, w, None).backward(dh)
    xr, wgr, wur = (t.detach().double().requires_grad_() for t in (x, wg, wu))
    (F.gelu(xr @ wgr.T, approximate="tanh") * (xr @ wur.T)).backward(dh.double())
    gw, uw = unpack_gate_up(w.grad)
    assert rel_err(x.grad, xr.grad) < 1e-5 and rel_err(gw, wgr.grad) < 1e-5 and rel_err(uw, wur.grad) < 1e-5


# ---------------------------------------------------------------------------------------------
# GPU: bf16
# ---------------------------------------------------------------------------------------------


@requires_cuda
@pytest.mark.parametrize("mode", ["save", "recompute"])
@pytest.mark.parametrize("M,D,H", [(8192, 768, 3072), (1000, 256, 1000), (300, 96, 196)])
def test_gpu_training_bf16_matches_fp32(M: int, D: int, H: int, mode: str) -> None:
    torch.manual_seed(0)
    mlp32 = SimpleGeGLUMLP(D, H).cuda()
    fused = FusedGeGLUMLP.from_module(mlp32, mode=mode).to(torch.bfloat16)
    x = torch.randn(M, D, device="cuda")
    dy = torch.randn(M, D, device="cuda")
    got = grads(fused, x.bfloat16(), dy.bfloat16())
    want = grads(mlp32, x, dy)
    for name in want:
        assert rel_err(got[name], want[name]) < 2e-2, name


@requires_cuda
def test_gpu_recompute_keeps_less_memory_than_save() -> None:
    torch.manual_seed(0)
    mlp = SimpleGeGLUMLP(768, 3072).to("cuda", torch.bfloat16)
    x = torch.randn(8192, 768, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    peaks = {}
    for mode in ("save", "recompute"):
        fused = FusedGeGLUMLP.from_module(mlp, mode=mode)
        fused(x).sum().backward()  # warm-up: plans, compiles
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        start = torch.cuda.memory_allocated()
        y = fused(x)
        between = torch.cuda.memory_allocated() - start  # kept from forward to backward (+ y)
        y.sum().backward()
        torch.cuda.synchronize()
        peaks[mode] = (between, torch.cuda.max_memory_allocated() - start)
    act = 8192 * 3072 * 2
    assert peaks["save"][0] >= 3 * act > peaks["recompute"][0]
