"""Memory from a saved trace: the profiler's [memory] events read by the loader, memory over time,
the peak by operator, and CUDA allocator snapshots read without running the pickle.

Expectations are counted from the JSON (or the dicts the test pickles) independently of the code."""

from __future__ import annotations

import gzip
import json
import os
import pickle

import numpy as np
import pytest
import torch

import helpers
from helpers.paths import TRACES_DIR
from helpers.trace import memory_snapshot as snap
from helpers.trace import memory_view as mv

REFERENCE = TRACES_DIR / "cpu_memory_mlp.json.gz"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A small training step recorded now on the CPU with profile_memory=True, and its JSON events."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))
    x = torch.randn(32, 64)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        for _ in range(2):
            model(x).sum().backward()
    path = tmp_path_factory.mktemp("mem") / "step.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    return path, [e for e in events if e.get("name") == "[memory]"], events


def _expected_running(mem: list[dict]) -> list[int]:
    return [e["args"]["Total Allocated"] for e in sorted(mem, key=lambda e: e["ts"])]


@pytest.mark.parametrize("keep_document", [True, False])  # the dict path and the streamed, typed path
def test_every_memory_event_is_read(recorded, keep_document):
    path, mem, _ = recorded
    trace = helpers.load_trace(path, keep_document=keep_document)
    table = trace._tables.memory
    assert len(table) == len(mem) > 0
    assert sorted(table["bytes"].tolist()) == sorted(e["args"]["Bytes"] for e in mem)
    assert table["total_allocated"].tolist() == _expected_running(mem)
    assert set(table["device"]) == {"CPU"}
    assert sum(e["args"]["Bytes"] for e in mem if e["args"]["Bytes"] > 0) == int(table["bytes"].clip(lower=0).sum())


def test_op_around_each_allocation_matches_a_brute_force_search(recorded):
    path, mem, events = recorded
    trace = helpers.load_trace(path)
    by_op = mv.memory_by_op(trace)
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    expected = []
    for m in sorted(mem, key=lambda e: e["ts"]):
        around = [o for o in ops if o["tid"] == m["tid"] and o["ts"] <= m["ts"] <= o["ts"] + o["dur"]]
        # innermost: the latest start, then the shortest
        inner = min(around, key=lambda o: (-o["ts"], o["dur"]))["name"] if around else mv.NO_OP
        expected.append(inner)
    assert by_op["op"].tolist() == expected
    assert (by_op["op"] != mv.NO_OP).mean() > 0.8  # most allocations happen inside an operator


def test_peak_by_operator_adds_up_to_the_peak(recorded):
    path, mem, _ = recorded
    trace = helpers.load_trace(path)
    peak = mv.peak_memory_by_op(trace)
    assert peak.attrs["device"] == "CPU"
    assert peak.attrs["peak_mb"] == pytest.approx(max(_expected_running(mem)) / 1e6)
    assert peak["live_mb"].sum() == pytest.approx(peak.attrs["peak_mb"])
    assert peak["share_of_peak"].sum() == pytest.approx(1.0)
    assert (peak["live_mb"].diff().dropna() <= 0).all()
    # replay the events up to the peak by hand: the live blocks are those allocated and not yet freed
    live: dict[int, int] = {}
    for e in sorted(mem, key=lambda e: e["ts"]):
        a = e["args"]
        if a["Bytes"] > 0:
            live[a["Addr"]] = a["Bytes"]
        else:
            live.pop(a["Addr"], None)
        if a["Total Allocated"] == max(_expected_running(mem)):
            break
    assert peak.loc[peak["op"] != mv.BEFORE_TRACE, "allocations"].sum() == len(live)
    with pytest.raises(ValueError, match="by must be"):
        mv.peak_memory_by_op(trace, by="bottom")
    with pytest.raises(ValueError, match="GPU 3"):
        mv.peak_memory_by_op(trace, device="GPU 3")


def test_reference_trace_memory_view():
    trace = helpers.load_trace(REFERENCE)
    raw = json.loads(gzip.decompress(REFERENCE.read_bytes()))["traceEvents"]
    mem = [e for e in raw if e.get("name") == "[memory]"]
    over = mv.memory_over_time(trace)
    assert len(over) == len(mem) and over["time_ms"].is_monotonic_increasing
    assert over.attrs["peak_mb"]["CPU"] == pytest.approx(max(_expected_running(mem)) / 1e6)
    peak = mv.peak_memory_by_op(trace)
    # inference of the GeGLU MLP: at the peak, gate and up projections' outputs and the GeLU are alive
    assert set(peak["op"]) <= {"aten::linear", "aten::gelu", "aten::mul", mv.BEFORE_TRACE}
    fig = mv.memory_over_time_figure(trace)
    assert fig.data and "peak" in fig.layout.annotations[0].text
    assert REFERENCE.stat().st_size < 300_000


