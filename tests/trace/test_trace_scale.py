"""Big traces: a real H200 trace tiled many times reads the same sliced as whole, with every link intact.

No timing here (performance claims come from benchmarks/trace_loading.py, run side by side with
HolisticTraceAnalysis); these tests check that the code paths built for speed give the same
answers as the simple ones.
"""

from __future__ import annotations

import copy
import json
import os

import numpy as np
import pandas as pd
import pytest
from support import data_file

import helpers
import helpers.trace.work
from helpers.trace import events as events_mod
from helpers.trace import files as tracefile


def tile_document(doc: dict, copies: int) -> dict:
    """`copies` back-to-back copies of a trace's events: shifted in time, fresh External ids,
    correlation and flow ids, step numbers continued (1-3, 4-6, ...); metadata kept once."""
    events = doc["traceEvents"]
    meta = [e for e in events if e.get("ph") == "M" or e.get("cat") in ("Trace", "trace") or e.get("ph") == "i"]
    body = [e for e in events if e not in meta]
    t0 = min(e["ts"] for e in body)
    t1 = max(e["ts"] + e.get("dur", 0) for e in body)
    ext = max((e.get("args") or {}).get("External id", 0) for e in body) + 1
    corr = (
        max(
            max((e.get("args") or {}).get("correlation", 0) for e in body),
            max(e.get("id", 0) for e in body if e.get("ph") in ("s", "f")),
        )
        + 1
    )
    steps = sorted(int(e["name"].split("#")[1]) for e in body if e.get("name", "").startswith("ProfilerStep#"))
    span = steps[-1] - steps[0] + 1
    out = list(meta)
    for k in range(copies):
        for e in body:
            c = copy.deepcopy(e)
            c["ts"] = e["ts"] + k * (t1 - t0 + 50.0)
            args = c.get("args") or {}
            if "External id" in args:
                args["External id"] += k * ext
            if "correlation" in args:
                args["correlation"] += k * corr
            if c.get("ph") in ("s", "f"):
                c["id"] += k * corr
            if c.get("name", "").startswith("ProfilerStep#"):
                c["name"] = f"ProfilerStep#{int(c['name'].split('#')[1]) + k * span}"
            out.append(c)
    tiled = {k: v for k, v in doc.items() if k != "traceEvents"}
    tiled["traceEvents"] = out
    return tiled


@pytest.fixture(scope="module")
def tiled_file(tmp_path_factory):
    """~40,000 events of the H200 eager MLP (200 copies, 600 steps), as a plain .json file."""
    doc = tile_document(tracefile.read_document(data_file("h200_mlp_eager.json.gz")), copies=200)
    path = tmp_path_factory.mktemp("big") / "tiled.json"
    path.write_bytes(json.dumps(doc).encode())
    return path


def test_tiled_trace_reads_the_same_sliced_and_whole(tiled_file):
    whole = helpers.load_trace(tiled_file, keep_document=True)
    sliced = helpers.load_trace(tiled_file, keep_document=False)
    assert sliced._document is None  # big-file path: the document is not kept
    pd.testing.assert_frame_equal(sliced.events, whole.events)
    small, _ = events_mod.events_from_file(tiled_file, block_bytes=50_000)  # many slices
    pd.testing.assert_frame_equal(small.events, whole.events)
    assert len(whole.events) > 25_000


def test_every_copy_keeps_its_links(tiled_file):
    trace = helpers.load_trace(tiled_file, keep_document=False)
    assert trace.steps == list(range(1, 601))
    per_step = trace.kernels().groupby("step").size()
    assert (per_step == 7).all() and len(per_step) == 600
    k = trace.kernels()
    assert k["launched_by"].notna().all() and k["launch_call"].notna().all()
    ops = trace.ops().set_index("name")
    assert ops.loc["aten::mm", "calls"] == 3 * 600 and ops.loc["aten::gelu", "calls"] == 600
    # the one real trace's numbers, repeated
    one = helpers.load_trace(data_file("h200_mlp_eager.json.gz")).ops().set_index("name")
    assert ops.loc["aten::mm", "device_total_us"] == pytest.approx(200 * one.loc["aten::mm", "device_total_us"])


def test_breakdown_of_the_tiled_trace_matches_one_copy(tiled_file):
    big = helpers.load_trace(tiled_file, keep_document=False, label="big")
    one = helpers.load_trace(data_file("h200_mlp_eager.json.gz"), label="one")
    table = helpers.trace.work.kernel_breakdown(big).set_index(["family", "source"])
    per_copy = helpers.trace.work.kernel_breakdown(one).set_index(["family", "source"]).loc[table.index]
    np.testing.assert_allclose(table["pct"], per_copy["pct"], rtol=1e-9)
    np.testing.assert_allclose(table["mean_us"], per_copy["mean_us"], rtol=1e-9)


def test_reading_traces_does_not_import_torch_or_plotly():
    """Reading a trace needs neither torch nor plotly (a timeline imports plotly when drawn): each
    import costs memory that would count against the loader's peak on small traces."""
    import subprocess
    import sys

    code = (
        "import sys, helpers, helpers.trace.work; t = helpers.load_trace(sys.argv[1]); t.kernels(); t.ops(); "
        "helpers.trace.work.kernel_breakdown(t); print(sorted({'torch', 'plotly'} & set(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(data_file("h200_mlp_eager.json.gz"))],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]"


def test_gzip_size_decides_by_its_text(tmp_path, tiled_file):
    import gzip

    gz = tmp_path / "tiled.json.gz"
    gz.write_bytes(gzip.compress(tiled_file.read_bytes()))
    assert tracefile.text_size(gz) == tiled_file.stat().st_size > gz.stat().st_size
    assert tracefile.text_size(tiled_file) == tiled_file.stat().st_size


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads VmHWM from /proc (Linux)")
def test_loading_a_mid_size_trace_costs_little_memory_beyond_the_imports(tiled_file):
    """Peak memory is what the loader is compared on against HolisticTraceAnalysis: streamed in
    small slices, reading a trace and its kernel and operator tables adds less than 4x its JSON
    text to the process (parsing it whole, or in large slices, costs several times more). The bound
    leaves room for pandas versions: 3.0 keeps more per table than 3.1 (a GPU machine's torch image
    carries 3.0)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "def peak():\n"
        "    return next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')) * 1024\n"
        "import helpers, pandas\n"
        "w = helpers.load_trace(sys.argv[2]); w.kernels(); w.ops(); del w  # the modules a first read imports lazily\n"
        "before = peak(); t = helpers.load_trace(sys.argv[1]); t.kernels(); t.ops(); print(peak() - before)\n"
    )
    small = str(data_file("h200_mlp_eager.json.gz"))
    out = subprocess.run(
        [sys.executable, "-c", code, str(tiled_file), small], capture_output=True, text=True, check=True
    )
    added = int(out.stdout.strip())
    assert added < 4 * tiled_file.stat().st_size, (
        f"{added / 1e6:.0f} MB for {tiled_file.stat().st_size / 1e6:.0f} MB (pandas {pd.__version__})"
    )
