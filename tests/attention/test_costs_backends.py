"""Attention's costs checked against real CPU profiles, and the SDPA backends as this CPU runs them."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from support import requires_cuda

import helpers
import helpers.measure.memory
from helpers.attention import backends, costs
from helpers.attention import workloads as aw

SMALL = costs.AttentionShape(batch=2, heads=3, seq=37, head_dim=16)


@pytest.mark.parametrize("sq, sk", [(1, 1), (5, 5), (37, 37), (3, 11), (11, 3), (64, 100)])
@pytest.mark.parametrize(
    "mask, window", [("none", None), ("causal", None), ("sliding_window", 4), ("sliding_window", 64)]
)
def test_visible_pairs_counts_the_mask(sq, sk, mask, window) -> None:
    i = torch.arange(sq)[:, None] + (sk - sq)
    j = torch.arange(sk)[None, :]
    keep = torch.ones(sq, sk, dtype=torch.bool) if mask == "none" else j <= i
    if mask == "sliding_window":
        keep &= j > i - window
    assert costs.visible_pairs(sq, sk, mask, window) == int(keep.sum())


def test_causal_keeps_half_the_flops_plus_the_diagonal() -> None:
    s = 4096
    ratio = costs.visible_pairs(s, s, "causal") / costs.visible_pairs(s, s, "none")
    assert ratio == pytest.approx((s + 1) / (2 * s))
    shape = costs.AttentionShape(batch=1, heads=1, seq=s, head_dim=64)
    assert costs.attention_flops(shape, "none") == 4 * s * s * 64


def test_bad_shapes_and_masks() -> None:
    with pytest.raises(ValueError, match="multiple of kv_heads"):
        costs.AttentionShape(batch=1, heads=3, seq=8, head_dim=16, kv_heads=2)
    with pytest.raises(ValueError, match="mask must be one of"):
        costs.visible_pairs(4, 4, "diagonal")
    with pytest.raises(TypeError, match="window"):
        costs.visible_pairs(4, 4, "sliding_window")
    with pytest.raises(TypeError, match="AttentionShape"):
        costs.score_matrix_bytes((1, 2, 3, 4), torch.float32)


@pytest.fixture(scope="module")
def manual_trace() -> helpers.trace.Trace:
    built = aw.manual("cpu", shape=SMALL)
    return helpers.profile(built.fn, *built.inputs, steps=2, label="manual")


def test_the_plan_lists_the_operators_a_profile_shows(manual_trace) -> None:
    plan = costs.manual_attention_plan(SMALL, torch.float32)
    ops = manual_trace.ops().set_index("name")
    steps = len(manual_trace.steps)
    for op, rows in plan.groupby("aten_op"):
        assert ops.loc[op, "calls"] == len(rows) * steps, op
    # the out-of-place masked_fill copies the scores first: the copy sits under it
    chain = manual_trace.chain("aten::masked_fill")
    assert {"aten::clone", "aten::copy_", "aten::masked_fill_"} <= set(chain["name"])


def test_score_matrix_bytes_match_the_recorded_shape(manual_trace) -> None:
    softmax_input = helpers.op_input(manual_trace, "aten::_softmax")
    assert softmax_input.shape == (2, 3, 37, 37)
    assert costs.score_matrix_bytes(SMALL, torch.float32) == softmax_input.nbytes
    plan = costs.manual_attention_plan(SMALL, torch.float32)
    assert plan["score_passes"].sum() == 10  # written by bmm, 2+2+2+2 by mul, clone, fill, softmax, read by bmm


def test_cpu_backends_and_the_operators_they_run() -> None:
    q, k, v = aw.attention_inputs("cpu", shape=SMALL)
    table = backends.sdpa_backends(q, k, v).set_index("backend")
    assert bool(table.loc["math", "available"]) and bool(table.loc["flash", "available"])
    assert table.loc["math", "aten_op"] == "aten::_scaled_dot_product_attention_math"
    assert table.loc["flash", "aten_op"] == "aten::_scaled_dot_product_flash_attention_for_cpu"
    for name in ("efficient", "cudnn"):  # CUDA kernels only
        assert not table.loc[name, "available"] and "no " + name in table.loc[name, "reason"]
    assert table["chosen"].sum() == 1


def test_forced_backends_compute_the_same_attention() -> None:
    q, k, v = aw.attention_inputs("cpu", shape=SMALL)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    for name in ("math", "flash"):
        assert helpers.relative_error(backends.sdpa_fn(name)(q, k, v), ref) < 1e-5
    with pytest.raises(ValueError, match="backend must be one of"):
        backends.sdpa_fn("fast")


def test_backend_in_trace_reads_a_real_profile() -> None:
    built = aw.sdpa("cpu", shape=SMALL, backend="math")
    trace = helpers.profile(built.fn, *built.inputs, steps=1)
    assert backends.backend_in_trace(trace.ops()) == ["math"]
    with pytest.raises(TypeError, match="trace.ops"):
        backends.backend_in_trace([1, 2])


def test_peak_memory_sees_the_score_matrix_only_in_the_hand_written_version() -> None:
    shape = costs.AttentionShape(batch=1, heads=4, seq=256, head_dim=64)
    q, k, v = aw.attention_inputs("cpu", shape=shape)
    score = costs.score_matrix_bytes(shape, torch.float32)
    manual = aw.manual("cpu", shape=shape)
    assert helpers.measure.memory.peak_memory(manual.fn, q, k, v) >= 2 * score  # the scores and their masked copy
    # tiles, never the whole matrix; ATen's CPU flash kernel keeps one tile buffer per thread, so one thread
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert helpers.measure.memory.peak_memory(backends.sdpa_fn("flash"), q, k, v) < score
    finally:
        torch.set_num_threads(threads)


def test_peak_memory_of_a_known_allocation() -> None:
    # a closure that takes no tensor is measured on the GPU when there is one: allocate where it is measured
    device = "cuda" if torch.cuda.is_available() else "cpu"
    assert helpers.measure.memory.peak_memory(lambda: torch.ones(1_000_000, device=device)) >= 4_000_000
    # a CPU tensor argument puts the measurement on the CPU, GPU or not
    cpu = torch.zeros(1)
    assert helpers.measure.memory.peak_memory(lambda x: torch.ones(1_000_000) + x, cpu) >= 4_000_000
    with pytest.raises(TypeError):
        helpers.measure.memory.peak_memory(3)


def test_gpu_views_are_named_like_their_reference_traces() -> None:
    for name, build in aw.GPU_VIEWS.items():
        assert name.startswith("attention_") and callable(build)


@requires_cuda
def test_cuda_backends_report_reasons() -> None:
    q, k, v = aw.attention_inputs("cuda", shape=costs.AttentionShape(batch=1, heads=2, seq=128, head_dim=64))
    table = backends.sdpa_backends(q, k, v).set_index("backend")
    assert table.loc["math", "available"]
    for name, row in table.iterrows():
        assert row["available"] or row["reason"], name
