"""Traces beyond the course's own: torch 1.8 format, MTIA, CUPTI range profiling, graph replays,
launches without an op, and correlation ids used twice. Each expectation is counted independently
from the JSON (or from a change the test makes to a real trace), never copied from the code."""

from __future__ import annotations

import bisect
import copy
import gzip
import json
from collections import Counter
from functools import lru_cache
from itertools import accumulate

import orjson
import pytest
from support import data_file

import helpers
import helpers.trace.work
from helpers.trace import files as tracefile

OLD = "kineto__plugin_samples_resnet50_num_workers_0_worker0.pt.trace.json.gz"
MTIA = "hta__mtia_inference_trace_mtia_inference_rank_0.json.gz"
CUPTI = "hta__cupti_profiler_benchmark_result_924719_1679055439_trace.json.gz"


@lru_cache(maxsize=4)
def raw_events(name: str) -> list[dict]:
    doc = orjson.loads(gzip.decompress(data_file(name).read_bytes()))
    return doc if isinstance(doc, list) else doc["traceEvents"]


def write(tmp_path, doc, name="t.json.gz"):
    path = tmp_path / name
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


@pytest.fixture(scope="module")
def old() -> helpers.trace.Trace:
    return helpers.load_trace(data_file(OLD))


def test_torch_1_8_format_gives_real_tables(old):
    raw = raw_events(OLD)
    device = Counter(e["cat"] for e in raw if e.get("ph") == "X" and e.get("cat") in ("Kernel", "Memcpy", "Memset"))
    k = old.kernels()
    assert len(k) == sum(device.values())
    assert Counter(k["kind"]) == {"kernel": device["Kernel"], "memcpy": device["Memcpy"], "memset": device["Memset"]}
    # GPU work on a GPU lane, not on a CPU lane (the old reading drew kernels as host events)
    assert set(k["lane"]) == {"GPU 0 stream 7"} and old.device_lanes == ["GPU 0 stream 7"]
    assert old.steps == [5, 6, 7, 8, 9, 10]
    ops = old.ops().set_index("name")
    assert ops.loc["aten::cudnn_convolution", "device_total_us"] > 0
    table = helpers.trace.work.kernel_breakdown(old)
    assert table.loc[table["family"] == "convolution", "kernels"].sum() > 0
    assert any("Operator -> cpu_op" in n and "Kernel -> kernel" in n for n in old.notes)
    assert old.events["cat"].isin(["Operator", "Kernel", "Runtime"]).sum() == 0