def test_huge_memory_history_is_bounded_and_keeps_the_peak(tmp_path):
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 1000, 60_000)
    signs = np.where(rng.random(60_000) < 0.5, 1, -1)
    total = np.cumsum(sizes * signs) + 10**7
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0.0, "dur": 1e6}]
    events += [
        {
            "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": float(i),
            "args": {"Addr": 1000 + i, "Bytes": int(b * s), "Total Allocated": int(t), "Total Reserved": 0,
                     "Device Type": 1, "Device Id": 0},
        }
        for i, (b, s, t) in enumerate(zip(sizes, signs, total))
    ]  # fmt: skip
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"traceEvents": events}))
    trace = helpers.load_trace(path)
    over = mv.memory_over_time(trace, max_points=600)
    assert len(over) <= 600 and set(over["device"]) == {"GPU 0"}
    assert over["allocated_mb"].max() == pytest.approx(total.max() / 1e6)
    assert over["allocated_mb"].min() == pytest.approx(total.min() / 1e6)
    with pytest.raises(ValueError, match="max_points"):
        mv.memory_over_time(trace, max_points=1)


def test_trace_without_memory_events_says_how_to_record_them():
    trace = helpers.load_trace(TRACES_DIR / "h200_mlp_eager.json.gz")
    with pytest.raises(ValueError, match="profile_memory=True"):
        mv.memory_over_time(trace)
    with pytest.raises(TypeError):
        mv.peak_memory_by_op("not a trace")


def test_memory_event_with_odd_fields_is_counted_not_guessed(tmp_path):
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 0.0, "dur": 10.0},
        {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1.0, "args": {"Addr": 8, "Bytes": 64}},
        {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 2.0, "args": {"Addr": 8, "Bytes": "lots"}},
        {"ph": "i", "name": "[memory]", "pid": "1", "tid": 1, "ts": 3.0, "args": {"Addr": 8, "Bytes": -64}},
    ]
    path = tmp_path / "odd.json"
    path.write_text(json.dumps({"traceEvents": events}))
    trace = helpers.load_trace(path)
    assert trace._tables.memory["bytes"].tolist() == [64, -64]
    assert any("'[memory]' events" in n for n in trace.notes)
    # no 'Total Allocated': a running sum of Bytes per device stands in
    assert mv.memory_over_time(trace)["allocated_mb"].tolist() == [64e-6, 0.0]
    assert mv.memory_by_op(trace)["op"].tolist() == ["aten::empty", "aten::empty"]


# --------------------------------------------------------------------------- allocator snapshots
def _snapshot() -> dict:
    """A snapshot with the fields torch.cuda.memory._snapshot() writes (see its docstring in torch/cuda/memory.py)."""
    frame = {"filename": "model.py", "line": 12, "name": "forward"}
    blocks = [
        {"size": 2 << 20, "requested_size": 2_000_000, "address": 1 << 30, "state": "active_allocated", "frames": [frame]},
        {"size": 1 << 20, "requested_size": 0, "address": (1 << 30) + (2 << 20), "state": "inactive", "frames": []},
    ]  # fmt: skip
    segment = {
        "device": 0, "address": 1 << 30, "total_size": 3 << 20, "stream": 0, "segment_type": "large",
        "segment_pool_id": (0, 0), "allocated_size": 2 << 20, "active_size": 2 << 20, "blocks": blocks,
    }  # fmt: skip
    actions = [
        {"action": "segment_alloc", "addr": 1 << 30, "size": 3 << 20, "stream": 0, "time_us": 10, "frames": [frame]},
        {"action": "alloc", "addr": 1 << 30, "size": 2 << 20, "stream": 0, "time_us": 11, "frames": [frame]},
    ]  # fmt: skip
    return {"segments": [segment], "device_traces": [actions]}


def test_snapshot_pickle_is_read_as_tables(tmp_path):
    path = tmp_path / "snapshot.pickle"
    path.write_bytes(pickle.dumps(_snapshot()))
    data = snap.read_snapshot(path)
    segments = snap.snapshot_segments(data)
    assert segments.loc[0, ["total_size", "allocated_size", "blocks"]].tolist() == [3 << 20, 2 << 20, 2]
    blocks = snap.snapshot_blocks(path)
    assert blocks["state"].tolist() == ["active_allocated", "inactive"]
    assert blocks.loc[0, "frame"] == "model.py:12 forward"
    assert blocks["size"].sum() == segments["total_size"].sum()
    actions = snap.snapshot_actions(data)
    assert actions["action"].tolist() == ["segment_alloc", "alloc"] and (actions["device"] == 0).all()


class _Boom:
    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_snapshot_is_refused_without_running(tmp_path):
    marker = tmp_path / "ran"
    boom = _Boom()
    boom.marker = marker
    path = tmp_path / "evil.pickle"
    path.write_bytes(pickle.dumps({"segments": [boom]}))
    with pytest.raises(ValueError, match=r"refused: the file asks for (posix|os|nt)\.system"):
        snap.read_snapshot(path)
    assert not marker.exists()


def test_bad_snapshot_files_get_clear_errors(tmp_path):
    path = tmp_path / "s.pickle"
    path.write_bytes(pickle.dumps(_snapshot())[:-20])
    with pytest.raises(ValueError, match="not a readable pickle"):
        snap.read_snapshot(path)
    path.write_bytes(pickle.dumps([1, 2, 3]))
    with pytest.raises(ValueError, match="not a CUDA memory snapshot"):
        snap.read_snapshot(path)
    path.write_bytes(pickle.dumps(_snapshot()))
    with pytest.raises(ValueError, match="max_bytes"):
        snap.read_snapshot(path, max_bytes=100)
    with pytest.raises(FileNotFoundError):
        snap.read_snapshot(tmp_path / "missing.pickle")
