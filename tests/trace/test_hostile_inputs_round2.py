"""Hostile trace files and run folders, round 2 (issue 23): every assumption a table rests on is checked.

Each test is one kind of case the second round of probes found (a silently wrong table, an unbounded
cost, a crash without a message), shown on small files with lowered limits where a limit is the
point; benchmarks/hostile_inputs.py measures the full-size resource cases (time and peak memory).
"""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import numpy as np
import pytest

import helpers
import helpers.lessons.exercises
from helpers.distributed.runs import load_run, run_summary, runs_table
from helpers.trace import events as events_mod
from helpers.trace import files as tracefile
from helpers.trace import json_text
from helpers.trace import stream as tracestream
from helpers.trace.trees import MAX_CHAIN_DEPTH

BOTH_PATHS = pytest.mark.parametrize("keep_document", [True, False], ids=["whole", "streamed"])


def op(name, ts, dur, tid=1, **args):
    event = {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid}
    if args:
        event["args"] = args
    return event


def step_doc(rank=None, base=None, step_us=100.0, steps=2) -> dict:
    """A small one-rank trace: profiler steps of `step_us`, each with one op inside."""
    events = []
    for s in range(steps):
        t0 = 1000.0 + s * 1000.0
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{s}",
                "ts": t0,
                "dur": step_us,
                "pid": 1,
                "tid": 1,
            }
        )
        events.append(op("aten::mm", t0 + 1, step_us / 2))
    doc: dict = {"traceEvents": events}
    if rank is not None:
        doc["distributedInfo"] = {"rank": rank, "world_size": 3}
    if base is not None:
        doc["baseTimeNanoseconds"] = base
    return doc


def write(path: Path, doc) -> Path:
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    if path.name.endswith(".gz"):
        with gzip.open(path, "wb") as gz:
            gz.write(data)
    else:
        path.write_bytes(data)
    return path


def load(path, keep_document, **kwargs) -> helpers.trace.Trace:
    return helpers.load_trace(path, keep_document=keep_document, **kwargs)


# --------------------------------------------------------------------------- silently wrong tables
@BOTH_PATHS
def test_events_without_ts_are_left_out_with_a_counted_note_never_placed_at_zero(tmp_path, keep_document):
    events = [op("aten::linear", 100, 190), op("aten::mm", 150, 95), op("aten::mm", None, 95)]
    del events[2]["ts"]
    events.append(dict(op("aten::add", 0, 5), ts="soon"))
    trace = load(write(tmp_path / "t.json", {"traceEvents": events}), keep_document)
    assert trace.events["ts"].min() == 100  # nothing placed at 0
    assert trace.ops().set_index("name").loc["aten::linear", "self_cpu_us"] == 95
    note = next(n for n in trace.notes if "'ts'" in n)
    assert note.startswith("2 complete events with a missing, non-numeric or non-finite 'ts'"), note


@BOTH_PATHS
def test_absurd_and_non_finite_times_are_counted_and_left_out(tmp_path, keep_document):
    body = b",".join(
        [
            json.dumps(op("aten::mm", 10, 5)).encode(),
            b'{"ph":"X","cat":"cpu_op","name":"huge_ts","ts":1e308,"dur":1,"pid":1,"tid":1}',
            b'{"ph":"X","cat":"cpu_op","name":"pow2_70","ts":1180591620717411303424,"dur":1,"pid":1,"tid":1}',
            b'{"ph":"X","cat":"cpu_op","name":"huge_dur","ts":10,"dur":1e300,"pid":1,"tid":1}',
            b'{"ph":"X","cat":"cpu_op","name":"negative","ts":10,"dur":-3,"pid":1,"tid":1}',
        ]
    )
    trace = load(write(tmp_path / "t.json", b'{"traceEvents":[' + body + b"]}"), keep_document)
    assert trace.events["name"].tolist() == ["aten::mm"]
    notes = " | ".join(trace.notes)
    assert "beyond 9.01e+15 us" in notes and "negative 'dur'" in notes, notes
    counted = sum(int(n.split()[0].replace(",", "")) for n in trace.notes if "'ts'" in n or "'dur'" in n)
    assert counted == 4
    # a number past float64 is refused by the parser: a clear error that says so, on both paths
    huge = b'{"traceEvents":[{"ph":"X","name":"a","ts":1' + b"0" * 400 + b',"dur":1}]}'
    with pytest.raises(ValueError, match="infinity"):
        load(write(tmp_path / "huge.json", huge), keep_document)