def test_torch_1_8_unlinked_kernels_get_the_right_reason(old):
    """Kernels with a launch call but no op around it, and kernels with no launch call: told apart."""
    raw = [e for e in raw_events(OLD) if e.get("ph") == "X"]
    runtime = {e["args"]["correlation"]: e for e in raw if e["cat"] == "Runtime"}
    ops_by_thread: dict[str, list[tuple[float, float]]] = {}
    for e in raw:
        if e["cat"] == "Operator":
            ops_by_thread.setdefault(str(e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in ops_by_thread.values():
        spans.sort()

    # an op encloses a call when it starts no later and ends no earlier: prefix maxima of the ends
    starts = {tid: [s for s, _ in spans] for tid, spans in ops_by_thread.items()}
    reach = {tid: list(accumulate((e for _, e in spans), max)) for tid, spans in ops_by_thread.items()}

    def enclosed(call):
        tid = str(call["tid"])
        i = bisect.bisect_right(starts.get(tid, []), call["ts"])
        return i > 0 and reach[tid][i - 1] >= call["ts"] + call["dur"]

    device = [e for e in raw if e["cat"] in ("Kernel", "Memcpy", "Memset")]
    no_call = [e for e in device if e["args"]["correlation"] not in runtime]
    no_op = [
        e for e in device if e["args"]["correlation"] in runtime and not enclosed(runtime[e["args"]["correlation"]])
    ]
    notes = " ".join(old.notes)
    assert f"{len(no_op):,} of {len(device):,} device events have a launch call (cudaLaunchKernel" in notes
    assert f"{len(no_call):,} of {len(device):,} device events have no launch call" in notes
    k = old.kernels()
    assert k["launched_by"].isna().sum() == len(no_op) + len(no_call)
    assert k["launch_call"].isna().sum() == len(no_call)


def test_mtia_trace_gives_real_tables():
    raw = [e for e in raw_events(MTIA) if e.get("ph") == "X"]
    work = Counter(e["name"] for e in raw if e.get("cat") == "mtia_ccp_events")
    trace = helpers.load_trace(data_file(MTIA))
    k = trace.kernels()
    assert Counter(k["kind"]) == {
        "kernel": work["pe_exe"] + work["remote"] + work["merge"],
        "memcpy": work["dma_request"],
    }
    assert all(lane.startswith("MTIA 17 stream ") for lane in k["lane"])
    # waits and event records are the device's synchronisation, not work
    assert not k["name"].isin(["event_wait", "event_record"]).any()
    assert helpers.decode_kernel("dma_request")["family"] in ("copy", "unknown")
    assert len(trace.ops()) > 0


def test_a_trace_without_kernel_timings_says_what_it_holds():
    trace = helpers.load_trace(data_file(CUPTI))
    ranges = sum(1 for e in raw_events(CUPTI) if e.get("cat") == "cuda_profiler_range")
    with pytest.raises(helpers.trace.NoKernelsError, match=rf"{ranges} 'cuda_profiler_range' events .*replay"):
        trace.kernels()
    assert trace.kernels(allow_empty=True).empty


def _h200_doc() -> dict:
    return copy.deepcopy(tracefile.read_document(data_file("h200_mlp_eager.json.gz")))


def test_graph_replay_counts_one_launch_call(tmp_path):
    """Step 2 of the H200 eager trace replayed as one CUDA graph: one cudaGraphLaunch for all its kernels."""
    doc = _h200_doc()
    events = doc["traceEvents"]
    step = next(e for e in events if e.get("name") == "ProfilerStep#2")
    inside = [
        e
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver")
        and "correlation" in e.get("args", {})
        and step["ts"] <= e["ts"] <= step["ts"] + step["dur"]
    ]
    ids = {e["args"]["correlation"] for e in inside}
    kernels = [e for e in events if e.get("cat") in ("kernel", "gpu_memset") and e["args"].get("correlation") in ids]
    graph_id = max(e["args"]["correlation"] for e in events if "correlation" in e.get("args", {})) + 1
    for e in kernels:
        e["args"]["correlation"] = graph_id
        e["args"].pop("External id", None)
    launch = {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": "cudaGraphLaunch",
        "pid": inside[0]["pid"],
        "tid": inside[0]["tid"],
        "ts": step["ts"] + step["dur"] - 30.0,
        "dur": 12.5,
        "args": {"correlation": graph_id},
    }
    doc["traceEvents"] = [e for e in events if e not in inside] + [launch]
    trace = helpers.load_trace(write(tmp_path, doc))
    items = helpers.trace.work.work_items(trace)
    step2 = items[items["step"] == 2]
    assert len(step2) == len(kernels) and step2["launch_row"].nunique() == 1  # one call for all its kernels
    assert step2["launch_us"].iloc[0] == pytest.approx(12.5)
    k = trace.kernels()
    graph = k[k["launch_call"] == "cudaGraphLaunch"]
    assert len(graph) == len(kernels) and graph["graph"].all() and not k.loc[k["step"] != 2, "graph"].any()
    assert any(f"{len(kernels)} of " in n and "cudaGraphLaunch x" in n for n in trace.notes)


def test_a_correlation_id_used_twice_credits_each_kernel_to_its_own_op(tmp_path):
    """Two launch calls of one process with one id (a restarted counter): no kernel credited to the wrong op."""
    doc = _h200_doc()
    events = doc["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    gelu = next(e for e in kernels if "Gelu" in e["name"])
    mul = next(e for e in kernels if "MulFunctor" in e["name"] and e["ts"] > gelu["ts"])
    corr_of = {e["args"]["correlation"]: e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    mul_launch = corr_of[mul["args"]["correlation"]]
    for e in (mul, mul_launch):
        e["args"]["correlation"] = gelu["args"]["correlation"]
        e["args"].pop("External id", None)
    trace = helpers.load_trace(write(tmp_path, doc))
    k = trace.kernels().set_index("start_us")
    t0 = min(e["ts"] for e in events if e.get("ph") == "X" and e.get("cat") not in ("Trace",))
    assert k.loc[gelu["ts"] - t0, "launched_by"] == "aten::gelu"
    assert k.loc[mul["ts"] - t0, "launched_by"] == "aten::mul"
    note = next(n for n in trace.notes if "several launch calls of one process" in n)
    assert note.startswith("2 device events") and f"correlation id {gelu['args']['correlation']}" in note
