"""Bad and unusual trace files: each gets a clear error or a documented, tested degradation.

Real traces are the starting point: the committed H200 traces (torch 2.11, kernels launched
through cudaLaunchKernel and cuLaunchKernelEx) and CPU traces recorded here (torch 2.13), edited
the way damaged or unusual files differ from good ones.
"""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from support import data_file

import helpers
from helpers.trace import events as events_mod
from helpers.trace import files as tracefile
from helpers.trace import links

H200 = ["h200_linear_bias.json.gz", "h200_mlp_eager.json.gz", "h200_mlp_compiled.json.gz"]


def h200_doc(name: str = "h200_mlp_eager.json.gz") -> dict:
    return tracefile.read_document(data_file(name))


def write(tmp_path, doc, name="t.json", gz=False, indent=False) -> str:
    data = json.dumps(doc, indent=2 if indent else None).encode()
    path = tmp_path / (name + (".gz" if gz else ""))
    path.write_bytes(gzip.compress(data) if gz else data)
    return str(path)


def kernel_links(trace: helpers.trace.Trace) -> pd.DataFrame:
    return trace.kernels()[["name", "step", "launched_by", "launch_call"]]


@pytest.fixture(scope="module")
def raw_cpu_trace(tmp_path_factory) -> str:
    """A trace exported by torch.profiler itself here (torch 2.13, Kineto's own JSON layout)."""
    path = tmp_path_factory.mktemp("raw") / "raw_cpu.json"
    layer = torch.nn.Linear(16, 8)
    x = torch.randn(4, 16)
    with torch.profiler.profile(
        record_shapes=True,
        schedule=torch.profiler.schedule(wait=0, warmup=1, active=3, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    ) as prof:
        for _ in range(4):
            layer(x)
            prof.step()
    return str(path)


# --------------------------------------------------------------------------- damaged files
@pytest.mark.parametrize("keep_document", [True, False])
def test_truncated_gzip_is_named(tmp_path, keep_document):
    good = data_file("h200_mlp_eager.json.gz").read_bytes()
    bad = tmp_path / "cut.json.gz"
    bad.write_bytes(good[: len(good) // 2])
    with pytest.raises(ValueError, match="damaged or truncated gzip"):
        helpers.load_trace(bad, keep_document=keep_document)


@pytest.mark.parametrize("keep_document", [True, False])
@pytest.mark.parametrize(
    "content", [b"not json at all", b'{"traceEvents": [{"ph": "X", "name": "a",', b"\xff\xfe garbage \x00"]
)
def test_invalid_json_is_named(tmp_path, keep_document, content):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="not a JSON trace"):
        helpers.load_trace(path, keep_document=keep_document)


def test_plain_json_cut_mid_file_is_an_error_not_a_shorter_trace(tmp_path, raw_cpu_trace):
    data = Path(raw_cpu_trace).read_bytes()
    path = tmp_path / "cut.json"
    path.write_bytes(data[: int(len(data) * 0.6)])
    with pytest.raises(ValueError, match="not a JSON trace"):
        events_mod.events_from_file(path, block_bytes=300)  # many slices: the cut is found at the end
    with pytest.raises(ValueError, match="not a JSON trace"):
        helpers.load_trace(path)


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "empty"),
        (b"   \n", "empty"),
        (b'{"schemaVersion": 1}', "no 'traceEvents' list"),
        (b"[1, 2, 3]", "holds no timed events"),
    ],
)
def test_empty_or_not_a_trace(tmp_path, content, message):
    path = tmp_path / "x.json"
    path.write_bytes(content)
    for keep in (True, False):
        with pytest.raises(ValueError, match=message):
            helpers.load_trace(path, keep_document=keep)


def test_path_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        helpers.load_trace(tmp_path / "missing.json.gz")
    with pytest.raises(ValueError, match="is a folder"):
        helpers.load_trace(tmp_path)
    with pytest.raises(TypeError, match="file path"):
        helpers.load_trace(42)


# --------------------------------------------------------------------------- unusual but valid files
@pytest.mark.parametrize("keep_document", [True, False])
def test_bare_event_list_loads_like_the_document(tmp_path, keep_document):
    doc = h200_doc()
    path = write(tmp_path, doc["traceEvents"], gz=True)
    bare = helpers.load_trace(path, keep_document=keep_document)
    full = helpers.load_trace(data_file("h200_mlp_eager.json.gz"))
    pd.testing.assert_frame_equal(kernel_links(bare), kernel_links(full))
    assert bare.info.device == "device not recorded"  # the list has no deviceProperties to read it from


