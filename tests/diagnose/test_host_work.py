"""What the host did while the GPU waited for it: launch overhead, one long host operator, or no operator at all;
the finding's title and fix follow (graphs and compile remove launches, not host work)."""

from __future__ import annotations

import numpy as np
import pytest

import helpers
from helpers.diagnose import diagnose, rules_host
from helpers.diagnose.findings import Context
from helpers.diagnose.host_work import NO_OPERATOR, host_work_in_waits, outermost_host_ops
from helpers.trace.ranks import load_traces
from tests.diagnose.synthetic import Kineto

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"


def _step_with_a_host_pause(k: Kineto, n: int, t: float, pause: str | None, wrap: bool = False) -> None:
    """One step: a GEMM, 4 ms in which the host launches nothing (inside `pause`, or in no operator), a GEMM."""
    k.step(n, t, 5000)
    if wrap:  # a user's range around the whole step is a phase, not the work
        k.x("train_step", "user_annotation", t + 1, 4998)
    k.cpu("aten::mm", t + 2, 20)
    k.launch(GEMM, t + 5, 10, t + 20, 400)
    if pause is not None:
        k.cpu(pause, t + 450, 4000)
        k.cpu("aten::normal_", t + 460, 3980)  # nested: the outer operator is the one named
    k.cpu("aten::mm", t + 4500, 20)
    k.launch(GEMM, t + 4505, 10, t + 4520, 400)


def test_a_long_host_operator_is_named_as_what_the_gpu_waits_for(tmp_path):
    k = Kineto()
    for n in range(3):
        _step_with_a_host_pause(k, n + 1, 5000 * n, "aten::randn", wrap=True)
    [f] = rules_host.gpu_idle_cpu_bound(Context(k.load(tmp_path)))
    assert "spends that time in aten::randn" in f["finding"] and "host work, not launching" in f["finding"]
    assert "DataLoader" in f["fix"] and "CUDA graphs and compile remove launches, not this work" in f["fix"]
    assert f["example"] == "aten::randn" and "the host in aten::randn for 96% of them" in f["evidence"]
    assert "train_step" not in f["finding"]


def test_a_pause_in_no_operator_is_said_to_be_python_or_unprofiled_work(tmp_path):
    k = Kineto()
    for n in range(3):
        _step_with_a_host_pause(k, n + 1, 5000 * n, None)
    [f] = rules_host.gpu_idle_cpu_bound(Context(k.load(tmp_path)))
    assert "runs no profiled operator" in f["finding"] and "with_stack=True" in f["fix"]
    assert "the host in no profiled operator for" in f["evidence"]


def test_many_short_waits_stay_launch_bound(tmp_path):
    k = Kineto()
    k.step(1, 0, 1000)
    for i in range(10):  # 2 us kernels, one every 100 us: each wait is a launch's, under 100 us
        k.cpu("aten::add", 100 * i, 90)
        k.launch("void at::native::vectorized_elementwise_kernel<4, add>(int)", 100 * i + 40, 50, 100 * i + 92, 2)
    [f] = rules_host.gpu_idle_cpu_bound(Context(k.load(tmp_path)))
    assert f["finding"].endswith("(launch-bound)") and "CUDA graph" in f["fix"]
    assert "gaps of 100 us or more" not in f["evidence"]


def test_the_host_pause_ranks_first_in_the_diagnosis(tmp_path):
    k = Kineto()
    for n in range(3):
        _step_with_a_host_pause(k, n + 1, 5000 * n, "aten::randn")
    top = diagnose(k.write(tmp_path / "t.json")).iloc[0]
    assert top["rule"] == "gpu_idle_cpu_bound" and "aten::randn" in top["finding"]


