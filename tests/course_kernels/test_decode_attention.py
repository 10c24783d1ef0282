"""The course's split-KV decode attention (helpers/kernels/decode_attention.py): numerics against a float32 softmax
over the visible positions, the position read on the device, empty splits, GQA, the split plan.

On a CPU-only machine these run in Triton's interpreter (blocks of 16 positions); the tests marked
``requires_cuda`` run the compiled kernels at the 1b decoder's shapes, under CUDA-graph capture.
"""

from __future__ import annotations

import pytest
import torch
from support import kernel_device as device
from support import rel_err
from support import requires_compiled_kernels as requires_cuda
from support import seeded_randn as randn

from helpers.kernels import decode_attention as da
from helpers.kernels.decode_attention import (
    decode_attention,
    decode_attention_reference,
    launch_decode_attention,
    split_plan,
)

# relative error against float32 torch: fp32 sums in another order; bf16/fp16 round the output (the interpreter
# rounds toward zero where a GPU rounds to nearest)
TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}
# positions per loop step of the launcher here: the interpreter's small blocks, or the compiled kernel's
BLOCK = da.INTERPRETER_BLOCK_N if da.triton_mode() == "interpreter" else da.BLOCK_N


def _problem(b, heads, kv_heads, max_len, d, dtype, seed=0):
    q = randn(b, heads, 1, d, dtype=dtype, seed=seed)
    k = randn(b, kv_heads, max_len, d, dtype=dtype, seed=seed + 1)
    v = randn(b, kv_heads, max_len, d, dtype=dtype, seed=seed + 2)
    return q, k, v


def _position(p):
    return torch.tensor(p, dtype=torch.long, device=device())


# max_len 77: not a multiple of the block; positions 0, 1, the last of a block, the first of the next, the last slot
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("position", [0, 1, BLOCK - 1, BLOCK, 76])
def test_matches_a_softmax_over_the_visible_positions(position, dtype):
    q, k, v = _problem(1, 4, 4, 77, 32, dtype)
    out = decode_attention(q, k, v, _position(position))
    assert out.shape == q.shape and out.dtype == dtype
    assert torch.isfinite(out).all()
    assert rel_err(out, decode_attention_reference(q, k, v, position)) < TOLERANCE[dtype]


@pytest.mark.parametrize(("heads", "kv_heads"), [(8, 2), (4, 1), (6, 3)])
def test_grouped_query_attention(heads, kv_heads):
    q, k, v = _problem(2, heads, kv_heads, 50, 16, torch.float32, seed=3)
    out = decode_attention(q, k, v, _position(41))
    assert rel_err(out, decode_attention_reference(q, k, v, 41)) < 1e-5


def test_positions_past_the_position_are_never_read():
    """Garbage (NaN, inf) past the position changes nothing: those blocks are skipped or masked."""
    q, k, v = _problem(1, 2, 2, 64, 16, torch.float32, seed=4)
    expected = decode_attention(q, k, v, _position(20))
    k[:, :, 21:], v[:, :, 21:] = float("nan"), float("inf")
    assert torch.equal(decode_attention(q, k, v, _position(20)), expected)


@pytest.mark.parametrize("splits", [2, 5, 9])
def test_empty_splits_leave_no_nan(splits):
    """More splits than visible blocks: the empty ones weigh nothing in the merge; every output is written."""
    q, k, v = _problem(1, 3, 3, 9 * BLOCK, 16, torch.float32, seed=5)
    for position in (0, BLOCK + 2):
        out = torch.full_like(q, float("nan"))
        used = launch_decode_attention(q, k, v, _position(position), out, 16**-0.5, splits=splits)
        assert used == splits
        assert torch.isfinite(out).all()
        assert rel_err(out, decode_attention_reference(q, k, v, position)) < 1e-5