@pytest.mark.parametrize("keep_document", [True, False])
def test_string_pid_and_tid(tmp_path, keep_document):
    doc = h200_doc()
    for e in doc["traceEvents"]:
        for key in ("pid", "tid"):
            if isinstance(e.get(key), int):
                e[key] = str(e[key])
    trace = helpers.load_trace(write(tmp_path, doc), keep_document=keep_document)
    full = helpers.load_trace(data_file("h200_mlp_eager.json.gz"))
    assert trace.host_lanes == full.host_lanes and trace.device_lanes == full.device_lanes
    pd.testing.assert_frame_equal(kernel_links(trace), kernel_links(full))


@pytest.mark.parametrize("keep_document", [True, False])
def test_events_missing_dur_are_dropped_and_counted(tmp_path, keep_document):
    doc = h200_doc()
    gelu = [
        e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel" and "Gelu" in e.get("name", "")
    ]
    for e in gelu:
        del e["dur"]
    trace = helpers.load_trace(write(tmp_path, doc), keep_document=keep_document)
    assert trace._tables.dropped_without_dur == len(gelu) == 3
    assert any("had no 'dur'" in note for note in trace.notes)
    k = trace.kernels()
    assert not k["name"].str.contains("Gelu").any()
    assert len(k) == 21 - 3 and (k["launched_by"].notna()).all()


def test_metadata_only_trace_is_a_clear_error(tmp_path):
    doc = h200_doc()
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("ph") == "M"]
    assert doc["traceEvents"]
    for keep in (True, False):
        with pytest.raises(ValueError, match="holds no timed events"):
            helpers.load_trace(write(tmp_path, doc), keep_document=keep)


def test_cpu_trace_declaring_gpus_draws_no_gpu_lanes(tmp_path, linear_trace):
    doc = copy.deepcopy(linear_trace._document)
    # What CPU-only traces from some torch versions carry: process metadata for GPU 0..15.
    for dev in range(16):
        doc["traceEvents"].append({"ph": "M", "name": "process_name", "pid": dev, "tid": 0, "args": {"name": "python"}})
        doc["traceEvents"].append(
            {"ph": "M", "name": "process_labels", "pid": dev, "tid": 0, "args": {"labels": f"GPU {dev}"}}
        )
    trace = helpers.load_trace(write(tmp_path, doc))
    assert trace._tables.process_names  # the metadata was read ...
    assert trace.device_lanes == []  # ... and made no lane
    fig = trace.timeline()
    assert fig.layout.meta["lanes"] == trace.host_lanes
    assert not any(lane.startswith("GPU") for lane in fig.layout.meta["lanes"])
    with pytest.raises(helpers.trace.NoKernelsError, match="CPU-only run"):
        trace.kernels()


@pytest.mark.parametrize("drop", ["f", "s"])
def test_flow_events_without_ends(tmp_path, drop):
    doc = h200_doc()
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("ph") != drop]
    trace = helpers.load_trace(write(tmp_path, doc))
    tables = trace._tables
    assert tables.flow_count > 0 and tables.unmatched_flows == tables.flow_count
    assert trace.notes == []  # nothing is lost: flows are not how kernels are linked
    full = helpers.load_trace(data_file("h200_mlp_eager.json.gz"))
    pd.testing.assert_frame_equal(kernel_links(trace), kernel_links(full))  # linked through correlation


def test_duplicated_external_ids_across_steps_still_link_kernels(tmp_path):
    doc = h200_doc()
    full = helpers.load_trace(data_file("h200_mlp_eager.json.gz"))
    ev = full.events
    # renumber every step's External ids from the same base, as two profiling cycles would
    step_of_ext = {}
    for _step, group in ev[ev["external_id"].notna() & (ev["step"] >= 0)].groupby("step"):
        base = int(group["external_id"].min())
        for x in group["external_id"].astype(int):
            step_of_ext[x] = x - base
    changed = 0
    for e in doc["traceEvents"]:
        args = e.get("args") or {}
        if args.get("External id") in step_of_ext:
            args["External id"] = step_of_ext[args["External id"]]
            changed += 1
    assert changed > 100
    trace = helpers.load_trace(write(tmp_path, doc))
    ids = trace.events.loc[trace.events["cat"] == "cpu_op", "external_id"]
    assert ids.duplicated().any()  # the ids now repeat across steps
    pd.testing.assert_frame_equal(kernel_links(trace), kernel_links(full))
    assert trace.kernels().groupby("step").size().tolist() == [7, 7, 7]