@pytest.mark.parametrize(
    "text",
    [
        b'{"traceEvents":[EV],"x":1,"traceEvents":[]}',
        b'{"traceEvents" : [EV], "traceEvents" :[EV,EV]}',
        b'{"a":{"traceEvents":[]},"traceEvents":[EV],"trace\\u0045vents":[EV]}',
        b'{"trace\\u0045vents":[EV,EV],"traceEvents":[EV]}',
    ],
    ids=["second-empty", "spaces", "escaped-after", "escaped-first"],
)
@BOTH_PATHS
def test_two_top_level_trace_events_keys_are_refused_on_both_paths(tmp_path, text, keep_document):
    path = write(tmp_path / "t.json", text.replace(b"EV", json.dumps(op("aten::mm", 1, 2)).encode()))
    with pytest.raises(ValueError, match="two top-level 'traceEvents' keys"):
        load(path, keep_document)


@BOTH_PATHS
def test_a_trace_events_key_inside_an_event_or_a_string_is_no_second_list(tmp_path, keep_document):
    event = op("traceEvents", 1, 2, **{"traceEvents": [1], "note": 'x "traceEvents": y'})
    path = write(tmp_path / "t.json", {"traceEvents": [event, op("aten::mm", 5, 1)], "meta": {"traceEvents": []}})
    assert len(load(path, keep_document).events) == 2


