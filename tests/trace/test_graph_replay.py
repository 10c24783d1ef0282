"""CUDA-graph replays tied to the operators that captured them, on the real H200 eager-MLP trace
turned into a capture (step 1: launches inside their ops between cudaStreamBeginCapture and
cudaStreamEndCapture, nothing ran) and replays (steps 2 and 3: one cudaGraphLaunch each). The
expected operator of each replayed kernel is found by hand from the original trace."""

from __future__ import annotations

import copy
import gzip
import json

import pytest
from support import data_file

import helpers
from helpers.trace import files as tracefile

DEVICE_CATS = ("kernel", "gpu_memset", "gpu_memcpy")
CALL_CATS = ("cuda_runtime", "cuda_driver")


def _in_step(e: dict, step: dict) -> bool:
    return step["ts"] <= e["ts"] <= step["ts"] + step["dur"]


def _launching_op(call: dict, ops: list[dict]) -> str:
    """The innermost cpu_op around a launch call on its thread (brute force)."""
    around = [o for o in ops if o["tid"] == call["tid"] and o["ts"] <= call["ts"] <= o["ts"] + o["dur"]]
    return min(around, key=lambda o: o["dur"])["name"]


def _graph_trace(tmp_path, capture: bool = True, drop_from_last: int = 0):
    doc = copy.deepcopy(tracefile.read_document(data_file("h200_mlp_eager.json.gz")))
    events = doc["traceEvents"]
    steps = {int(e["name"].split("#")[1]): e for e in events if e.get("name", "").startswith("ProfilerStep#")}
    first, *replays = sorted(steps)
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    calls = [e for e in events if e.get("cat") in CALL_CATS and "correlation" in e.get("args", {})]
    call_of = {e["args"]["correlation"]: e for e in calls}
    device = sorted((e for e in events if e.get("cat") in DEVICE_CATS), key=lambda e: e["ts"])
    work = [e for e in calls if e["name"] != "cudaDeviceSynchronize"]
    next_id = max(call_of) + 1
    drop, add, expected = [], [], []
    # step 1 is the capture: its kernels never ran; markers around its launches
    captured = [e for e in work if _in_step(e, steps[first])]
    drop += [d for d in device if d["args"]["correlation"] in {c["args"]["correlation"] for c in captured}]
    if capture:
        for name, ts in (
            ("cudaStreamBeginCapture", captured[0]["ts"] - 1),
            ("cudaStreamEndCapture", captured[-1]["ts"] + 5),
        ):
            add.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": captured[0]["pid"],
                        "tid": captured[0]["tid"], "ts": ts, "dur": 0.5, "args": {"correlation": next_id}})  # fmt: skip
            next_id += 1
    else:
        drop += captured
    for s in replays:
        own = [e for e in work if _in_step(e, steps[s])]
        ids = {c["args"]["correlation"] for c in own}
        ran = [d for d in device if d["args"]["correlation"] in ids]
        if s == replays[-1] and drop_from_last:
            drop += ran[-drop_from_last:]
            ran = ran[:-drop_from_last]
        expected += [_launching_op(call_of[d["args"]["correlation"]], ops) for d in ran]
        for d in ran:
            d["args"]["correlation"] = next_id
            d["args"].pop("External id", None)
        drop += own
        add.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": own[0]["pid"],
                    "tid": own[0]["tid"], "ts": steps[s]["ts"] + 0.01, "dur": 0.1, "args": {"correlation": next_id}})  # fmt: skip
        next_id += 1
    gone = {id(e) for e in drop}
    doc["traceEvents"] = [e for e in events if id(e) not in gone] + add
    path = tmp_path / "graph.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return helpers.load_trace(path), expected


def test_replayed_kernels_get_the_operator_that_captured_them(tmp_path):
    trace, expected = _graph_trace(tmp_path)
    k = trace.kernels()
    replayed = k[k["launch_call"] == "cudaGraphLaunch"].sort_values("start_us")
    assert len(replayed) == len(expected) >= 14
    tied = (replayed["launched_by"].to_numpy() == expected).mean()
    assert tied >= 0.95
    assert set(replayed["launched_by"]) >= {"aten::mm", "aten::gelu", "aten::mul"}
    assert any(f"{len(expected)} of {len(expected)} device events replayed" in n for n in trace.notes)


def test_without_the_capture_replays_keep_the_graph_launch_and_say_so(tmp_path):
    trace, expected = _graph_trace(tmp_path, capture=False)
    k = trace.kernels()
    replayed = k[k["launch_call"] == "cudaGraphLaunch"]
    assert len(replayed) == len(expected) and (replayed["launched_by"].fillna("") == "").all()
    assert any("the capture was not profiled" in n for n in trace.notes)


def test_a_replay_that_matches_no_capture_is_not_guessed(tmp_path):
    trace, expected = _graph_trace(tmp_path, drop_from_last=1)
    k = trace.kernels()
    replayed = k[k["launch_call"] == "cudaGraphLaunch"].sort_values("start_us")
    per_step = len(expected) // 2 + 1  # the first replay ran every captured kernel
    assert (replayed["launched_by"].iloc[:per_step].to_numpy() == expected[:per_step]).all()
    assert (replayed["launched_by"].iloc[per_step:].fillna("") == "").all()
    assert any("keep only their graph launch" in n for n in trace.notes)


@pytest.mark.parametrize("name", ["hta__trace_diff_test_test.json.gz"])
def test_real_graph_trace_without_capture_is_noted(name):
    from pathlib import Path

    path = Path("/work/shared/traces/thirdparty") / name
    if not path.exists():
        pytest.skip("third-party traces not on this machine")
    trace = helpers.load_trace(path)
    k = trace.kernels()
    assert (k["launch_call"] == "cudaGraphLaunch").sum() > 0
    assert any("capture was not profiled" in n for n in trace.notes)