def test_misleading_external_id_loses_to_correlation(tmp_path):
    doc = h200_doc()
    # point the first GeLU kernel's External id at a unique, unrelated op (the last aten::mul)
    muls = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op" and e.get("name") == "aten::mul"]
    gelu = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel" and "Gelu" in e.get("name", ""))
    gelu["args"]["External id"] = muls[-1]["args"]["External id"]
    trace = helpers.load_trace(write(tmp_path, doc))
    first = trace.kernels().iloc[2]
    assert "Gelu" in first["name"] and first["launched_by"] == "aten::gelu"


def test_kernel_without_launch_call_falls_back_on_external_id(tmp_path):
    doc = h200_doc()
    launches = {
        e["args"]["correlation"]
        for e in doc["traceEvents"]
        if e.get("cat") == "cuda_runtime" and e.get("name") == "cudaLaunchKernel"
    }
    doc["traceEvents"] = [
        e for e in doc["traceEvents"] if not (e.get("cat") == "cuda_runtime" and e.get("name") == "cudaLaunchKernel")
    ]
    trace = helpers.load_trace(write(tmp_path, doc))
    k = trace.kernels()
    orphans = k[k["launch_call"].isna()]
    assert len(orphans) == len(launches) == 6  # gelu and mul in 3 steps
    assert set(orphans["launched_by"]) == {"aten::gelu", "aten::mul"}  # through the unique External ids
    assert (orphans["step"] > 0).all()
    assert trace.notes == []


def test_kernels_that_cannot_be_linked_are_counted(tmp_path):
    doc = h200_doc()
    doc["traceEvents"] = [
        e for e in doc["traceEvents"] if not (e.get("cat") == "cuda_runtime" and e.get("name") == "cudaLaunchKernel")
    ]
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and "elementwise" in e.get("name", ""):
            del e["args"]["External id"]
    trace = helpers.load_trace(write(tmp_path, doc))
    k = trace.kernels()
    assert (
        k["launched_by"].isna().sum() == 6 and k.loc[k["launched_by"].isna(), "name"].str.contains("elementwise").all()
    )
    assert any(note.startswith("6 of 21 device events have no launch call") for note in trace.notes)


def test_entries_that_are_not_objects_and_begin_end_events_are_skipped(tmp_path):
    doc = h200_doc()
    doc["traceEvents"] = (
        [7, "text", None]
        + doc["traceEvents"]
        + [{"ph": "B", "name": "b", "pid": 1, "tid": 1, "ts": 1.0}, {"ph": "E", "pid": 1, "tid": 1, "ts": 2.0}]
    )
    trace = helpers.load_trace(write(tmp_path, doc))
    assert len(trace.kernels()) == 21
    notes = " ".join(trace.notes)
    assert "3 entries of traceEvents that are not JSON objects skipped" in notes
    assert "2 begin/end ('B'/'E') events" in notes


@pytest.mark.parametrize("keep_document", [True, False])
def test_unusual_field_types_are_read_defensively(tmp_path, keep_document):
    doc = h200_doc()
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    kernels[0]["args"]["correlation"] = str(kernels[0]["args"]["correlation"])  # "14310"
    kernels[1]["ts"] = str(kernels[1]["ts"])
    kernels[2]["args"]["stream"] = None
    kernels[3]["name"] = 12345
    kernels[4]["args"]["External id"] = 2**70  # beyond int64: read as missing, the kernel still links
    trace = helpers.load_trace(write(tmp_path, doc), keep_document=keep_document)
    k = trace.kernels()
    assert len(k) == 21
    assert "12345" in set(k["name"])
    # the string correlation still links the kernel to its launch
    assert k["launch_call"].notna().sum() == 21


# --------------------------------------------------------------------------- versions and layouts
@pytest.mark.parametrize("name", H200)
def test_h200_torch_2_11_traces_link_every_kernel(name):
    trace = helpers.load_trace(data_file(name))
    assert trace.info.torch_version.startswith("2.11")
    k = trace.kernels()
    assert len(trace.steps) == 3 and len(k) % 3 == 0
    assert k["launched_by"].notna().all() and k["launch_call"].notna().all()
    # torch 2.11 on the H200 launches cuBLAS GEMMs through the driver API
    gemm = k[k["name"].str.startswith("nvjet")]
    assert (gemm["launch_call"] == "cuLaunchKernelEx").all()
    assert trace.kernels().groupby("step").size().nunique() == 1