def test_waits_without_any_trace_activity_name_nothing_and_outermost_ops_skip_nested_ones(tmp_path):
    k = Kineto()
    _step_with_a_host_pause(k, 1, 0, "aten::randn", wrap=True)
    ev = k.load(tmp_path).events
    names = set(ev["name"].to_numpy()[outermost_host_ops(ev)])
    assert names == {"aten::mm", "aten::randn"}  # not the nested normal_, not the annotations
    t0 = float(ev["ts"].min())
    none = host_work_in_waits(ev, t0, np.array([]), np.array([]), np.array([]))
    assert none.name is None and none.long_share == 0
    call = int(ev.index[(ev["name"] == "cudaLaunchKernel") & (ev["ts"] == 4505)][0])
    short = host_work_in_waits(ev, t0, np.array([430.0]), np.array([480.0]), np.array([call]))
    assert short.name is None  # a 50 us wait is a launch's
    unknown = host_work_in_waits(ev, t0, np.array([5000.0]), np.array([9000.0]), np.array([-1]))
    assert unknown.name is None and unknown.long_share == 1.0  # no launch call: nothing to read it by
    # aten::mm around the launch call covers 4510-4520 and is the launch itself; the rest is in no operator
    tail = host_work_in_waits(ev, t0, np.array([4510.0]), np.array([4620.0]), np.array([call]))
    assert tail.name == NO_OPERATOR and round(tail.share, 2) == 0.91


def test_waits_spent_in_the_allocator_point_at_it(tmp_path):
    k = Kineto()
    for n in range(3):
        t = 5000 * n
        k.step(n + 1, t, 5000)
        for i in range(8):  # torch.cuda.empty_cache(): the driver frees block after block, inside no operator
            k.runtime("cudaFree", t + 450 + 500 * i, 480)
        _wait_then(k, t)
    [f] = rules_host.gpu_idle_cpu_bound(Context(k.load(tmp_path)))
    assert "in the CUDA allocator (cudaMalloc, cudaFree)" in f["finding"] and "empty_cache" in f["fix"]


def test_nested_and_overlapping_ranges_count_once_in_what_they_cover():
    from helpers.diagnose.host_work import _union

    assert _union(np.array([0.0, 1.0, 5.0]), np.array([3.0, 2.0, 6.0])) == 4.0  # [1, 2] inside [0, 3]
    assert _union(np.array([2.0, 0.0]), np.array([8.0, 5.0])) == 8.0 and _union(np.array([]), np.array([])) == 0.0


def _wait_then(k: Kineto, t: float, tid: int = 1) -> None:
    """A step whose GPU runs a GEMM, then waits about 4 ms for the next launch (made on thread `tid` at t + 4505)."""
    k.cpu("aten::mm", t + 2, 20)
    k.launch(GEMM, t + 5, 10, t + 20, 400)
    k.launch(GEMM, t + 4505, 10, t + 4520, 400, tid=tid)


def test_an_operator_that_launches_the_kernel_ending_the_wait_is_its_own_dispatch_not_host_work(tmp_path):
    k = Kineto()
    for n in range(3):
        t = 5000 * n
        k.step(n + 1, t, 5000)
        k.cpu("aten::conv2d", t + 450, 4070)  # its own CPU work (say, picking an algorithm), then its launch
        _wait_then(k, t)
    [f] = rules_host.gpu_idle_cpu_bound(Context(k.load(tmp_path)))
    assert f["finding"].endswith("(launch-bound)") and "conv2d" not in f["finding"]


def test_another_threads_operator_is_not_what_the_launching_thread_waited_for(tmp_path):
    k = Kineto()
    for n in range(3):
        t = 5000 * n
        k.step(n + 1, t, 5000)
        k.cpu("aten::pin_memory", t + 450, 4000, tid=2)  # a loader thread, busy beside the main one
        _wait_then(k, t)
    [f] = rules_host.gpu_idle_cpu_bound(Context(k.load(tmp_path)))
    assert "runs no profiled operator" in f["finding"] and "pin_memory" not in f["finding"]


def test_profiler_steps_and_annotations_are_not_operators_even_when_old_traces_call_them_cpu_op(tmp_path):
    k = Kineto()
    k.x("ProfilerStep#1", "cpu_op", 0, 5000)  # as older Kineto wrote them
    k.x("my_phase", "user_annotation", 1, 4990)
    k.cpu("aten::randn", 450, 4000)
    k.x("inner", "user_annotation", 460, 3900)
    k.cpu("aten::normal_", 470, 3800)  # an operator below an annotation below an operator: nested
    _wait_then(k, 0)
    ev = k.load(tmp_path).events
    assert set(ev["name"].to_numpy()[outermost_host_ops(ev)]) == {"aten::mm", "aten::randn"}


