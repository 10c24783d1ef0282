"""Notebook 07's checks: the learner's flash-attention kernel, their predictions, the GPU views.

The kernels below are what a learner writes in notebook 07 (the scaffold of the notebook with
three versions of the online-softmax update: right, missing the rescaling, and not written yet).
They run in Triton's interpreter here.
"""

from __future__ import annotations

import pytest
import triton
import triton.language as tl

import helpers
from helpers.attention.costs import AttentionShape
from helpers.lessons import attention_exercises as ax

LOG2E = 1.4426950408889634


@triton.jit
def right_update(qk, qk_scale, m_i, l_i, acc, v):
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    p = tl.math.exp2(qk * qk_scale - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def no_rescale_update(qk, qk_scale, m_i, l_i, acc, v):
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    p = tl.math.exp2(qk * qk_scale - m_new[:, None])
    return m_new, l_i + tl.sum(p, 1), acc + tl.dot(p.to(v.dtype), v)


@triton.jit
def skeleton_update(qk, qk_scale, m_i, l_i, acc, v):
    return m_i, l_i, acc


@triton.jit
def scaffold_kernel(
    Q, K, V, Out, SEQ, qk_scale, UPDATE: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK: tl.constexpr, CAUSAL: tl.constexpr
):
    start_m = tl.program_id(0) * BLOCK
    base = tl.program_id(1).to(tl.int64) * SEQ * HEAD_DIM
    offs_m = start_m + tl.arange(0, BLOCK)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_m[:, None] < SEQ, other=0.0)
    m_i = tl.full([BLOCK], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK], tl.float32)
    acc = tl.zeros([BLOCK, HEAD_DIM], tl.float32)
    end = SEQ
    if CAUSAL:
        end = tl.minimum(start_m + BLOCK, SEQ)
    for start_n in range(0, end, BLOCK):
        offs_n = start_n + tl.arange(0, BLOCK)
        kv = base + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
        k = tl.load(K + kv, mask=offs_n[:, None] < SEQ, other=0.0)
        v = tl.load(V + kv, mask=offs_n[:, None] < SEQ, other=0.0)
        keep = offs_n[None, :] < SEQ
        if CAUSAL:
            keep = keep & (offs_n[None, :] <= offs_m[:, None])
        qk = tl.where(keep, tl.dot(q, tl.trans(k)), -1.0e30)
        if UPDATE == 0:
            m_i, l_i, acc = right_update(qk, qk_scale, m_i, l_i, acc, v)
        elif UPDATE == 1:
            m_i, l_i, acc = no_rescale_update(qk, qk_scale, m_i, l_i, acc, v)
        else:
            m_i, l_i, acc = skeleton_update(qk, qk_scale, m_i, l_i, acc, v)
    out = acc / l_i[:, None]
    tl.store(
        Out + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :],
        out.to(Out.dtype.element_ty),
        mask=offs_m[:, None] < SEQ,
    )


def launcher(update: int):
    def my_attention(q, k, v, out, causal):
        b, h, s, d = q.shape
        block = 16
        scaffold_kernel[(triton.cdiv(s, block), b * h)](
            q, k, v, out, s, d**-0.5 * LOG2E, UPDATE=update, HEAD_DIM=d, BLOCK=block, CAUSAL=causal
        )

    return my_attention


def test_a_right_kernel_passes() -> None:
    fb = helpers.check_attention_kernel(launcher(0))
    assert fb.ok, fb


def test_a_kernel_that_forgets_to_rescale_is_wrong() -> None:
    fb = helpers.check_attention_kernel(launcher(1))
    assert fb.status == "wrong" and "alpha" in fb.message


def test_the_skeleton_is_not_answered_yet() -> None:
    assert helpers.check_attention_kernel(launcher(2)).status == "not answered yet"
    assert helpers.check_attention_kernel(None).status == "not answered yet"


def test_a_raising_kernel_is_feedback_not_a_traceback() -> None:
    def broken(q, k, v, out, causal):
        raise IndexError("offsets out of range")

    fb = helpers.check_attention_kernel(broken)
    assert fb.status == "wrong" and "IndexError" in fb.message
    with pytest.raises(TypeError, match="launcher"):
        helpers.check_attention_kernel("my_attention")


def test_a_kernel_that_misses_rows_is_caught() -> None:
    def half(q, k, v, out, causal):
        launcher(0)(q, k, v, out, causal)
        out[..., -1:, :] = float("nan")  # the ragged last tile never stored

    fb = helpers.check_attention_kernel(half)
    assert fb.status == "wrong" and "NaN" in fb.message


def test_predictions_are_checked_on_a_live_profile() -> None:
    shape = AttentionShape(batch=1, heads=2, seq=40, head_dim=16)
    right = ax.check_attention_prediction(shape, 1 * 2 * 40 * 40 * 4, 6)
    assert all(f.ok for f in right), right
    wrong = ax.check_attention_prediction(shape, 40 * 40 * 4, 5)
    assert [f.status for f in wrong] == ["wrong", "wrong"]
    assert all(f.status == "not answered yet" for f in ax.check_attention_prediction(None, None, None))
    with pytest.raises(ValueError, match="pick a shape under"):
        ax.check_attention_prediction(AttentionShape(batch=64, heads=64, seq=4096, head_dim=64), 1, 1)


def test_gpu_view_is_live_recorded_or_absent() -> None:
    view = helpers.gpu_view("attention_manual")
    if view is not None:  # recorded on the H200 (or live on a GPU)
        assert view.kernels().shape[0] > 0
    with pytest.raises(ValueError, match="unknown view"):
        helpers.gpu_view("attention_everything")


def test_the_gpu_count_of_the_prediction_is_six_on_a_real_h200_trace():
    """On a GPU the check counts kernels and copies: the clone inside masked_fill is a memcpy, not a kernel, and
    cuBLAS's workspace memsets are left out; so the H200's manual attention gives the same 6 as a CPU's operators."""
    trace = helpers.load_trace(helpers.reference_trace_path("h200_attention_manual"))
    assert helpers.kernels_per_forward(trace) == 5
    assert helpers.kernels_per_forward(trace, kinds=("kernel", "memcpy")) == 6