def test_torch_2_13_raw_export_in_kinetos_layout(raw_cpu_trace, tmp_path):
    """A file straight from export_chrome_trace (indented, one field per line) reads the same way
    whole, in slices of a few hundred bytes, and gzipped."""
    whole = helpers.load_trace(raw_cpu_trace, keep_document=True)
    sliced, doc = events_mod.events_from_file(raw_cpu_trace, block_bytes=256)
    pd.testing.assert_frame_equal(sliced.events, whole.events)
    assert doc["traceEvents"] == [] and "deviceProperties" in doc
    gz = tmp_path / "raw.json.gz"
    gz.write_bytes(gzip.compress(Path(raw_cpu_trace).read_bytes()))
    pd.testing.assert_frame_equal(helpers.load_trace(gz, keep_document=False).events, whole.events)
    assert whole.steps == [1, 2, 3]
    assert whole.chain("aten::linear")["path"].str.contains("aten::addmm").any()


@pytest.mark.parametrize("name", H200)
@pytest.mark.parametrize("block_bytes", [97, 1000, 1 << 20])
def test_sliced_reading_equals_whole_reading(name, block_bytes):
    whole = events_mod.events_from_document(h200_doc(name))
    sliced, doc = events_mod.events_from_file(data_file(name), block_bytes=block_bytes)
    pd.testing.assert_frame_equal(sliced.events, whole.events)
    assert (sliced.flow_count, sliced.unmatched_flows) == (whole.flow_count, whole.unmatched_flows)
    assert doc["course_provenance"]["torch"].startswith("2.11")  # the keys after traceEvents are read too


def test_event_boundary_look_alikes_inside_strings(tmp_path):
    """'},' inside a name looks like the end of an event; the parse check rejects such cuts."""
    doc = h200_doc()
    for e in doc["traceEvents"]:
        if e.get("cat") == "cpu_op":
            e["name"] = e["name"] + ' odd},{"ph":"X"},'
            e.setdefault("args", {})["Concrete Inputs"] = ["},", "]", "}, {"]
    path = write(tmp_path, doc)
    whole = events_mod.events_from_document(tracefile.read_document(path))
    sliced, _ = events_mod.events_from_file(path, block_bytes=64)
    pd.testing.assert_frame_equal(sliced.events, whole.events)
    assert sliced.events["name"].str.endswith('odd},{"ph":"X"},').sum() == (whole.events["cat"] == "cpu_op").sum()


def test_saved_big_trace_without_document_resaves_from_its_file(tmp_path):
    path = data_file("h200_mlp_compiled.json.gz")
    trace = helpers.load_trace(path, keep_document=False)
    out = trace.save(tmp_path / "again.json.gz")
    pd.testing.assert_frame_equal(helpers.load_trace(out).events, trace.events)


# --------------------------------------------------------------------------- the nesting pass
def _all_nest(events: pd.DataFrame, use_stack: bool) -> pd.DataFrame:
    ev = events[events_mod.EVENT_COLUMNS].copy()
    links.annotate(ev, use_stack=use_stack)
    return ev


@pytest.mark.parametrize("name", H200)
def test_vectorised_nesting_matches_the_stack_walk_on_real_traces(name, mlp_trace):
    for events in (helpers.load_trace(data_file(name)).events, mlp_trace.events):
        fast, slow = _all_nest(events, False), _all_nest(events, True)
        pd.testing.assert_frame_equal(fast, slow)


def test_vectorised_nesting_on_random_nested_intervals():
    rng = np.random.default_rng(0)

    def children(start, end, depth, out):
        t = start
        while depth < 6 and t < end:
            gap, length = rng.exponential(2.0), rng.exponential(6.0)
            s, e = t + gap, min(t + gap + length, end)
            if s >= e:
                break
            if rng.random() < 0.1:
                e = s  # an instant event
            out.append((s, e))
            children(s, e, depth + 1, out)
            t = e
        return out

    spans = children(0.0, 5000.0, 0, [])
    ts = np.array([s for s, _ in spans])
    end = np.array([e for _, e in spans])
    order = np.lexsort((-(end - ts), ts))
    ts, end = ts[order], end[order]
    p_fast, d_fast, ok = links._nest_lane_vectorised(ts, end)
    p_slow, d_slow = links._nest_lane_stack(ts, end)
    assert ok and len(ts) > 500
    np.testing.assert_array_equal(p_fast, p_slow)
    np.testing.assert_array_equal(d_fast, d_slow)


def test_partial_overlaps_fall_back_to_the_stack_walk():
    # b overlaps a's end by 5 us (beyond the 0.5 us tolerance): not nested
    ts = np.array([0.0, 8.0, 9.0])
    end = np.array([10.0, 15.0, 14.0])
    _, _, ok = links._nest_lane_vectorised(ts, end)
    assert not ok
    parent, depth = links._nest(np.zeros(3, dtype=np.int64), ts, end, np.arange(3), 3)
    np.testing.assert_array_equal(parent, [-1, -1, 1])
    np.testing.assert_array_equal(depth, [0, 0, 1])
