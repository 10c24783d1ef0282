"""The critical path: exact on hand-built traces whose path is known, sane on real ones."""

from __future__ import annotations

import numpy as np
import pytest

import helpers
from helpers.diagnose import critical_path
from helpers.diagnose.critical_path import path_summary
from tests.diagnose.synthetic import Kineto
from tests.support import data_file


def _rows(path):
    return [(r.name, r.kind, r.start_us, r.end_us) for r in path.itertuples()]


def test_cpu_bound_path_runs_through_the_host(tmp_path):
    # three tiny kernels, each launched long after the previous finished: the CPU sets the pace
    k = Kineto()
    k.step(1, 0, 300)
    for i, t in enumerate((0, 100, 200)):
        k.cpu(f"aten::op{i}", t, 90)
        k.launch(f"k{i}", t + 10, 20, t + 35, 5)
    path = critical_path(k.load(tmp_path), step=1)
    assert path.attrs["length_us"] == pytest.approx(300)
    assert _rows(path)[:6] == [
        ("aten::op0", "cpu", 0, 10),
        ("cudaLaunchKernel", "cpu", 10, 30),
        ("aten::op0", "cpu", 30, 90),
        ("(no event)", "cpu gap", 90, 100),
        ("aten::op1", "cpu", 100, 110),
        ("cudaLaunchKernel", "cpu", 110, 130),
    ]
    # the last kernel ended at 240; the step's own CPU time ran to 300: the path ends on the host
    assert _rows(path)[-1] == ("(no event)", "cpu gap", 290, 300)
    summary = path_summary(path).set_index("kind")["us"]
    assert summary["cpu"] == pytest.approx(270) and "kernel" not in summary


def test_gpu_bound_path_runs_through_the_stream(tmp_path):
    # the CPU queues three long kernels quickly; the stream runs them back to back
    k = Kineto()
    k.step(1, 0, 40)
    for i in range(3):
        k.cpu(f"aten::mm{i}", 10 * i, 10)
        k.launch(f"gemm{i}", 10 * i + 2, 5, 10 + 100 * i, 100)
    path = critical_path(k.load(tmp_path), step=1)
    assert path.attrs["window_us"] == (0, 310)
    assert _rows(path) == [
        ("aten::mm0", "cpu", 0, 2),
        ("cudaLaunchKernel", "cpu", 2, 7),
        ("cudaLaunchKernel", "launch delay", 7, 10),
        ("gemm0", "kernel", 10, 110),
        ("gemm1", "kernel", 110, 210),
        ("gemm2", "kernel", 210, 310),
    ]
    assert path["share_pct"].sum() == pytest.approx(100)
    assert path.loc[path["kind"] == "kernel", "op"].tolist() == ["aten::mm0", "aten::mm1", "aten::mm2"]


def test_a_sync_in_the_middle_hands_the_path_to_the_gpu_and_back(tmp_path):
    k = Kineto()
    k.step(1, 0, 400)
    k.cpu("aten::mm", 0, 20)
    k.launch("gemm", 5, 10, 20, 200)  # runs 20..220
    k.cpu("aten::item", 30, 200)  # .item(): waits for the GEMM
    c = k.runtime("cudaStreamSynchronize", 40, 185)  # returns at 225, 5 us after the GEMM ended
    k.sync_record("Stream Sync", c, 40, 185, stream=7)
    k.cpu("aten::add", 240, 50)
    k.launch("add", 250, 10, 262, 8)  # ends 270, the CPU continues to 400 (step end)
    path = critical_path(k.load(tmp_path), step=1)
    rows = _rows(path)
    assert ("gemm", "kernel", 20, 220) in rows
    assert ("cudaStreamSynchronize", "sync wait", 220, 225) in rows
    assert ("cudaLaunchKernel", "launch delay", 15, 20) in rows
    assert ("aten::item", "cpu", 225, 230) in rows
    assert path.attrs["length_us"] == pytest.approx(400)
    # nothing of the CPU before the GEMM's launch is on the path while the GEMM runs
    assert not ((path["kind"] == "cpu") & (path["start_us"] >= 20) & (path["end_us"] <= 220)).any()


@pytest.mark.parametrize("with_args", [True, False])
def test_two_streams_with_an_event_wait(tmp_path, with_args):
    # stream 7 runs a long GEMM; stream 8's kernel waits on an event recorded after it
    k = Kineto()
    k.step(1, 0, 60)
    k.cpu("aten::mm", 0, 10)
    k.launch("gemm", 2, 5, 10, 300, stream=7)  # 10..310
    rec = k.runtime("cudaEventRecord", 12, 2)
    wait = k.runtime("cudaStreamWaitEvent", 16, 2)
    args = {"wait_on_stream": 7, "wait_on_cuda_event_record_corr_id": rec} if with_args else {}
    k.launch("before_wait", 8, 2, 11, 3, stream=8)  # enqueued before the wait: does not wait
    k.sync_record("Stream Wait Event", wait, 17, 1, stream=8, **args)
    k.cpu("aten::add", 30, 10)
    k.launch("add_after_wait", 32, 5, 310, 20, stream=8)  # waits for the GEMM: 310..330
    trace = k.load(tmp_path)
    path = critical_path(trace, step=1)
    rows = _rows(path)
    assert rows[-1] == ("add_after_wait", "kernel", 310, 330)
    assert ("gemm", "kernel", 10, 310) in rows
    assert path.attrs["length_us"] == pytest.approx(330)
    assert "before_wait" not in path["name"].tolist()


def test_whole_trace_and_errors(tmp_path):
    k = Kineto()
    k.cpu("aten::add", 0, 10)
    trace = k.load(tmp_path)
    path = critical_path(trace)
    assert _rows(path) == [("aten::add", "cpu", 0, 10)]
    with pytest.raises(ValueError, match="step 3"):
        critical_path(trace, step=3)
    with pytest.raises(TypeError, match="step"):
        critical_path(trace, step="1")
    with pytest.raises(TypeError, match="a Trace"):
        critical_path("trace.json")


@pytest.mark.parametrize(
    "name", ["hta__critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz",
             "hta__critical_path_cuda_event_sync_multi_stream_event_sync_trace.json.gz",
             "kineto__plugin_samples_resnet50_num_workers_0_worker0.pt.trace.json.gz"],
)  # fmt: skip
def test_real_traces_give_a_path_that_covers_the_window(name):
    trace = helpers.load_trace(data_file(name))
    step = trace.steps[-1] if trace.steps else None
    path = critical_path(trace, step=step)
    start, end = path.attrs["window_us"]
    assert path.attrs["length_us"] == pytest.approx(end - start)
    assert (path["duration_us"] > 0).all()
    # pieces follow each other without holes or overlaps
    assert np.allclose(path["start_us"].to_numpy()[1:], path["end_us"].to_numpy()[:-1])
    assert set(path["kind"]) <= {
        "cpu",
        "cpu gap",
        "launch delay",
        "kernel",
        "memcpy",
        "memset",
        "gpu wait",
        "sync wait",
    }