def test_a_single_split_writes_the_output_directly():
    q, k, v = _problem(2, 2, 2, 40, 16, torch.float16, seed=6)
    out = torch.full_like(q, float("nan"))
    assert launch_decode_attention(q, k, v, _position(39), out, 0.25, splits=1) == 1
    assert rel_err(out, decode_attention_reference(q, k, v, 39)) < TOLERANCE[torch.float16]


def test_the_position_is_read_on_the_device_and_may_differ_per_sequence():
    q, k, v = _problem(3, 2, 1, 48, 16, torch.float32, seed=7)
    pos = torch.tensor([0, 17, 47], device=device())
    out = decode_attention(q, k, v, pos)
    assert rel_err(out, decode_attention_reference(q, k, v, pos)) < 1e-5
    shared = _position(5)
    before = decode_attention(q, k, v, shared)
    shared.add_(30)  # the same tensor advanced in place, as the decoder's cache does
    assert rel_err(decode_attention(q, k, v, shared), decode_attention_reference(q, k, v, 35)) < 1e-5
    assert not torch.equal(before, decode_attention(q, k, v, shared))


def test_a_strided_query_and_a_scale():
    """q as the decoder hands it over: a head view of a [b, 1, heads * d] projection."""
    b, heads, d = 2, 4, 16
    flat = randn(b, 1, heads * d, seed=8)
    q = flat.view(b, 1, heads, d).transpose(1, 2)
    _, k, v = _problem(b, heads, heads, 30, d, torch.float32, seed=9)
    out = decode_attention(q, k, v, _position(29), scale=0.1)
    assert rel_err(out, decode_attention_reference(q, k, v, 29, scale=0.1)) < 1e-5


def test_a_head_dim_off_the_powers_of_two():
    q, k, v = _problem(1, 2, 2, 33, 24, torch.float32, seed=10)
    assert rel_err(decode_attention(q, k, v, _position(30)), decode_attention_reference(q, k, v, 30)) < 1e-5


