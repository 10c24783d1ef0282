"""Trace.timeline() on real traces, small and big: lanes, windows, caps and the size of the figure."""

from __future__ import annotations

import pytest
from support import data_file
from test_trace_scale import tile_document

import helpers
import helpers.trace.model
from helpers.trace import files as tracefile
from helpers.trace import json_text, saving
from helpers.trace import timeline as timeline_mod


@pytest.fixture(scope="module")
def big_trace() -> helpers.trace.Trace:
    """The H200 eager MLP tiled 600 times: ~80,000 events, 1,800 profiler steps."""
    doc = tile_document(tracefile.read_document(data_file("h200_mlp_eager.json.gz")), copies=600)
    info = helpers.trace.model.TraceInfo(label="tiled", source="file", device="NVIDIA H200")
    return helpers.trace.Trace(doc, info, keep_document=False)


@pytest.fixture(scope="module")
def h200_eager() -> helpers.trace.Trace:
    return helpers.load_trace(data_file("h200_mlp_eager.json.gz"))


def test_big_trace_defaults_stay_small_and_say_what_was_left_out(big_trace):
    fig = big_trace.timeline()
    meta = fig.layout.meta
    size = len(fig.to_json())
    assert size < 3_000_000, f"figure JSON is {size / 1e6:.1f} MB"
    assert meta["webgl"] and meta["drawn_events"] <= timeline_mod.DEFAULT_MAX_EVENTS
    assert meta["total_events"] == len(big_trace.events) > 50_000
    # whole steps from the first one, and the title says how to see the others
    steps = meta["steps"]
    assert steps == list(range(1, len(steps) + 1)) and 10 < len(steps) < 1800
    assert f"({len(steps):,} of {len(big_trace.steps):,} steps)" in fig.layout.title.text and "steps=" in meta["note"]
    drawn = big_trace.events[big_trace.events["step"].isin(steps)]
    assert meta["drawn_events"] >= 0.9 * len(drawn[(drawn["cat"] != "gpu_user_annotation")])
    # hover text stored once per bar (markers), not once per line vertex
    hover = sum(len(t.hovertext) for t in fig.data if t.hovertext is not None)
    assert hover == meta["drawn_events"]
    assert meta["lanes"] == [_main_thread(big_trace), "GPU 0 stream 7"]


def test_step_window_and_time_window(big_trace, h200_eager):
    fig = big_trace.timeline(steps=[900, 901])
    meta = fig.layout.meta
    assert meta["steps"] == [900, 901] and not meta["webgl"]
    # copies 300 and 301 hold steps 900 (the recording's step 3) and 901 (its step 1)
    one = [h200_eager.timeline(steps=s).layout.meta["drawn_events"] for s in (3, 1)]
    assert meta["drawn_events"] == sum(one) and 40 < one[0] < 60
    assert len(fig.layout.shapes) == 2
    start = float(big_trace.events["ts"].min())
    step = big_trace.events[big_trace.events["name"] == "ProfilerStep#1000"].iloc[0]
    lo = step["ts"] - start
    win = big_trace.timeline(time_range_us=(lo, lo + step["dur"]))
    assert 1000 in win.layout.meta["steps"] and win.layout.meta["drawn_events"] < 200
    with pytest.raises(ValueError, match=r"steps \[5000\] are not in this trace"):
        big_trace.timeline(steps=5000)
    with pytest.raises(ValueError, match="end > start"):
        big_trace.timeline(time_range_us=(10, 5))
    with pytest.raises(TypeError, match="step number"):
        big_trace.timeline(steps="1")
    with pytest.raises(ValueError, match="max_depth"):
        big_trace.timeline(max_depth=-1)


def test_cap_inside_one_step_says_so(big_trace):
    fig = big_trace.timeline(max_events=20)
    assert fig.layout.meta["drawn_events"] == 20
    assert "left out" in fig.layout.meta["note"] and fig.layout.meta["steps"] == [1]


def test_small_gpu_trace_lanes_and_links(h200_eager):
    fig = h200_eager.timeline()
    meta = fig.layout.meta
    # one lane for the thread that ran the ops, one for the stream: none for GPU 1..15 of the metadata
    assert meta["lanes"] == [_main_thread(h200_eager), "GPU 0 stream 7"]
    assert not meta["webgl"] and meta["note"] == "" and meta["steps"] == [1, 2, 3]
    hover = " ".join(" ".join(t.hovertext) for t in fig.data if t.hovertext is not None)
    assert "launched by aten::gelu" in hover and "launched by aten::mm" in hover
    assert len(fig.layout.shapes) == 3 and [a.text for a in fig.layout.annotations] == ["step 1", "step 2", "step 3"]
    forced = h200_eager.timeline(webgl=True)
    assert forced.layout.meta["webgl"] and all(t.type == "scattergl" for t in forced.data)


def test_launch_calls_are_linked_to_their_kernels(h200_eager):
    fig = h200_eager.timeline()
    meta = fig.layout.meta
    k = h200_eager.kernels()
    assert meta["launch_links"] == int(k["launch_call"].notna().sum()) > 0
    links = next(t for t in fig.data if t.name == timeline_mod.LINK_NAME)
    assert links.visible is True and len(links.x) == 3 * meta["launch_links"]
    hover = " ".join(" ".join(t.hovertext) for t in fig.data if t.hovertext is not None)
    assert "<b>cudaLaunchKernel</b>" in hover and "launches vectorized_elementwise_kernel" in hover.replace(
        "void at::native::", ""
    )
    assert "launch call cuLaunchKernelEx at" in hover


def test_time_axis_starts_at_the_drawn_step(h200_eager):
    fig = h200_eager.timeline(steps=2)
    step = h200_eager.events[h200_eager.events["name"] == "ProfilerStep#2"].iloc[0]
    assert fig.layout.xaxis.title.text == "time since the start of step 2 (us)"
    assert fig.layout.meta["origin_us"] == pytest.approx(step["ts"] - h200_eager.events["ts"].min())
    assert fig.layout.shapes[0].x0 == pytest.approx(0.0)  # the step's band starts at zero
    whole = h200_eager.timeline(time_range_us=(0, 1e9))
    assert whole.layout.xaxis.title.text == "time since trace start (us)" and whole.layout.meta["origin_us"] == 0


def test_one_step_over_the_cap_is_worded_right(tmp_path):
    """A trace with a single profiler step (step 2) and more events than the cap."""
    doc = tracefile.read_document(data_file("h200_mlp_eager.json.gz"))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("name") not in ("ProfilerStep#1", "ProfilerStep#3")]
    path = tmp_path / "one_step.json.gz"
    saving.write_gzip_atomic(json_text.dump_document(doc), path)
    trace = helpers.load_trace(path)
    assert trace.steps == [2]
    fig = trace.timeline(max_events=20)
    note = fig.layout.meta["note"]
    assert "of 1" not in note and "first 20 events drawn" in note and fig.layout.meta["steps"] == [2]


def _main_thread(trace) -> str:
    """The lane of the thread that ran the profiled ops ("CPU <pid>/<tid>", whatever pid the recording got)."""
    ops = trace.events[trace.events["cat"] == "cpu_op"]
    (lane,) = set(ops["lane"])
    return lane
