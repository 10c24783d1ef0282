"""The gate+up GEMM with a GeGLU epilogue and FusedGeGLUMLP (helpers/kernels/gate_up.py).

On CPU the kernels run in Triton's interpreter (both paths: the TMA tensor-descriptor kernel the
H200 uses, and the pointer kernel used for unaligned shapes and pre-Hopper GPUs), on small,
deliberately awkward shapes: M not a multiple of the tile, dim and hidden not powers of two.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from support import kernel_device as device
from support import rel_err
from support import requires_compiled_kernels as requires_cuda
from support import seeded_randn as randn
from torch import nn

import helpers
import helpers.mlp.model
from helpers.kernels import (
    FusedGeGLUMLP,
    clear_plans,
    gate_up_forward,
    gate_up_geglu,
    gate_up_tuning,
    pack_gate_up,
    plans_table,
    triton_mode,
    unpack_gate_up,
)
from helpers.kernels.launch_plans import LaunchPlan, plan_cache
from helpers.mlp.model import SimpleGeGLUMLP


def problem(M: int, K: int, H: int, bias: bool, dtype: torch.dtype = torch.float32, seed: int = 0):
    x = randn(M, K, dtype=dtype, seed=seed)
    wg = randn(H, K, dtype=dtype, seed=seed + 1, scale=K**-0.5)
    wu = randn(H, K, dtype=dtype, seed=seed + 2, scale=K**-0.5)
    bg = randn(H, dtype=dtype, seed=seed + 3) if bias else None
    bu = randn(H, dtype=dtype, seed=seed + 4) if bias else None
    xd = x.double()
    ref = F.gelu(F.linear(xd, wg.double(), None if bg is None else bg.double()), approximate="tanh") * F.linear(
        xd, wu.double(), None if bu is None else bu.double()
    )
    w = pack_gate_up(wg, wu)
    b = pack_gate_up(bg, bu) if bias else None
    return x, w, b, ref


# (M, dim, hidden, bias): M not a multiple of any tile; dims 48/80 are not powers of two;
# dim 37 (fp32: 148-byte rows) cannot be described for TMA, so "auto" takes the pointer kernel.
SHAPES = [(37, 48, 80, False), (129, 80, 48, True), (129, 37, 40, False)]


@pytest.mark.parametrize("kernel", ["auto", "tma", "pointer"])
@pytest.mark.parametrize("M,K,H,bias", SHAPES)
def test_fp32_matches_reference(M: int, K: int, H: int, bias: bool, kernel: str) -> None:
    x, w, b, ref = problem(M, K, H, bias)
    if kernel == "tma" and K % 4:
        with pytest.raises(ValueError, match="16-byte aligned.*kernel='auto' or 'pointer'"):
            gate_up_geglu(x, w, b, kernel=kernel)
        return
    out = gate_up_geglu(x, w, b, kernel=kernel)
    assert out.shape == (M, H) and out.dtype == x.dtype
    assert torch.isfinite(out).all()
    assert rel_err(out, ref) < 1e-4


def _plan_of(kind: str = "gate_up_forward") -> dict:
    """The row of the most recently built plan of `kind` (helpers.kernels.plans_table)."""
    table = plans_table()
    return table[table["kernel"] == kind].iloc[-1].to_dict()


def test_auto_picks_the_right_path(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_plans()
    x, w, _, ref = problem(8, 48, 16, False)
    gate_up_geglu(x, w)
    expected = "tma" if triton_mode() == "interpreter" or torch.cuda.get_device_capability()[0] >= 9 else "pointer"
    assert _plan_of()["path"] == expected
    x37, w37, _, ref37 = problem(8, 37, 16, False)  # fp32 rows of 148 bytes: no TMA descriptor possible
    assert rel_err(gate_up_geglu(x37, w37), ref37) < 1e-4
    assert _plan_of()["path"] == "pointer"
    # COURSE_PORTABLE_KERNELS=1: the pointer kernel everywhere, as on a GPU older than Hopper
    monkeypatch.setenv("COURSE_PORTABLE_KERNELS", "1")
    clear_plans()
    assert rel_err(gate_up_geglu(x, w), ref) < 1e-4
    assert _plan_of()["path"] == "pointer"
    monkeypatch.setenv("COURSE_PORTABLE_KERNELS", "0")
    clear_plans()
    gate_up_geglu(x, w)
    assert _plan_of()["path"] == expected
    clear_plans()


def test_plans_are_reused_per_shape_and_hold_no_tensors() -> None:
    clear_plans()
    x, w, b, ref = problem(37, 48, 80, True, seed=3)
    for _ in range(3):
        assert rel_err(gate_up_geglu(x, w, b), ref) < 1e-4
    assert len(plan_cache()) == 1 and _plan_of()["launches"] == 3
    gate_up_geglu(x[:20], w, b)  # another M: another plan
    assert len(plan_cache()) == 2
    # a misaligned input (4 bytes past a 16-byte boundary) gets its own plan, on the pointer kernel
    flat = randn(37 * 48 + 1, seed=4)
    x_off = flat[1:].view(37, 48)
    assert x_off.data_ptr() % 16
    ref_off = F.gelu(
        F.linear(x_off.double(), unpack_gate_up(w)[0].double(), unpack_gate_up(b)[0].double()), approximate="tanh"
    )
    ref_off = ref_off * F.linear(x_off.double(), unpack_gate_up(w)[1].double(), unpack_gate_up(b)[1].double())
    assert rel_err(gate_up_geglu(x_off, w, b), ref_off) < 1e-4
    assert len(plan_cache()) == 3 and _plan_of()["path"] == "pointer"
    # a non-contiguous input is read through a contiguous copy, with its own plan
    wide = randn(37, 96, seed=5)
    assert rel_err(gate_up_geglu(wide[:, :48], w, b), gate_up_geglu(wide[:, :48].contiguous(), w, b)) == 0
    for plan in plan_cache().values():  # a cached plan must never keep an activation or a weight alive
        assert not any(isinstance(a, torch.Tensor) for a in plan.args)
        assert all(t is None or t.base is None for _, t in plan.slots)
    clear_plans()
    assert plans_table().empty


def test_launch_plan_checks_parameter_names() -> None:
    from helpers.kernels.gate_up_kernels import _gate_up_geglu_kernel

    cfg = gate_up_tuning.gate_up_config(32, 64, 32, 1, 4)
    with pytest.raises(ValueError, match="not parameters"):
        LaunchPlan.build("t", _gate_up_geglu_kernel, (1,), cfg, "test", "pointer", {"NOPE": 1}, ["x_ptr"])
    with pytest.raises(ValueError, match="no value for the kernel parameter"):
        LaunchPlan.build("t", _gate_up_geglu_kernel, (1,), cfg, "test", "pointer", {}, ["x_ptr"])


def test_plan_switches_to_the_direct_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    # The GPU path, with stand-ins for Triton's JIT function and compiled kernel: the first launch
    # goes through the JIT (which compiles), later ones through compiled[grid] with the same arguments.
    import triton

    from helpers.kernels import launch_plans

    calls: list[tuple] = []

    class Compiled:
        def __getitem__(self, grid):
            assert len(grid) == 3, "CompiledKernel's runner reads grid[0], grid[1] and grid[2]"
            return lambda *args: calls.append(("direct", grid, args))

    class Kernel:
        arg_names = ["x_ptr", "M", "BLOCK_M", "EXTRA"]

        @staticmethod
        def fn(x_ptr, M, BLOCK_M, EXTRA=7):
            pass

        def __getitem__(self, grid):
            def launch(*args, num_warps, num_stages):
                calls.append(("jit", grid, args, num_warps, num_stages))
                return Compiled()

            return launch

    monkeypatch.setattr(launch_plans, "triton_mode", lambda: "cuda")
    cfg = triton.Config({"BLOCK_M": 8, "FLATTEN": True}, num_warps=4, num_stages=2)  # FLATTEN: not a parameter
    plan = LaunchPlan.build("fake", Kernel(), (5,), cfg, "test", "pointer", {"M": 3}, ["x_ptr"])
    plan.launch("a")
    plan.launch("b")
    assert calls == [("jit", (5,), ("a", 3, 8, 7), 4, 2), ("direct", (5, 1, 1), ("b", 3, 8, 7))]
    assert plan.row()["direct_launch"] and plan.row()["launches"] == 2


@pytest.mark.parametrize("kernel", ["auto", "pointer"])
def test_unaligned_hidden_keeps_a_fast_path(kernel: str) -> None:
    # hidden 13 in fp32: 52-byte rows, no TMA descriptor for a contiguous [M, 13] output. The TMA
    # path writes into rows padded to 16 (64 bytes) and returns a view; the values are the same.
    clear_plans()
    x, w, b, ref = problem(29, 48, 13, True, seed=6)
    h, gu = gate_up_forward(x, w, b, store_gu=True, kernel=kernel)
    assert h.shape == (29, 13) and rel_err(h, ref) < 1e-4
    assert rel_err(gu, F.linear(x.double(), w.double(), b.double())) < 1e-5
    path = _plan_of()["path"]
    assert path == ("pointer" if kernel == "pointer" else "tma" if triton_mode() == "interpreter" else path)
    if path == "tma":
        assert h.stride() == (16, 1) and gu.stride() == (28, 1)  # padded rows, no copy
    else:
        assert h.is_contiguous() and gu.is_contiguous()
    h3 = gate_up_geglu(x.reshape(29, 1, 48), w, b, kernel=kernel)
    assert h3.shape == (29, 1, 13) and torch.equal(h3.reshape(29, 13), h)


@pytest.mark.parametrize("kernel", ["tma", "pointer"])
def test_store_gu_writes_the_pre_activations(kernel: str) -> None:
    x, w, b, ref = problem(70, 40, 24, True, seed=7)
    h, gu = gate_up_forward(x, w, b, store_gu=True, kernel=kernel)
    assert gu.shape == (70, 48) and rel_err(gu, F.linear(x.double(), w.double(), b.double())) < 1e-5
    assert rel_err(h, ref) < 1e-4
    assert gate_up_forward(x, w, b, kernel=kernel)[1] is None


@pytest.mark.parametrize("kernel", ["tma", "pointer"])
def test_block_interleaved_packing(kernel: str) -> None:
    # group = BLOCK_N / 2: each tile holds gate columns then up columns (the epilogue's permute path).
    M, H = 70, 64
    x = randn(M, 32, seed=20)
    wg, wu = _weights(H, 32, seed=21)
    cfg = gate_up_tuning.gate_up_config(
        32, 64, 32, 1, 4, group_m=2, GROUP_ROWS=32, **({"FLATTEN": True} if kernel == "tma" else {})
    )
    ref = F.gelu(x.double() @ wg.double().T, approximate="tanh") * (x.double() @ wu.double().T)
    out = gate_up_geglu(x, pack_gate_up(wg, wu, group=32), kernel=kernel, config=cfg)
    assert out.shape == (M, H)
    assert rel_err(out, ref) < 1e-4


def _weights(H: int, K: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    return randn(H, K, seed=seed, scale=K**-0.5), randn(H, K, seed=seed + 1, scale=K**-0.5)


def test_pack_unpack_round_trip() -> None:
    wg, wu = _weights(12, 5, seed=30)
    packed = pack_gate_up(wg, wu)
    assert packed.shape == (24, 5)
    assert torch.equal(packed[0], wg[0]) and torch.equal(packed[1], wu[0]) and torch.equal(packed[23], wu[11])
    for group in (1, 3, 4, 12):
        g, u = unpack_gate_up(pack_gate_up(wg, wu, group=group), group=group)
        assert torch.equal(g, wg) and torch.equal(u, wu)
    with pytest.raises(ValueError, match="positive divisor"):
        pack_gate_up(wg, wu, group=5)


def test_nd_input() -> None:
    x, w, b, _ = problem(2 * 3 * 7, 48, 40, True, seed=40)
    x3 = x.reshape(2, 3, 7, 48)
    out = gate_up_geglu(x3, w, b)
    assert out.shape == (2, 3, 7, 40)
    torch.testing.assert_close(out.reshape(-1, 40), gate_up_geglu(x, w, b))


@pytest.mark.parametrize("bias", [False, True])
def test_from_module_matches_simple_mlp(bias: bool) -> None:
    torch.manual_seed(0)
    mlp = SimpleGeGLUMLP(48, 80, bias=bias).to(device())
    fused = FusedGeGLUMLP.from_module(mlp)
    assert fused.gate_up_weight.shape == (160, 48)
    g, u = unpack_gate_up(fused.gate_up_weight.detach())
    assert torch.equal(g, mlp.gate_proj.weight) and torch.equal(u, mlp.up_proj.weight)
    x = randn(2, 19, 48, seed=50)  # 38 tokens: not a multiple of any tile
    with torch.no_grad():
        assert rel_err(fused(x), mlp(x)) < 1e-4


def test_fresh_module_shapes_and_repr() -> None:
    m = FusedGeGLUMLP(16, 24, device=device())
    assert m.gate_up_weight.shape == (48, 16) and m.gate_up_bias is None
    assert m(randn(3, 16)).shape == (3, 16)
    assert "hidden=24" in repr(m)
    with pytest.raises(ValueError, match="positive integers"):
        FusedGeGLUMLP(0, 8)


# ---------------------------------------------------------------------------------------------
# Bad inputs
# ---------------------------------------------------------------------------------------------


def test_rejects_bad_inputs() -> None:
    x, w, b, _ = problem(8, 16, 8, True)
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        gate_up_geglu([1.0], w)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="w_packed must be a torch.Tensor"):
        gate_up_geglu(x, "w")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"last dimension must equal w_packed's dim \(16\)"):
        gate_up_geglu(randn(8, 17), w)
    with pytest.raises(ValueError, match=r"\[2\*hidden, dim\].*pack_gate_up"):
        gate_up_geglu(x, w[:15])
    with pytest.raises(ValueError, match="same dtype"):
        gate_up_geglu(x.half(), w)
    with pytest.raises(ValueError, match=r"b_packed must have shape \(16,\)"):
        gate_up_geglu(x, w, b[:8])
    with pytest.raises(ValueError, match="kernel must be one of"):
        gate_up_geglu(x, w, kernel="cublas")
    with pytest.raises(ValueError, match="different devices"):
        gate_up_geglu(x, w.to("meta"))


def test_from_module_rejects_other_modules() -> None:
    with pytest.raises(TypeError, match="gate_proj, up_proj and down_proj"):
        FusedGeGLUMLP.from_module(nn.Linear(4, 4))


# ---------------------------------------------------------------------------------------------
# GPU: the compiled kernels, bf16
# ---------------------------------------------------------------------------------------------


@requires_cuda
def test_gpu_blog_shape_bf16() -> None:
    torch.manual_seed(0)
    mlp = SimpleGeGLUMLP(768, 3072).to("cuda", torch.bfloat16)
    fused = FusedGeGLUMLP.from_module(mlp)
    x = torch.randn(64, 128, 768, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        xf = x.float()
        h_ref = F.gelu(F.linear(xf, mlp.gate_proj.weight.float()), approximate="tanh") * F.linear(
            xf, mlp.up_proj.weight.float()
        )
        h = gate_up_geglu(x, fused.gate_up_weight)
        assert rel_err(h, h_ref) < 1e-2
        y_ref = F.linear(h_ref, mlp.down_proj.weight.float())
        assert rel_err(fused(x), y_ref) < 1e-2


@requires_cuda
@pytest.mark.parametrize("kernel", ["auto", "pointer"])
@pytest.mark.parametrize(
    "M,K,H,bias", [(37, 48, 80, False), (129, 80, 48, True), (1000, 768, 3072, False), (4096, 256, 1024, True)]
)
def test_gpu_awkward_shapes_bf16(M: int, K: int, H: int, bias: bool, kernel: str) -> None:
    x, w, b, ref = problem(M, K, H, bias, dtype=torch.bfloat16)
    out = gate_up_geglu(x, w, b, kernel=kernel)
    assert rel_err(out, ref) < 1e-2


@requires_cuda
def test_gpu_fp32_is_ieee_not_tf32() -> None:
    x, w, b, ref = problem(300, 96, 200, True)
    assert rel_err(gate_up_geglu(x, w, b), ref) < 1e-5


@requires_cuda
def test_gpu_direct_launch_matches_the_jit_launch() -> None:
    # The first call per shape launches through Triton's JIT; later calls through the compiled
    # kernel's own launcher (no per-call binding). Both must compute bit-identical results.
    clear_plans()
    x, w, b, ref = problem(1000, 768, 3072, True, dtype=torch.bfloat16)
    first = gate_up_geglu(x, w, b)
    second = gate_up_geglu(x, w, b)
    assert torch.equal(first, second) and rel_err(second, ref) < 1e-2
    row = _plan_of()
    assert row["direct_launch"] and row["launches"] == 2 and row["config_source"] in ("table", "default")


@requires_cuda
@pytest.mark.parametrize("mode", [None, "save", "recompute"])
def test_gpu_cuda_graph_capture_replays(mode: str | None) -> None:
    # Inference (no_grad) and training forward: warm up once per shape, capture, replay on new data.
    torch.manual_seed(0)
    mlp = SimpleGeGLUMLP(768, 3072).to("cuda", torch.bfloat16)
    fused = FusedGeGLUMLP.from_module(mlp, mode=mode or "save")
    static_x = torch.randn(4, 256, 768, device="cuda", dtype=torch.bfloat16)
    grad = mode is not None
    with torch.set_grad_enabled(grad):
        fused(static_x)  # the first call per shape builds the launch plan (and compiles): before capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_y = fused(static_x)
    for seed in (1, 2):
        g = torch.Generator(device="cuda").manual_seed(seed)
        static_x.copy_(torch.randn(static_x.shape, generator=g, device="cuda", dtype=torch.bfloat16))
        graph.replay()
        with torch.set_grad_enabled(grad):
            direct = fused(static_x)
        assert torch.equal(static_y.detach(), direct), "the replay must run the same kernels on the new input"
        assert rel_err(direct, helpers.mlp.model.reference_forward(mlp, static_x)) < 1e-2


@requires_cuda
def test_gpu_portable_path_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COURSE_PORTABLE_KERNELS", "1")
    clear_plans()
    x, w, b, ref = problem(4096, 256, 1024, True, dtype=torch.bfloat16)
    assert rel_err(gate_up_geglu(x, w, b), ref) < 1e-2
    assert _plan_of()["path"] == "pointer"
    clear_plans()


def test_every_course_kernel_is_known_to_the_trace_reader():
    """The trace layer names the course's kernels without importing them: the two lists must agree."""
    import importlib
    import pkgutil

    import helpers.kernels
    from helpers.course_kernel_names import COURSE_KERNELS

    kernels = set()
    for info in pkgutil.iter_modules(helpers.kernels.__path__):
        module = importlib.import_module(f"helpers.kernels.{info.name}")
        for name, value in vars(module).items():
            if name.endswith("_kernel") and callable(getattr(value, "fn", None)):
                kernels.add(name)
    assert kernels and kernels <= set(COURSE_KERNELS), sorted(kernels - set(COURSE_KERNELS))
    for name in kernels:
        decoded = helpers.decode_kernel(name)
        assert decoded["source"] == "course-triton" and decoded["family"] != "unknown", name
