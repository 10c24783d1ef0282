"""Hostile and broken trace files (issue 13): no hang, no memory blow-up, no silently wrong table.

Each test reproduces one failure seen when probing the loader as a hostile or unlucky user would.
Big inputs are not needed to show them: the mechanisms are tested on small files with lowered
limits or small slices (benchmarks/hostile_inputs.py measures the full-size cases: an 80 MB
damaged trace and a 2 MB gzip bomb, both reading paths, time and peak memory).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from support import data_file, load_benchmark

import helpers
import helpers.trace.work
from helpers.paths import env_with_first_on_path
from helpers.trace import events as events_mod
from helpers.trace import files as tracefile
from helpers.trace import json_text

ROOT = Path(__file__).resolve().parents[2]
BOTH_PATHS = pytest.mark.parametrize("keep_document", [True, False], ids=["whole", "streamed"])


def eager_doc() -> dict:
    return tracefile.read_document(data_file("h200_mlp_eager.json.gz"))


def tiled_text(copies: int) -> bytes:
    """The H200 eager trace with its timed events repeated `copies` times (shifted in time)."""
    doc = eager_doc()
    body = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    doc["traceEvents"] += [dict(e, ts=e["ts"] + k * 1e6) for k in range(1, copies) for e in body]
    return json.dumps(doc).encode()


def near_byte(err: BaseException) -> int:
    found = re.search(r"near byte ([\d,]+)", str(err))
    assert found, f"no byte offset in: {err}"
    return int(found.group(1).replace(",", ""))


def load(path, keep_document: bool, **kwargs) -> helpers.trace.Trace:
    return helpers.load_trace(path, keep_document=keep_document, **kwargs)


def write_gz_blocks(path: Path, blocks) -> Path:
    with gzip.open(path, "wb", compresslevel=9) as gz:
        for block in blocks:
            gz.write(block)
    return path


# --------------------------------------------------------------------------- 1. a damaged byte deep in a big trace
@pytest.mark.parametrize(
    "keep_document, block", [(True, 0), (False, 16_384), (False, 8 << 20)], ids=["whole", "slices", "last-slice"]
)
def test_damaged_byte_deep_in_a_trace_fails_at_once_with_its_offset(tmp_path, monkeypatch, keep_document, block):
    """Streaming used to retry every later slice and then every ']' of the tail: no answer after 300 s."""
    text = tiled_text(copies=40)  # ~2 MB
    where = text.index(b'"name"', int(len(text) * 0.6))
    damaged = text[:where] + b"#" + text[where + 1 :]
    path = tmp_path / "damaged.json"
    path.write_bytes(damaged)
    decodes: list[int] = []
    real = events_mod.decode_slice

    def counting(data: bytes) -> list:
        decodes.append(len(data))
        if len(decodes) > len(damaged) // (block or len(damaged)) + 10:
            raise AssertionError(f"{len(decodes)} slice parses: retrying")
        return real(data)

    monkeypatch.setattr(events_mod, "decode_slice", counting)
    with pytest.raises(ValueError, match="not a JSON trace") as info:
        if keep_document:
            load(path, keep_document=True)
        else:
            events_mod.events_from_file(path, block_bytes=block)
    assert abs(near_byte(info.value) - where) <= 1, str(info.value)
    # slices before the damage parse once; the damaged one is reported, never retried
    assert keep_document or len(decodes) <= where // block + 2


def test_the_benchmark_of_hostile_inputs_runs(tmp_path):
    """benchmarks/hostile_inputs.py on small probes: each answered by a clear error, fast and small."""
    hostile_inputs = load_benchmark("hostile_inputs")

    out = tmp_path / "result.json"
    probes = "damaged_80mb,bomb_events,deep_nest_100k_chain,one_event_70mb"
    args = ["--quick", "--probes", probes, "--workdir", str(tmp_path / "work"), "--json", str(out)]
    assert hostile_inputs.main(args) == 0
    result = json.loads(out.read_text())
    assert [(r["probe"], r["path"]) for r in result["rows"]] == [
        ("damaged_80mb", "whole"),
        ("damaged_80mb", "streamed"),
        ("bomb_events", "whole"),
        ("bomb_events", "streamed"),
        ("deep_nest_100k_chain", "chain:level0"),
        ("one_event_70mb", "load"),
    ]
    assert result["target_met"], result["rows"]
    assert result["provenance"]["device_type"] == "cpu"


def test_an_unclosed_event_list_is_found_in_one_pass(tmp_path, monkeypatch):
    """The end of the list is found by one scan, not by parsing at every ']' from the right."""
    doc = json.loads(tiled_text(copies=10))
    text = json.dumps({"traceEvents": doc["traceEvents"]}).encode()
    path = tmp_path / "unclosed.json"
    path.write_bytes(text[: text.rindex(b"]")])  # the list's ']' and what follows are missing
    parses: list[int] = []
    real_slice, real_loads = events_mod.decode_slice, json_text._loads
    monkeypatch.setattr(events_mod, "decode_slice", lambda data: parses.append(1) or real_slice(data))
    monkeypatch.setattr(json_text, "_loads", lambda data: parses.append(1) or real_loads(data))
    with pytest.raises(ValueError, match="not a JSON trace"):
        events_mod.events_from_file(path, block_bytes=1 << 20)
    assert len(parses) <= 4, f"{len(parses)} parses"


# --------------------------------------------------------------------------- 2. decompressed size
@BOTH_PATHS
def test_gzip_bomb_of_whitespace_stops_early(tmp_path, keep_document):
    """40 MB of text from a few KB of gzip: refused after the first 32 MB, on both paths."""
    path = write_gz_blocks(tmp_path / "bomb.json.gz", [b'{"traceEvents": ['] + [b" " * (1 << 20)] * 40 + [b"]}"])
    assert path.stat().st_size < 200_000
    with pytest.raises(tracefile.TraceTooLargeError, match="times its compressed size"):
        load(path, keep_document)


@BOTH_PATHS
def test_gzip_bomb_of_valid_events_stops_early(tmp_path, keep_document):
    """The dangerous kind: millions of tiny valid events would become tables of gigabytes."""
    event = b'{"ph":"X","cat":"cpu_op","name":"aten::mm","ts":1,"dur":1,"pid":1,"tid":1},'
    path = write_gz_blocks(
        tmp_path / "events.json.gz",
        [b'{"traceEvents": ['] + [event * ((1 << 20) // len(event))] * 40 + [event[:-1] + b"]}"],
    )
    with pytest.raises(tracefile.TraceTooLargeError, match="gzip bomb"):
        load(path, keep_document)


@BOTH_PATHS
def test_explicit_limit_counts_real_bytes_and_says_how_to_raise_it(tmp_path, keep_document):
    text = tiled_text(copies=3)
    plain = tmp_path / "t.json"
    plain.write_bytes(text)
    with pytest.raises(tracefile.TraceTooLargeError, match=r"more than 10,000 bytes.*max_bytes=40000"):
        load(plain, keep_document, max_bytes=10_000)
    # a file of two gzip members: the trailer of the last says "16 bytes", the text is much longer
    faked = tmp_path / "two_members.json.gz"
    faked.write_bytes(gzip.compress(text[:-16]) + gzip.compress(text[-16:]))
    assert tracefile.text_size(faked) < len(text) // 10
    with pytest.raises(tracefile.TraceTooLargeError, match="decompresses to more than 10,000 bytes"):
        load(faked, keep_document, max_bytes=10_000)
    assert len(load(faked, keep_document).events) == len(load(plain, keep_document).events)


def test_an_explicit_limit_replaces_the_ratio_check(tmp_path):
    path = write_gz_blocks(tmp_path / "spaces.json.gz", [b'{"traceEvents": ['] + [b" " * (1 << 20)] * 40 + [b"]}"])
    with pytest.raises(ValueError, match="holds no timed events"):  # read to the end: a valid, empty trace
        load(path, keep_document=False, max_bytes=64 << 20)
    with pytest.raises(ValueError, match="max_bytes must be a positive"):
        load(path, keep_document=False, max_bytes=0)


@BOTH_PATHS
def test_not_json_is_refused_from_its_first_bytes(tmp_path, keep_document):
    """A gzip bomb of zeros: refused at its first byte, not after reading the limit."""
    path = write_gz_blocks(tmp_path / "zeros.json.gz", [b"\0" * (1 << 20)] * 40)
    with pytest.raises(ValueError, match=r"not a JSON trace.*starts with b'\\x00"):
        load(path, keep_document)


# --------------------------------------------------------------------------- 5. nesting and byte-order marks
def _deep_trace(tmp_path, levels: int) -> Path:
    text = json.dumps(eager_doc()).encode()
    cut = text.index(b'"traceEvents": [') + len(b'"traceEvents": [')
    nested = b'{"ph": "X", "name": "deep", "ts": 1, "dur": 1, "pid": 1, "tid": 1, "args": {"x": '
    nested += b"[" * levels + b"]" * levels + b"}}, "
    path = tmp_path / f"deep{levels}.json"
    path.write_bytes(text[:cut] + nested + text[cut:])
    return path


@BOTH_PATHS
def test_deep_nesting_is_one_clear_error(tmp_path, keep_document):
    # deeper than any parser or Python recursion limit takes
    with pytest.raises(ValueError, match="more than 1024 levels deep") as info:
        load(_deep_trace(tmp_path, 200_000), keep_document)
    assert not isinstance(info.value, RecursionError)


@BOTH_PATHS
def test_moderately_deep_nesting_loads_or_is_the_same_clear_error(tmp_path, keep_document):
    # valid JSON: whether a parser takes 5,000 levels depends on it and on Python's C recursion limit
    # (msgspec on Python 3.12 does); either the trace loads whole or the one clear error is raised
    try:
        trace = load(_deep_trace(tmp_path, 5000), keep_document)
    except ValueError as err:
        assert "more than 1024 levels deep" in str(err) and not isinstance(err, RecursionError)
    else:
        assert "deep" in set(trace.events["name"])


@BOTH_PATHS
def test_utf8_byte_order_mark_is_accepted_on_both_paths(tmp_path, keep_document):
    text = json.dumps(eager_doc()).encode()
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + text)
    plain = tmp_path / "plain.json"
    plain.write_bytes(text)
    pd.testing.assert_frame_equal(load(path, keep_document).events, load(plain, keep_document).events)


# --------------------------------------------------------------------------- 6-9. saving
@pytest.fixture
def trace() -> helpers.trace.Trace:
    return helpers.load_trace(data_file("h200_linear_bias.json.gz"), label="mine")


def test_no_overwrite_save_loses_no_race(tmp_path, trace, monkeypatch):
    """Another process creates the file between the existence check and the write."""
    target = tmp_path / "t.json.gz"
    target.write_bytes(b"someone else's trace")
    real_exists, real_lexists = Path.exists, os.path.lexists
    monkeypatch.setattr(Path, "exists", lambda p, **kw: False if p == target else real_exists(p, **kw))
    monkeypatch.setattr(os.path, "lexists", lambda p: False if Path(p) == target else real_lexists(p))
    with pytest.raises(FileExistsError, match="t.json.gz"):
        trace.save(target, overwrite=False)
    assert target.read_bytes() == b"someone else's trace"
    assert [p.name for p in tmp_path.iterdir()] == ["t.json.gz"]  # and no temporary file left


def test_racing_no_overwrite_saves_give_one_winner(tmp_path):
    from helpers.trace import saving

    target = tmp_path / "race.json.gz"
    results: list[str] = []
    barrier = threading.Barrier(8)

    def save(i: int) -> None:
        barrier.wait()
        try:
            saving.write_gzip_atomic(f"writer {i}".encode(), target, overwrite=False)
            results.append(f"won {i}")
        except FileExistsError:
            results.append("lost")

    threads = [threading.Thread(target=save, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [r for r in results if r.startswith("won")]
    assert len(winners) == 1 and results.count("lost") == 7
    assert gzip.decompress(target.read_bytes()).decode() == winners[0].replace("won", "writer")


KILLED_SAVE = """
import gzip, sys, time
import helpers
real = gzip.GzipFile.write
def stuck(self, data):
    real(self, data[: len(data) // 2])
    print("writing", flush=True)
    time.sleep(600)  # killed here, half written
gzip.GzipFile.write = stuck
helpers.load_trace(sys.argv[1]).save(sys.argv[2])
"""


def test_killed_save_leaves_a_named_temporary_file_that_the_next_save_removes(tmp_path, trace):
    target = tmp_path / "killed.json.gz"
    env = env_with_first_on_path(ROOT)
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_SAVE, str(data_file("h200_mlp_eager.json.gz")), str(target)],
        stdout=subprocess.PIPE,
        env=env,
    )
    try:
        assert child.stdout.readline().strip() == b"writing"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        child.stdout.close()
    (left,) = [p for p in tmp_path.iterdir()]
    assert not target.exists()
    assert re.fullmatch(rf"\.killed\.json\.gz\.incomplete-{child.pid}-[0-9a-f]{{8}}\.tmp", left.name), left.name
    old = time.time() - 3600
    os.utime(left, (old, old))
    trace.save(tmp_path / "next.json.gz")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["next.json.gz"]


def test_temporary_files_of_running_saves_are_left_alone(tmp_path):
    from helpers.trace import saving

    mine = saving.temp_name(tmp_path / "a.json.gz")
    mine.write_bytes(b"in progress")
    other = tmp_path / ".b.json.gz.incomplete-1-0123abcd.tmp"  # pid 1 runs
    other.write_bytes(b"in progress")
    unrelated = tmp_path / ".c.json.gz.tmp"
    unrelated.write_bytes(b"not ours")
    for p in (mine, other, unrelated):
        os.utime(p, (0, 0))
    assert saving.clean_stale_temp_files(tmp_path) == []


def test_write_errors_name_the_target_not_the_temporary_file(tmp_path, trace, monkeypatch):
    folder = tmp_path / "a_folder.json.gz"
    folder.mkdir()
    with pytest.raises(IsADirectoryError, match=r"could not save the trace to .*a_folder\.json\.gz.*folder"):
        trace.save(folder)
    # no permission in the folder (simulated: the tests may run as root, who may write anywhere)
    target = tmp_path / "t.json.gz"
    real_open = os.open

    def refused(path, *args, **kwargs):
        if ".tmp" in str(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    def refused_mkstemp(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(tmp_path / ".t.json.gz.x.tmp"))

    monkeypatch.setattr(os, "open", refused)
    monkeypatch.setattr("tempfile.mkstemp", refused_mkstemp)
    with pytest.raises(PermissionError) as info:
        trace.save(target)
    message = str(info.value)
    assert "could not save the trace to" in message and "t.json.gz" in message and ".tmp" not in message
    assert "no permission to write in" in message
    monkeypatch.undo()
    blocked = tmp_path / "a_file"
    blocked.write_text("x")
    with pytest.raises(OSError, match=r"could not save the trace to .*a_file/t\.json\.gz"):
        trace.save(blocked / "t.json.gz")


def test_saving_a_streamed_trace_keeps_its_label_and_provenance(tmp_path):
    source = tmp_path / "src.json"
    source.write_bytes(tiled_text(copies=2))
    streamed = helpers.load_trace(source, keep_document=False, label="renamed")
    out = streamed.save(tmp_path / "copy.json.gz")
    again = helpers.load_trace(out)
    assert again.info.label == "renamed"
    assert again.info.device == streamed.info.device != "device not recorded"
    assert again.info.torch_version == streamed.info.torch_version
    pd.testing.assert_frame_equal(again.events, streamed.events)
    assert helpers.load_trace(out, keep_document=False).info.label == "renamed"


def test_saving_a_streamed_trace_whose_file_changed_or_vanished_is_refused(tmp_path):
    source = tmp_path / "src.json"
    source.write_bytes(tiled_text(copies=2))
    streamed = helpers.load_trace(source, keep_document=False)
    source.write_bytes(json.dumps(eager_doc()).encode())  # another trace under the same name
    with pytest.raises(ValueError, match="changed since it was loaded"):
        streamed.save(tmp_path / "copy.json.gz")
    source.unlink()
    with pytest.raises(FileNotFoundError, match="no longer exists") as info:
        streamed.save(tmp_path / "copy.json.gz")
    assert "reference" not in str(info.value)
    assert not (tmp_path / "copy.json.gz").exists()


# --------------------------------------------------------------------------- 10. silently wrong tables
def _edited(tmp_path, edit) -> Path:
    doc = eager_doc()
    edit(doc["traceEvents"])
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    return path


@BOTH_PATHS
def test_negative_durations_are_left_out_with_a_note(tmp_path, keep_document):
    def edit(events):
        mm = next(e for e in events if e.get("name") == "aten::mm")
        mm["dur"] = -50

    trace = load(_edited(tmp_path, edit), keep_document)
    (note,) = [n for n in trace.notes if "negative 'dur'" in n]
    assert note.startswith("1 complete events with a negative 'dur' skipped") and "'aten::mm'" in note
    assert "dur -50" in note
    assert (trace.events["dur"] >= 0).all()
    ops = trace.ops()
    assert (ops[["self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us"]] >= 0).all().all()


@BOTH_PATHS
def test_events_without_a_phase_are_counted(tmp_path, keep_document):
    def edit(events):
        for e in [e for e in events if e.get("name") == "aten::gelu"]:
            del e["ph"]

    trace = load(_edited(tmp_path, edit), keep_document)
    (note,) = [n for n in trace.notes if "'ph'" in n]
    assert note.startswith("3 events without a 'ph' (phase) field") and "'aten::gelu'" in note


@BOTH_PATHS
def test_a_kernel_with_an_empty_name_is_named_and_counted(tmp_path, keep_document):
    def edit(events):
        next(e for e in events if e.get("cat") == "kernel")["name"] = ""

    trace = load(_edited(tmp_path, edit), keep_document)
    (note,) = [n for n in trace.notes if "empty name" in n]
    assert note.startswith("1 events had an empty name") and "kernel event" in note
    assert (trace.kernels()["name"] == "(no name)").sum() == 1
    table = helpers.trace.work.kernel_breakdown(trace)
    assert len(table) > 1


# --------------------------------------------------------------------------- 11. messages that mislead
def test_a_symbolic_link_loop_is_not_reported_as_missing(tmp_path):
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    for keep in (True, False, None):
        with pytest.raises(ValueError, match="cannot be opened: Too many levels of symbolic links"):
            helpers.load_trace(loop, keep_document=keep)
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "gone.json")
    with pytest.raises(FileNotFoundError, match=r"symbolic link to .*gone\.json.*which does not exist"):
        helpers.load_trace(dangling)


def test_a_source_file_that_vanishes_during_the_copy_is_reported_as_such(tmp_path, monkeypatch):
    source = tmp_path / "src.json"
    source.write_bytes(tiled_text(copies=2))
    streamed = helpers.load_trace(source, keep_document=False)
    real_read = tracefile.TraceText.read

    def vanishing(self, size):
        if self.path == source and source.exists():
            source.unlink()  # gone while its events are being copied
        return real_read(self, size)

    monkeypatch.setattr(tracefile.TraceText, "read", vanishing)
    with pytest.raises(FileNotFoundError, match="no longer exists") as info:
        streamed.save(tmp_path / "copy.json.gz")
    assert "Errno" not in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_saving_a_trace_that_was_parsed_whole_while_streaming_keeps_its_label(tmp_path):
    """A layout the slicer does not take (a nested 'traceEvents' key first) is parsed whole; saving still works."""
    doc = eager_doc()
    source = tmp_path / "odd.json"
    source.write_text(json.dumps({"meta": {"traceEvents": []}, **doc}))
    streamed = helpers.load_trace(source, keep_document=False, label="odd")
    assert streamed._tables.source is not None and streamed._tables.source.events_span is None
    again = helpers.load_trace(streamed.save(tmp_path / "copy.json.gz"))
    assert again.info.label == "odd"
    pd.testing.assert_frame_equal(again.events, streamed.events)


def test_a_pipe_or_a_device_is_refused_instead_of_read_forever(tmp_path):
    pipe = tmp_path / "pipe.json"
    os.mkfifo(pipe)  # opening it for reading would wait for a writer that never comes
    for keep in (True, False, None):
        with pytest.raises(ValueError, match="not a regular file"):
            helpers.load_trace(pipe, keep_document=keep)
    with pytest.raises(ValueError, match="not a regular file"):
        helpers.load_trace("/dev/zero", keep_document=True)


def test_a_document_tail_with_nested_keys_streams_like_the_whole_file(tmp_path):
    """A '},' after the events list (a nested key followed by another) is no event boundary.

    Found on 2026-12-01: reference traces whose provenance gained a key after a nested one failed
    to stream ("invalid JSON near byte ...") while the whole-file path read them.
    """
    import gzip

    import orjson

    import helpers
    from helpers.trace import events

    doc = orjson.loads(gzip.open(helpers.reference_trace_path("h200_linear_bias")).read())
    doc["course_provenance"] = {"shapes": {"rows": 1024}, "after": "a key after a nested one", "more": {"x": [1]}}
    path = tmp_path / "tail.json.gz"
    with gzip.GzipFile(path, "wb", mtime=0) as fh:
        fh.write(orjson.dumps(doc))
    for block in (97, 1000, 1 << 20):
        tables, rest = events.events_from_file(path, block_bytes=block)
        assert len(tables.events) == len(events.events_from_document(doc).events)
        assert rest["course_provenance"]["more"] == {"x": [1]}


def test_a_child_keeps_the_machines_python_path(monkeypatch, tmp_path):
    monkeypatch.setenv("PYTHONPATH", "/opt/site")
    env = env_with_first_on_path(tmp_path)
    assert env["PYTHONPATH"].split(os.pathsep) == [str(tmp_path), "/opt/site"]
    monkeypatch.delenv("PYTHONPATH")
    assert env_with_first_on_path(tmp_path)["PYTHONPATH"] == str(tmp_path)


def test_a_probe_reports_its_own_peak_memory_not_the_parents(tmp_path):
    """A child's ru_maxrss from wait4 also counts the parent's resident memory at the fork: a pytest worker that
    holds a GPU context (over a GB) made every probe miss its 1 GB target. The child's own peak is reported."""
    import numpy as np

    hostile_inputs = load_benchmark("hostile_inputs")
    small = tmp_path / "small.json"
    small.write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 1}]}')
    ballast = np.ones(1_200 * 2**20 // 8)  # resident in this process when the child is forked
    root = Path(helpers.__file__).resolve().parents[1]
    row = hostile_inputs.run_child(root, small, "whole", timeout=120, memory_limit=8 * 2**30)
    assert row["outcome"] == "loaded", row
    assert row["peak_rss_mb"] < 1_000, row
    del ballast