def test_the_split_plan():
    # the 1b decoder (16 heads at batch 1) on 132 SMs: 4 waves want 33 splits, rounded to whole blocks
    assert split_plan(16, 4096, 64, 132) == (32, 128)
    assert split_plan(16, 300, 64, 132) == (5, 64)  # at least one block a split
    assert split_plan(1, 1 << 20, 64, 132) == (da.MAX_SPLITS, (1 << 20) // da.MAX_SPLITS)
    assert split_plan(512, 4096, 64, 132) == (2, 2048)  # a large batch covers the SMs with few splits
    assert split_plan(4, 10, 16, 8) == (1, 16)
    assert split_plan(16, 4096, 64, 132, splits=7) == (7, 640)
    with pytest.raises(ValueError, match="splits"):
        split_plan(16, 4096, 64, 132, splits=0)
    with pytest.raises(ValueError, match="max_len"):
        split_plan(16, 0, 64, 132)


def test_bad_calls_are_refused():
    q, k, v = _problem(1, 4, 2, 20, 16, torch.float32)
    pos = _position(3)
    with pytest.raises(ValueError, match="one query token"):
        decode_attention(randn(1, 4, 2, 16), k, v, pos)
    with pytest.raises(ValueError, match="multiple of kv_heads"):
        decode_attention(randn(1, 3, 1, 16), k, v, pos)
    with pytest.raises(ValueError, match="k and v"):
        decode_attention(q, k, v[:, :, :10], pos)
    with pytest.raises(ValueError, match="dtype"):
        decode_attention(q.half(), k, v, pos)
    with pytest.raises(ValueError, match="position"):
        decode_attention(q, k, v, pos.float())
    with pytest.raises(ValueError, match="position"):
        decode_attention(q, k, v, torch.zeros(2, dtype=torch.long, device=device()))
    with pytest.raises(ValueError, match="contiguous along head_dim"):
        decode_attention(q, k.transpose(2, 3).contiguous().transpose(2, 3), v, pos)
    with pytest.raises(TypeError, match="torch.Tensor"):
        decode_attention(q, k, v, 3)


@requires_cuda
@pytest.mark.parametrize("max_len", [4096, 300])
def test_1b_shapes_under_a_cuda_graph_as_the_position_advances(max_len):
    """The 1b decoder's attention (16 heads of 128, MHA, bf16) captured once, replayed as the position moves on:
    each replay reads the new position on the device and matches the float32 reference."""
    q, k, v = _problem(1, 16, 16, max_len, 128, torch.bfloat16, seed=11)
    pos = _position(0)
    decode_attention(q, k, v, pos)  # compiles outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = decode_attention(q, k, v, pos)
    for p in (0, 1, 63, 64, 255, 256, max_len // 2 + 1, max_len - 1):
        pos.fill_(p)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.isfinite(out).all(), p
        assert rel_err(out, decode_attention_reference(q, k, v, p)) < 1e-2, p


@requires_cuda
@pytest.mark.parametrize(("block_n", "num_warps"), [(32, 4), (64, 8), (128, 8)])
def test_compiled_block_sizes_and_gqa(block_n, num_warps):
    q, k, v = _problem(2, 32, 8, 1000, 128, torch.float16, seed=12)
    out = torch.empty_like(q)
    pos = torch.tensor([999, 130], device="cuda")
    launch_decode_attention(q, k, v, pos, out, 128**-0.5, block_n=block_n, num_warps=num_warps)
    assert rel_err(out, decode_attention_reference(q, k, v, pos)) < 2e-3


# Compiles both kernels for an H100 (sm_90) on this machine, through ptxas: Triton's front end, the dynamic loop
# bound from a loaded value, the masks and layouts are checked without a GPU (what runs fast is not).
_SM90_COMPILE = """
import os
os.environ["TRITON_INTERPRET"] = "0"
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from helpers.kernels import decode_attention as da

target = GPUTarget("cuda", 90, 32)
ints = ["H", "GROUP", "D", "split_len", "n_splits"] + [f"stride_{n}" for n in
        ("qb", "qh", "kb", "kh", "kn", "vb", "vh", "vn", "pos")]
for dt in ("bf16", "fp32"):
    for single in (False, True):
        part = dt if single else "fp32"
        sig = {"q_ptr": "*" + dt, "k_ptr": "*" + dt, "v_ptr": "*" + dt, "pos_ptr": "*i64", "part_ptr": "*" + part,
               "lse_ptr": "*" + part, "out_ptr": "*" + dt, **{n: "i32" for n in ints}, "qk_scale": "fp32",
               "BLOCK_N": "constexpr", "BLOCK_D": "constexpr", "SINGLE": "constexpr"}
        src = ASTSource(fn=da._decode_attn_split_kernel, signature=sig,
                        constexprs={"BLOCK_N": da.BLOCK_N, "BLOCK_D": 128, "SINGLE": single})
        assert triton.compile(src, target=target, options={"num_warps": da.NUM_WARPS}).asm["cubin"]
    sig = {"part_ptr": "*fp32", "lse_ptr": "*fp32", "out_ptr": "*" + dt, "D": "i32", "n_splits": "i32",
           "BLOCK_S": "constexpr", "BLOCK_D": "constexpr"}
    src = ASTSource(fn=da._decode_attn_merge_kernel, signature=sig, constexprs={"BLOCK_S": da.MAX_SPLITS, "BLOCK_D": 128})
    assert triton.compile(src, target=target, options={"num_warps": 4}).asm["cubin"]
print("compiled")
"""


def test_the_kernels_compile_for_an_h100_without_one():
    import os
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("triton.backends.nvidia.compiler", reason="this Triton has no NVIDIA back end")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "TRITON_INTERPRET": "0"}
    done = subprocess.run([sys.executable, "-c", _SM90_COMPILE], env=env, capture_output=True, text=True, timeout=300)
    if done.returncode and "ptxas" in done.stderr and "not found" in done.stderr.lower():
        pytest.skip("Triton's bundled ptxas is missing here")
    assert done.returncode == 0 and "compiled" in done.stdout, done.stderr[-3000:]