def test_waits_filled_by_graph_launches_do_not_advise_capturing_a_graph(tmp_path):
    k = Kineto()
    for n in range(3):
        t = 1000 * n
        k.step(n + 1, t, 1000)
        k.launch(GEMM, t + 2, 300, t + 320, 100, call="cudaGraphLaunch")  # each replay's launch takes 300 us
        k.launch(GEMM, t + 450, 300, t + 760, 100, call="cudaGraphLaunch")
    [f] = rules_host.gpu_idle_cpu_bound(Context(k.load(tmp_path)))
    assert "between CUDA graph replays" in f["finding"] and "already runs as a CUDA graph" in f["fix"]


def test_long_waits_shared_by_two_operators_name_both_and_not_launch_overhead(tmp_path):
    k = Kineto()
    for n in range(3):
        t = 5000 * n
        k.step(n + 1, t, 5000)
        k.cpu("aten::randn", t + 450, 2000)
        k.cpu("aten::stack", t + 2460, 2000)
        _wait_then(k, t)
    [f] = rules_host.gpu_idle_cpu_bound(Context(k.load(tmp_path)))
    assert "no single host activity fills" in f["finding"] and "aten::randn and aten::stack" in f["finding"]
    assert "CUDA graphs and compile remove launches, not this work" in f["fix"]


def test_a_run_reads_its_most_idle_gpu_instead_of_adding_every_ranks_waits(tmp_path):
    files = []
    for rank, pause in ((0, "aten::randn"), (1, None)):  # rank 1's GPU waits as long, in no operator
        k = Kineto()
        for n in range(3):
            _step_with_a_host_pause(k, n + 1, 5000 * n, pause)
        doc = {"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2}}
        files.append(k.write(tmp_path / f"rank{rank}.json", **doc))
    one = rules_host.gpu_idle_cpu_bound(Context(helpers.load_trace(files[0])))[0]
    [f] = rules_host.gpu_idle_cpu_bound(Context(load_traces(files)))
    # the same per-step idle time as one rank's trace, not twice it; the saving is read on the path's rank
    assert f["time_us"] == pytest.approx(one["time_us"], rel=0.02)
    assert f["saving_upper_bound_us"] == pytest.approx(one["saving_upper_bound_us"], rel=0.02)
    assert "the most idle of 2 GPUs" in f["evidence"]


def test_a_gpu_waiting_off_the_critical_paths_rank_names_where_its_saving_is_read(tmp_path):
    files = []
    for rank in (0, 1):  # only rank 1's GPU waits for its host; the critical path is rank 0's
        k = Kineto()
        for n in range(3):
            t = 5000 * n
            if rank == 0:
                k.step(n + 1, t, 5000)
                k.cpu("aten::mm", t + 2, 20)
                k.launch(GEMM, t + 5, 10, t + 20, 5000)  # back to back: the next one starts as it ends
            else:
                _step_with_a_host_pause(k, n + 1, t, "aten::randn")
        doc = {"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2}}
        files.append(k.write(tmp_path / f"rank{rank}.json", **doc))
    [f] = rules_host.gpu_idle_cpu_bound(Context(load_traces(files)))
    assert "(rank 1 · GPU 0: the saving is read on rank 0" in f["evidence"]
    assert f["saving_upper_bound_us"] == 0  # rank 0's path holds no host time while its GPU waits


def test_every_finding_of_a_run_of_identical_ranks_reads_as_one_ranks(tmp_path):
    """A run's ranks each run the step: per-step times are one rank's, not the sum over ranks."""
    files = []
    for rank in (0, 1):
        k = Kineto()
        for n in range(3):
            _step_with_a_host_pause(k, n + 1, 5000 * n, "aten::randn")
            k.runtime("cudaDeviceSynchronize", 5000 * n + 4900, 50)
        doc = {"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2}}
        files.append(k.write(tmp_path / f"rank{rank}.json", **doc))
    one = diagnose(files[0]).set_index("rule")
    run = diagnose(tmp_path).set_index("rule")
    assert set(one.index) == set(run.index) and len(one) >= 2
    for rule in one.index:
        assert run.loc[rule, "time_us"] == pytest.approx(one.loc[rule, "time_us"], rel=0.02), rule
        assert run.loc[rule, "saving_upper_bound_us"] == pytest.approx(
            one.loc[rule, "saving_upper_bound_us"], rel=0.02
        ), rule