def test_two_files_for_one_rank_are_refused_naming_both(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    write(run / "rank0.json.gz", step_doc(0))
    write(run / "rank1.json.gz", step_doc(1))
    write(run / "rank1.json", step_doc(1, step_us=300))
    with pytest.raises(ValueError, match=r"rank1\.json.*rank1\.json\.gz.*two files for rank 1"):
        load_run(run)
    with pytest.raises(ValueError, match=r"rank1\.json.*rank1\.json\.gz.*two files for one trace"):
        helpers.trace.load_traces(run)
    # two differently named files that declare one rank: refused too, never summed into a straggler
    a, b = write(tmp_path / "a.json", step_doc(1)), write(tmp_path / "b.json", step_doc(1, step_us=300))
    with pytest.raises(ValueError, match=r"a\.json.*b\.json.*both hold rank 1"):
        helpers.trace.load_traces([a, b])


def test_a_rank_that_contradicts_its_file_name_is_refused(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    write(run / "rank0.json.gz", step_doc(0))
    write(run / "rank2.json.gz", step_doc(1, step_us=300))  # rank 1's trace copied over rank 2's name
    with pytest.raises(ValueError, match=r"rank2\.json\.gz' should hold rank 2 .* distributedInfo says rank 1"):
        load_run(run)


def test_a_missing_rank_keeps_the_true_rank_numbers_and_says_which_are_present(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    write(run / "rank0.json.gz", step_doc())  # no distributedInfo: the file name tells the rank
    write(run / "rank2.json.gz", step_doc(step_us=300))
    (run / "summary.json").write_text(json.dumps({"run": "ddp", "world_size": 3, "backend": "gloo"}))
    trace = load_run(run)
    assert trace.ranks == [0, 2]
    assert trace.step_times()["slowest_rank"].tolist() == [2, 2]
    assert trace.info.label == "ddp (ranks 0, 2 of 3, gloo)"
    assert any("no trace file for rank 1" in n for n in trace.notes), trace.notes
    # without a summary, the gap below the highest rank present is still said
    (run / "summary.json").unlink()
    trace = load_run(run)
    assert "ranks 0, 2 of 3" in trace.info.label and any("rank 1" in n for n in trace.notes)
    # and load_traces of files that declare their ranks
    files = [write(tmp_path / "x.json", step_doc(0)), write(tmp_path / "y.json", step_doc(2))]
    trace = helpers.trace.load_traces(files)
    assert trace.ranks == [0, 2] and trace.info.label.startswith("2 ranks 0, 2")
    assert any("no trace for rank 1" in n for n in trace.notes)


@pytest.mark.parametrize("bad_base", [None, "yesterday", -5, True])
def test_a_rank_without_a_clock_origin_is_not_placed_decades_away(tmp_path, bad_base):
    epoch_ns = 1_764_000_000_000_000_000  # late 2025, as Kineto writes it
    docs = [step_doc(0, base=epoch_ns), step_doc(1, base=epoch_ns + 5_000), step_doc(2, base=bad_base)]
    trace = helpers.trace.load_traces([write(tmp_path / f"r{i}.json", d) for i, d in enumerate(docs)])
    span = trace.events["ts"].max() - trace.events["ts"].min()
    assert span < 10_000  # microseconds, not 54 years
    assert any("no valid 'baseTimeNanoseconds'" in n and "r2" in n for n in trace.notes), trace.notes
    # the ranks that have an origin stay aligned on it (5 us apart)
    starts = trace.events.groupby("rank")["ts"].min()
    assert starts[1] - starts[0] == pytest.approx(5.0)


# --------------------------------------------------------------------------- stated limits
def test_events_past_max_events_are_refused_naming_the_option_on_both_paths(tmp_path):
    path = write(tmp_path / "t.json", {"traceEvents": [op("aten::mm", i * 10, 5) for i in range(300)]})
    for keep in (True, False):
        with pytest.raises(
            tracefile.TraceTooLargeError,
            match=r"(more than 100 events|more than 100:).*load_trace\(path, max_events=400\)",
        ):
            load(path, keep, max_events=100)
        assert len(load(path, keep, max_events=400).events) == 300  # the option named exists and works
    with pytest.raises(ValueError, match="max_events must be a positive int"):
        load(path, True, max_events=0)


@BOTH_PATHS
def test_long_shapes_are_left_out_with_a_note_naming_max_arg_bytes(tmp_path, keep_document):
    big = [[7] * 5000] * 4  # ~40 KB of Input Dims on one event
    events = [op("aten::cat", 1, 10, **{"Input Dims": big}), op("aten::mm", 20, 5, **{"Input Dims": [[2, 3], [3, 4]]})]
    path = write(tmp_path / "t.json", {"traceEvents": events})
    trace = load(path, keep_document, max_arg_bytes=10_000)
    dims = trace.events.set_index("name")["input_dims"]
    assert dims["aten::cat"] == "" and dims["aten::mm"] == "[[2, 3], [3, 4]]"
    note = next(n for n in trace.notes if "max_arg_bytes" in n)
    assert note.startswith("1 events had a 'Input Dims' longer than 10,000 bytes"), note
    assert len(load(path, keep_document).events.set_index("name")["input_dims"]["aten::cat"]) > 10_000


def test_a_run_past_max_bytes_is_refused_advising_the_option_of_the_call_made(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for r in range(3):
        write(run / f"rank{r}.json", step_doc(r, steps=50))
    size = sum(p.stat().st_size for p in run.iterdir())
    with pytest.raises(tracefile.TraceTooLargeError, match=r"3 trace files together .*load_run\(folder, max_bytes="):
        load_run(run, max_bytes=size // 2)
    with pytest.raises(tracefile.TraceTooLargeError, match=r"load_traces\(paths, max_bytes="):
        helpers.trace.load_traces(run, max_bytes=size // 2)
    assert load_run(run, max_bytes=size).ranks == [0, 1, 2]
    # a limit met inside one file is re-said for the call made, with an option it takes
    with pytest.raises(tracefile.TraceTooLargeError, match=r"load_run\(folder, max_events=40\)"):
        load_run(run, max_events=10)


def test_ops_and_chain_cost_linear_time_in_a_deep_nest(tmp_path):
    depth = 20_000
    events = [op(f"level{i}", i, 2 * depth - 2 * i) for i in range(depth)]
    events.append(
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "ts": depth,
            "dur": 1,
            "pid": 1,
            "tid": 1,
            "args": {"correlation": 7},
        }
    )
    events.append(
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "ts": depth + 5,
            "dur": 4,
            "pid": 0,
            "tid": 7,
            "args": {"correlation": 7, "device": 0, "stream": 7},
        }
    )
    trace = load(write(tmp_path / "deep.json", {"traceEvents": events}), False)
    start = time.perf_counter()
    ops = trace.ops().set_index("name")
    assert time.perf_counter() - start < 60  # a guard against a hang, not a speed claim
    assert ops.loc["level0", "device_total_us"] == 4 and ops.loc[f"level{depth - 1}", "self_device_us"] == 4
    chain = trace.chain(f"level{depth - 1500}")  # 1,500 levels below: no RecursionError
    assert len(chain) == 1501 and chain["depth"].max() == 1500 and chain["kind"].iloc[-1] == "kernel"
    with pytest.raises(ValueError, match=rf"more than {MAX_CHAIN_DEPTH:,} levels deep.*max_depth="):
        trace.chain("level0")
    assert len(trace.chain("level0", max_depth=10)) == 11
    assert len(helpers.chain_tree(trace, f"level{depth - 1200}").frame) == 1201


@pytest.mark.parametrize(
    "inner", [b'"' + b"n" * 300_000 + b'"', b"[" + b'{"a":1},' * 40_000 + b"{}]"], ids=["string", "objects"]
)
def test_one_event_longer_than_any_block_is_read_in_linear_time(tmp_path, inner):
    big = b'{"ph":"X","cat":"cpu_op","name":"big","ts":5,"dur":1,"pid":1,"tid":1,"args":{"x":' + inner + b"}}"
    small = json.dumps(op("aten::mm", 1, 1)).encode()
    path = write(tmp_path / "t.json", b'{"traceEvents":[' + small + b"," + big + b"," + small + b"]}")
    decodes = []

    def decode(data):
        decodes.append(len(data))
        return json_text.loads(data)

    block = 4096
    stream = tracestream.stream_events(path, block_bytes=block, decode=decode)
    assert sum(len(chunk) for chunk in stream) == 3
    assert sum(decodes) < 6 * len(big)  # each try waits for the text to double: no block-by-block retries


@pytest.mark.parametrize("props", [5, "H100", [5, {"name": "NVIDIA H200"}], {"name": "x"}])
@BOTH_PATHS
def test_device_properties_of_the_wrong_type_are_noted_not_a_crash(tmp_path, props, keep_document):
    trace = load(
        write(tmp_path / "t.json", {"traceEvents": [op("aten::mm", 1, 1)], "deviceProperties": props}), keep_document
    )
    assert any("deviceProperties" in n for n in trace.notes), trace.notes
    assert trace.info.device == ("NVIDIA H200" if isinstance(props, list) else "device not recorded")


@pytest.mark.parametrize(
    "text", [b"[1, 2]", b"[" * 5000 + b"]" * 5000, b"{oops", b'"run"'], ids=["list", "deep", "broken", "string"]
)
def test_a_summary_that_is_not_an_object_gives_a_clear_error_and_the_run_still_loads(tmp_path, text):
    run = tmp_path / "run"
    run.mkdir()
    write(run / "rank0.json.gz", step_doc(0))
    (run / "summary.json").write_bytes(text)
    with pytest.raises(ValueError, match="not the summary launch_run writes"):
        run_summary(run)
    assert load_run(run).info.label == "run (1 ranks)"
    with pytest.raises(ValueError, match="not the summary launch_run writes"):
        runs_table(run)
    with pytest.raises(ValueError, match="without the fields launch_run writes"):
        runs_table({"run": "x"})


def test_check_of_an_answer_holding_unhashable_items_is_wrong_feedback_not_a_crash():
    torch = pytest.importorskip("torch")
    from helpers.lessons.exercises import WRONG, Exercise, Exercises, check

    book = Exercises("99", kinds=Exercise("kinds", hint="look at the table"))
    for answer in [(torch.ones(3), [1]), ([1, 2], "mm"), (np.ones(2),), {"a": [1]}]:
        for expected in [{"mm", "add"}, frozenset({1, 2}), (1, 2), ("mm", "add"), 3.0]:
            fb = book.check("kinds", answer, expected)
            assert fb.status == WRONG and fb.message, (answer, expected)
            assert check("kinds", answer, expected).status == WRONG


def test_the_builder_limit_options_are_checked():
    for bad in (0, -1, 2.5, True, "10"):
        with pytest.raises(ValueError, match="must be a positive int"):
            events_mod.events_from_document({"traceEvents": []}, max_arg_bytes=bad)


def test_a_file_far_over_max_events_is_refused_before_parsing(tmp_path):
    """The first block's density, times the size the gzip trailer declares: 40x over the limit is refused at once,
    with the estimate and the option; a file just over it is still counted exactly."""
    event = {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1.0, "dur": 1.0}
    many = tmp_path / "many.json.gz"
    many.write_bytes(gzip.compress(json.dumps({"traceEvents": [event] * 400_000}).encode(), compresslevel=1))
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"about [\d,]+ events \(estimated .*max_events="):
        helpers.load_trace(many, max_events=10_000)
    assert time.perf_counter() - start < 60  # a guard against a hang, not a speed claim
    few = tmp_path / "few.json.gz"
    few.write_bytes(gzip.compress(json.dumps({"traceEvents": [event] * 15_000}).encode()))
    with pytest.raises(ValueError, match="more than 10,000 events"):
        helpers.load_trace(few, max_events=10_000)
    assert len(helpers.load_trace(few, max_events=20_000).events) == 15_000
