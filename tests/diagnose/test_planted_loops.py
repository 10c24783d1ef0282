"""Planted problems the rules were not written against: two new training loops profiled live on the CPU, and
GPU-only plantings (a pageable copy, a synchronising .item()) in hand-built traces. Every planted problem must
be among the first findings, and no finding there may be false (a rule nothing was planted for that claims a
real share of the step, or a finding with no real event or cost)."""

from __future__ import annotations

import pytest
import torch

import helpers
from helpers.diagnose import diagnose
from tests.diagnose.planted_loops import attention_loop, conv_loop
from tests.diagnose.synthetic import Kineto

GEMM = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, std::array<char*, 2ul> >(int)"


def _check_top(found, trace_names: set[str], planted: set[str]) -> None:
    n = max(3, len(planted))
    top = found.head(n)
    assert planted <= set(top["rule"]), f"planted {sorted(planted)}, top {n}: {top['rule'].tolist()}"
    for f in found.head(3).itertuples():
        # an unplanted finding may follow the planted ones when it is real and small (a loop's own loss is a short
        # pointwise chain): it is false when it claims a real share of the step
        small = f.saving_upper_bound_us < 0.05 * found.attrs["step_us"]
        assert f.rule in planted or small, f"false finding in the top 3: {f.rule} ({f.evidence})"
        assert f.example in trace_names and 0 < f.saving_upper_bound_us <= found.attrs["step_us"]


@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("make", [conv_loop, attention_loop], ids=["conv", "attention"])
def test_new_planted_loops_on_cpu(make, one_thread):
    step, planted = make()
    trace = helpers.profile(step, steps=3, warmup=2, grad=True, label=make.__name__)
    found = diagnose(trace)
    assert not found.attrs["skipped"]
    _check_top(found, set(trace.events["name"]), planted)


STEP_US = 4300.0


def _gpu_step(k: Kineto, n: int, pageable: bool, item: bool) -> None:
    """Step `n` on a GPU, right after the one before: the batch copied in, four 1 ms GEMMs, the loss read back
    (or not)."""
    t = STEP_US * n
    k.step(n + 1, t, STEP_US)
    k.cpu("aten::to", t, 120)
    name = f"Memcpy HtoD ({'Pageable' if pageable else 'Pinned'} -> Device)"
    k.launch(name, t + 10, 100 if pageable else 5, t + 15, 90, call="cudaMemcpyAsync", cat="gpu_memcpy")
    for i in range(4):
        k.cpu("aten::mm", t + 130 + 30 * i, 20)
        k.launch(GEMM, t + 135 + 30 * i, 5, t + 140 + 1000 * i, 1000)
    if item:  # the CPU waits for the GEMMs, then the GPU waits for the next launch
        k.cpu("aten::item", t + 260, 3900)
        k.cpu("aten::_local_scalar_dense", t + 261, 3898)
        c = k.runtime("cudaStreamSynchronize", t + 270, 3875)
        k.sync_record("Stream Sync", c, t + 270, 3875, stream=7)
    k.cpu("aten::add", t + (4170 if item else 260), 30)
    k.launch(ADD, t + (4180 if item else 270), 5, t + (4205 if item else 4140), 5)


@pytest.mark.parametrize(
    ("pageable", "item", "planted"),
    [(True, True, {"pageable_copies", "host_sync"}), (True, False, {"pageable_copies"}),
     (False, True, {"host_sync"}), (False, False, set())],
)  # fmt: skip
def test_gpu_plantings_in_a_built_trace(tmp_path, pageable, item, planted):
    k = Kineto()
    for s in range(3):
        _gpu_step(k, s, pageable, item)
    trace = k.load(tmp_path)
    found = diagnose(trace)
    assert not found.attrs["skipped"]
    _check_top(found, set(trace.events["name"]), planted)
    if not planted:  # a clean step: nothing claims a real share of it
        assert (found["saving_upper_bound_us"] < 0.05 * found.attrs["step_us"]).all(), found[["rule", "evidence"]]
