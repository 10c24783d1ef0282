"""The resource probes (round 2) of ``benchmarks/hostile_inputs.py``: files that cost without bound.

Each probe is built once in the work folder (never committed) and answered in a child process by
one call, the way a learner would make it (``helpers.load_trace(path)`` with its default reading
path, ``load_run(folder)``, ``Trace.ops()``, ``Trace.chain(op)``):

- ``events_12m``: ~12 million tiny complete events in a ~30 MB gzip file (past the event limit);
- ``input_dims_200mb``: 8 events holding 25 MB of ``Input Dims`` each (200 MB of shapes);
- ``ranks_16x41mb``: a run folder of 16 rank files of ~41 MB of JSON each (the H200 eager trace tiled);
- ``deep_nest_100k``: 100,000 events each enclosing the next (~9 MB): ``ops()`` and ``chain()`` of the outermost;
- ``one_event_70mb``: a valid trace holding one event with 70 MB of args between two small ones.

What counts as an answer (:data:`EXPECTED`): a clear error of the listed kind, or the call done (a
table, notes counted), within the time and memory targets.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Any

RESOURCE_PROBES = (
    "events_12m",
    "input_dims_200mb",
    "ranks_16x41mb",
    "deep_nest_100k_ops",
    "deep_nest_100k_chain",
    "one_event_70mb",
)
# the outcomes that answer each probe well
EXPECTED = {
    "events_12m": ("TraceTooLargeError",),
    "input_dims_200mb": ("done",),
    "ranks_16x41mb": ("TraceTooLargeError",),
    "deep_nest_100k_ops": ("done",),
    "deep_nest_100k_chain": ("ValueError", "done"),
    "one_event_70mb": ("done",),
}

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import helpers
from helpers.distributed.runs import load_run
path, action = sys.argv[1], sys.argv[2]
t1 = time.perf_counter()
try:
    if action == "load_run":
        trace = load_run(path)
        what = f"{len(trace.events):,} events of ranks {trace.ranks}"
    else:
        trace = helpers.load_trace(path)
        what = f"{len(trace.events):,} events"
        if action == "ops":
            what += f"; ops() {len(trace.ops())} rows"
        elif action.startswith("chain:"):
            what += f"; chain() {len(trace.chain(action[6:]))} rows"
    notes = [n[:160] for n in trace.notes]
    report = {"outcome": "done", "message": f"{what}; notes: {notes[:3]}"}
except BaseException as err:
    report = {"outcome": type(err).__name__, "message": str(err)[:600]}
report.update(load_s=time.perf_counter() - t1, import_s=t1 - t0, own_peak_rss_mb=peak_mb())
print(json.dumps(report))
"""


def _events_12m(path: Path, quick: bool) -> dict[str, Any]:
    n = 1_200_000 if quick else 12_000_000
    step = 200_000
    with gzip.open(path, "wb", compresslevel=6) as gz:
        gz.write(b'{"traceEvents":[')
        for start in range(0, n, step):
            stop = min(n, start + step)
            body = ",".join(f'{{"ph":"X","name":"a","ts":{i},"dur":1}}' for i in range(start, stop))
            gz.write(body.encode() + (b"," if stop < n else b""))
        gz.write(b"]}")
    return {"events": n}


def _input_dims(path: Path, quick: bool) -> dict[str, Any]:
    per_event = (25 << 20) // (8 if quick else 1)
    shape = b"[64,64],"  # many small shapes (a cat of millions of tensors): one list object each once parsed
    with open(path, "wb") as fh:
        fh.write(b'{"traceEvents":[')
        for i in range(8):  # each event's shapes distinct: nothing is shared between them
            dims = b"[[%d,1]," % i + shape * (per_event // len(shape)) + b"[1]]"
            fh.write(b'{"ph":"X","cat":"cpu_op","name":"aten::cat","ts":%d,"dur":5,"pid":1,"tid":1,' % (i * 10))
            fh.write(b'"args":{"Input Dims":' + dims + b"}}" + (b"," if i < 7 else b""))
        fh.write(b"]}")
    return {"events": 8, "arg_bytes_per_event": len(dims)}


def _ranks(folder: Path, quick: bool, source: Path) -> dict[str, Any]:
    from trace_loading import build_big_trace

    folder.mkdir(parents=True, exist_ok=True)
    one = folder.parent / "rank_template.json"
    if not one.exists():
        build_big_trace(source, one, n_events=(41_000_000 if not quick else 4_100_000) // 252)
    for r in range(16):
        target = folder / f"rank{r}.json"
        if not target.exists():
            os.link(one, target)  # the same bytes for every rank: reading cost is what is measured
    return {"files": 16, "bytes_per_file": one.stat().st_size}


def _deep_nest(path: Path, quick: bool) -> dict[str, Any]:
    n = 10_000 if quick else 100_000
    with open(path, "w") as fh:
        fh.write('{"traceEvents":[')
        fh.write(
            ",".join(
                f'{{"ph":"X","cat":"cpu_op","name":"level{i}","ts":{i},"dur":{2 * (n - i)},"pid":1,"tid":1}}'
                for i in range(n)
            )
        )
        fh.write("]}")
    return {"depth": n}


def _one_event(path: Path, quick: bool) -> dict[str, Any]:
    size = (70 << 20) // (8 if quick else 1)
    small = b'{"ph":"X","cat":"cpu_op","name":"aten::mm","ts":%d,"dur":1,"pid":1,"tid":1}'
    with open(path, "wb") as fh:
        fh.write(b'{"traceEvents":[' + small % 1 + b",")
        fh.write(b'{"ph":"X","cat":"cpu_op","name":"big","ts":5,"dur":1,"pid":1,"tid":1,"args":{"payload":"')
        fh.write(b"x" * size)
        fh.write(b'"}},' + small % 9 + b"]}")
    return {"event_bytes": size}


def build_resource_probes(
    workdir: Path, quick: bool, names: tuple[str, ...], source: Path
) -> dict[str, dict[str, Any]]:
    """Build the round-2 probes named in `names` (once: existing files are kept) under `workdir`."""
    workdir.mkdir(parents=True, exist_ok=True)
    tag = "quick" if quick else "full"
    plan = {
        "events_12m": (workdir / f"events_12m_{tag}.json.gz", "load", _events_12m),
        "input_dims_200mb": (workdir / f"input_dims_{tag}.json", "load", _input_dims),
        "ranks_16x41mb": (workdir / f"ranks_{tag}" / "run", "load_run", None),
        "deep_nest_100k_ops": (workdir / f"deep_nest_{tag}.json", "ops", _deep_nest),
        "deep_nest_100k_chain": (workdir / f"deep_nest_{tag}.json", "chain:level0", _deep_nest),
        "one_event_70mb": (workdir / f"one_event_{tag}.json", "load", _one_event),
    }
    probes = {}
    for name in names:
        path, action, build = plan[name]
        if name == "ranks_16x41mb":
            info = _ranks(path, quick, source)
        elif not path.exists():
            info = build(path, quick)
        else:
            info = {}
        size = sum(f.stat().st_size for f in path.iterdir()) if path.is_dir() else path.stat().st_size
        probes[name] = {"path": path, "action": action, "bytes": size, **info}
    return probes
