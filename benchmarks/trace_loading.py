"""Load a million-event Kineto trace with `helpers` and with HolisticTraceAnalysis, side by side.

    python benchmarks/trace_loading.py                        # build the big trace, install HTA, measure both
    python benchmarks/trace_loading.py --repeat 2 --json benchmarks/results/cpu_trace_loading.json
    python benchmarks/trace_loading.py --parser orjson        # helpers without msgspec (its fallback path)
    python benchmarks/trace_loading.py --skip-hta             # only helpers (no HTA install)

What it does, in one run:
1. Builds a ~1,000,000-event trace (~250 MB of JSON, one event per line; never committed) by
   tiling a real trace (default: the committed H200 eager-MLP trace, torch 2.11): every copy is
   shifted in time and gets fresh ``External id``/``correlation``/flow ids, so links stay
   one-to-one as in one long recording; metadata events are written once. The copies are grouped
   into ``--steps`` profiler steps (default 10): few steps with many events each, like a real
   recording of a big model. (Each copy keeping its own 3 steps would make ~16,000 steps; HTA
   0.5.0 assigns steps with a Python loop over every step for every event, and ran for more than
   20 minutes on that shape before we stopped it.)
2. Installs HolisticTraceAnalysis 0.5.0 into its own virtual environment (default
   ``/tmp/course-hta-venv``; it is not a dependency of the course).
3. Runs each loader in a fresh Python process, one after the other, and reads that process's
   wall time and CPU time from the operating system (``os.wait4``). The child reports its own peak
   resident memory (``VmHWM`` in ``/proc/self/status``: the interpreter, imports and everything
   the loader allocated; wait4's ``ru_maxrss`` would also count the parent's memory at the fork)
   and the time of the load call alone.
   - helpers: ``helpers.load_trace(path)`` then ``Trace.kernels()`` and ``Trace.ops()``.
   - HTA: ``TraceAnalysis(trace_dir=...)``, which parses the trace into its DataFrame.
4. Prints the table and the ratios helpers / HTA (target: time <= 1/3, peak memory <= 1/2).

The numbers, with their machine: benchmarks/results/ (``--parser orjson`` measures the loader
without msgspec). Other work on a shared machine inflates wall times; the CPU seconds column is
less affected.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

HTA_VERSION = "0.5.0"
DEFAULT_SOURCE = ROOT / "traces" / "h200_mlp_eager.json.gz"
DEFAULT_WORKDIR = Path(tempfile.gettempdir()) / "course-trace-bench"
DEFAULT_HTA_VENV = Path(tempfile.gettempdir()) / "course-hta-venv"

# Child programs: each prints one JSON line with its own timings and its own peak memory. The peak is
# the process's VmHWM: ru_maxrss from wait4 would also count the parent's resident memory at the
# fork (Linux carries the old address space's high-water mark through exec).
PEAK_RSS = r"""
import resource
def peak_mb():
    try:
        with open("/proc/self/status") as fh:
            return next(int(l.split()[1]) for l in fh if l.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):  # no /proc (macOS): ru_maxrss, which may include the parent's
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
"""
HELPERS_CHILD = (
    PEAK_RSS
    + r"""
import json, sys, time
t0 = time.perf_counter()
import helpers
import helpers.trace.events
import pandas  # the baseline below: interpreter, helpers and pandas, before any trace is read
import_rss_mb = peak_mb()
if sys.argv[2] == "orjson":  # measure the fallback used when msgspec is not installed
    helpers.trace.events.decode_slice = None
parser = "msgspec" if helpers.trace.events.decode_slice is not None else "orjson"
t1 = time.perf_counter()
trace = helpers.load_trace(sys.argv[1])
t2 = time.perf_counter()
kernels = trace.kernels(allow_empty=True)
try:
    ops = trace.ops()
except ValueError:  # a trace without operator events (CPU activity off): nothing to tabulate
    ops = ()
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "import_rss_mb": import_rss_mb, "load_s": t2 - t1, "tables_s": t3 - t2,
                  "events": len(trace.events), "kernels": len(kernels), "ops": len(ops), "steps": len(trace.steps),
                  "torch_imported": "torch" in sys.modules, "plotly_imported": "plotly" in sys.modules,
                  "parser": parser, "own_peak_rss_mb": peak_mb()}))
"""
)
HTA_CHILD = (
    PEAK_RSS
    + r"""
import json, logging, sys, time
logging.disable(logging.WARNING)
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
import_rss_mb = peak_mb()
t1 = time.perf_counter()
analysis = TraceAnalysis(trace_dir=sys.argv[1])
t2 = time.perf_counter()
frames = analysis.t.traces
rows = sum(len(df) for df in frames.values())
print(json.dumps({"import_s": t1 - t0, "import_rss_mb": import_rss_mb, "load_s": t2 - t1, "tables_s": 0.0,
                  "events": rows, "own_peak_rss_mb": peak_mb()}))
"""
)


def log(msg: str) -> None:
    print(msg, flush=True)


# --------------------------------------------------------------------------- the big trace
def _span(events: list[dict]) -> tuple[float, float]:
    starts = [float(e["ts"]) for e in events if isinstance(e.get("ts"), (int, float))]
    ends = [float(e["ts"]) + float(e.get("dur", 0) or 0) for e in events if isinstance(e.get("ts"), (int, float))]
    return min(starts), max(ends)


def _max_int(events: list[dict], getter) -> int:
    best = 0
    for e in events:
        v = getter(e)
        if isinstance(v, int) and not isinstance(v, bool):
            best = max(best, v)
    return best


def build_big_trace(source: Path, target: Path, n_events: int, steps: int = 10) -> dict[str, Any]:
    """Tile `source` until the trace holds at least `n_events` events; write plain JSON to `target`.

    The copies are grouped into `steps` profiler steps (``ProfilerStep#1..steps`` spanning
    consecutive copies), as in a real long recording of a big model: few steps, many events in
    each. (Keeping every copy's own steps would give ~16,000 steps, a shape that no profile has
    and that makes HTA's per-step loop run for hours; see the module docstring.)
    """
    import orjson

    from helpers.trace import files as tracefile

    doc = tracefile.read_document(source)
    events = [e for e in doc.pop("traceEvents") if isinstance(e, dict)]
    is_meta = [e.get("ph") in ("M", "i") or e.get("cat") in ("Trace", "trace") for e in events]
    meta = [e for e, m in zip(events, is_meta) if m]
    body = [e for e, m in zip(events, is_meta) if not m]
    step_events = [e for e in body if str(e.get("name", "")).startswith("ProfilerStep#")]
    body = [e for e in body if not str(e.get("name", "")).startswith("ProfilerStep#")]
    t0, t1 = _span(body)
    shift_t = (t1 - t0) + 50.0  # a gap between copies
    ext_span = _max_int(body, lambda e: (e.get("args") or {}).get("External id")) + 1
    corr_span = (
        max(
            _max_int(body, lambda e: (e.get("args") or {}).get("correlation")),
            _max_int(body, lambda e: e.get("id") if e.get("ph") in ("s", "f") else None),
        )
        + 1
    )
    copies = max(1, -(-(n_events - len(meta) - steps) // len(body)))
    steps = max(1, min(steps, copies))
    template = (
        step_events[0]
        if step_events
        else {"ph": "X", "cat": "user_annotation", "pid": body[0].get("pid"), "tid": body[0].get("tid"), "args": {}}
    )

    doc.pop("traceName", None)
    doc["distributedInfo"] = {"backend": "nccl", "rank": 0, "world_size": 1}  # HTA reads the rank from here
    provenance = doc.pop("course_provenance", None)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    written = 0
    bounds = [round(i * copies / steps) for i in range(steps + 1)]  # copies [bounds[j], bounds[j+1]) form step j+1
    with open(tmp, "wb") as fh:
        head = orjson.dumps(doc, option=orjson.OPT_INDENT_2)
        fh.write(head[:-2].rstrip() + b',\n  "traceEvents": [\n')
        first = True

        def emit(e: dict) -> None:
            nonlocal first, written
            # one event per line: close in size to the bytes per event of a Kineto file (~215 B)
            fh.write((b"" if first else b",\n") + orjson.dumps(e))
            first = False
            written += 1

        for e in meta:
            emit(e)
        for k in range(copies):
            if k in bounds[:-1]:
                j = bounds.index(k)
                step = dict(
                    template,
                    name=f"ProfilerStep#{j + 1}",
                    ts=t0 + k * shift_t - 1.0,
                    dur=(bounds[j + 1] - k) * shift_t - 50.0 + 2.0,
                    args={"External id": ext_span * copies + j + 1, "Record function id": 0},
                )
                emit(step)
            for e in body:
                c = dict(e)
                c["ts"] = e["ts"] + k * shift_t
                args = e.get("args")
                if isinstance(args, dict):
                    a = dict(args)
                    if isinstance(a.get("External id"), int):
                        a["External id"] += k * ext_span
                    if isinstance(a.get("correlation"), int):
                        a["correlation"] += k * corr_span
                    c["args"] = a
                if c.get("ph") in ("s", "f") and isinstance(c.get("id"), int):
                    c["id"] += k * corr_span
                emit(c)
        tail = {"traceName": str(target)}
        if provenance is not None:
            tail["course_provenance"] = {**provenance, "label": "tiled_" + str(provenance.get("label", "trace"))}
        fh.write(b"\n  ],\n" + orjson.dumps(tail, option=orjson.OPT_INDENT_2)[1:])
    os.replace(tmp, target)
    return {"source": str(source), "copies": copies, "steps": steps, "events": written, "bytes": target.stat().st_size}


# --------------------------------------------------------------------------- HTA environment
def ensure_hta(venv: Path) -> Path:
    """A virtual environment with HolisticTraceAnalysis installed; returns its python."""
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import hta, importlib.metadata as m; print(m.version('HolisticTraceAnalysis'))"]
    if python.exists():
        ok = subprocess.run(probe, capture_output=True, text=True)
        if ok.returncode == 0 and ok.stdout.strip() == HTA_VERSION:
            return python
    log(f"installing HolisticTraceAnalysis {HTA_VERSION} into {venv} (its own venv; a few minutes the first time)")
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", f"HolisticTraceAnalysis=={HTA_VERSION}"], check=True
    )
    subprocess.run(probe, check=True, capture_output=True)
    return python


# --------------------------------------------------------------------------- measuring
def run_child(python: str, code: str, args: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run `code` in a fresh interpreter; wall time and peak RSS of that process, plus its own report."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [python, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=str(ROOT)
    )
    # wait4 returns the resource usage of exactly this child (ru_maxrss in KiB on Linux)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    out = proc.stdout.read().decode()
    err = proc.stderr.read().decode()
    proc.stdout.close()
    proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"child failed ({proc.returncode}):\n{err[-3000:]}")
    report = json.loads(out.strip().splitlines()[-1])
    # CPU time says how much work the loader did, whatever else ran on the machine meanwhile; the
    # peak is the child's own (see PEAK_RSS), ru_maxrss is kept to show what it would have said
    report.update({"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "ru_maxrss_mb": usage.ru_maxrss / 1024})
    report["peak_rss_mb"] = report.pop("own_peak_rss_mb", report["ru_maxrss_mb"])
    return report


def summarise(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Best-of-N (least disturbed by other work on the machine) for time; max for memory."""
    best = min(runs, key=lambda r: r["wall_s"])
    return {
        "loader": name,
        "runs": len(runs),
        "wall_s": best["wall_s"],
        "cpu_s": min(r["cpu_s"] for r in runs),
        "load_s": min(r["load_s"] for r in runs),
        "tables_s": best["tables_s"],
        "import_s": best["import_s"],
        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
        "events": best["events"],
        "parser": best.get("parser", ""),
        "all_wall_s": [round(r["wall_s"], 2) for r in runs],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="real trace to tile")
    parser.add_argument("--events", type=int, default=1_000_000, help="events in the big trace")
    parser.add_argument("--steps", type=int, default=10, help="profiler steps in the big trace")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR, help="where the big trace is written")
    parser.add_argument("--hta-venv", type=Path, default=DEFAULT_HTA_VENV)
    parser.add_argument("--repeat", type=int, default=1, help="runs per loader (best time, worst memory)")
    parser.add_argument("--skip-hta", action="store_true")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the big trace even if it exists")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument(
        "--parser",
        choices=["auto", "orjson"],
        default="auto",
        help="helpers' JSON path: auto (msgspec when installed) or the orjson fallback",
    )
    args = parser.parse_args(argv)

    trace_dir = args.workdir / "trace"  # HTA reads every trace file in this folder: nothing else goes there
    big = trace_dir / "rank0.json"
    recipe_file = args.workdir / "recipe.json"
    recipe = {"source": str(args.source), "events": args.events, "steps": args.steps}
    built = json.loads(recipe_file.read_text()) if recipe_file.exists() and big.exists() else None
    if args.rebuild or built is None or built.get("recipe") != recipe:
        log(f"building a {args.events:,}-event trace with {args.steps} profiler steps from {args.source.name} ...")
        t = time.perf_counter()
        built = build_big_trace(args.source, big, args.events, args.steps)
        built["recipe"] = recipe
        recipe_file.write_text(json.dumps(built))
        log(
            f"  {built['events']:,} events, {built['bytes'] / 1e6:.0f} MB, {built['copies']} copies, "
            f"{time.perf_counter() - t:.0f} s"
        )
    info_bytes = big.stat().st_size
    hta_python = None if args.skip_hta else ensure_hta(args.hta_venv)

    from helpers.paths import env_with_first_on_path  # here: the parent imports no helpers until a child runs

    env = env_with_first_on_path(ROOT)
    results = []
    for i in range(args.repeat):
        log(f"run {i + 1}/{args.repeat}: helpers ...")
        results.append(("helpers", run_child(sys.executable, HELPERS_CHILD, [str(big), args.parser], env)))
        log(f"  {results[-1][1]['wall_s']:.1f} s, {results[-1][1]['peak_rss_mb']:.0f} MB")
        if hta_python:
            log(f"run {i + 1}/{args.repeat}: HTA {HTA_VERSION} ...")
            results.append(("hta", run_child(str(hta_python), HTA_CHILD, [str(trace_dir)])))
            log(f"  {results[-1][1]['wall_s']:.1f} s, {results[-1][1]['peak_rss_mb']:.0f} MB")
    ours = summarise("helpers", [r for n, r in results if n == "helpers"])
    rows = [ours]
    print()
    print(f"trace: {big} ({info_bytes / 1e6:.0f} MB, {ours['events']:,} complete events in helpers' table)")
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(
        f"helpers parsed with {ours['parser']}; load uptime: {os.getloadavg()[0]:.1f} (other work on the machine "
        "inflates wall times; CPU seconds are less affected)"
    )
    header = (
        f"{'loader':<10}{'process wall s':>16}{'process CPU s':>15}{'load call s':>13}{'kernels+ops s':>15}"
        f"{'peak RSS MB':>13}"
    )
    print(header)
    if hta_python:
        theirs = summarise(f"HTA {HTA_VERSION}", [r for n, r in results if n == "hta"])
        rows.append(theirs)
    for r in rows:
        print(
            f"{r['loader']:<10}{r['wall_s']:>16.2f}{r['cpu_s']:>15.2f}{r['load_s']:>13.2f}{r['tables_s']:>15.2f}"
            f"{r['peak_rss_mb']:>13.0f}"
        )
    summary: dict[str, Any] = {
        "trace_bytes": info_bytes,
        "trace": built,
        "rows": rows,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d"),
    }
    if hta_python:
        t_ratio = ours["wall_s"] / theirs["wall_s"]
        cpu_ratio = ours["cpu_s"] / theirs["cpu_s"]
        load_ratio = (ours["load_s"] + ours["tables_s"]) / theirs["load_s"]
        m_ratio = ours["peak_rss_mb"] / theirs["peak_rss_mb"]
        print()
        print(f"time, whole process wall (helpers incl. kernels()+ops()) / HTA: {t_ratio:.3f}  (target <= 0.333)")
        print(f"time, whole process CPU seconds / HTA:                         {cpu_ratio:.3f}")
        print(f"time, load call + tables / HTA load call (wall):               {load_ratio:.3f}")
        print(f"peak memory helpers / HTA:                                     {m_ratio:.3f}  (target <= 0.5)")
        verdict = "MET" if t_ratio <= 1 / 3 and m_ratio <= 0.5 else "NOT MET"
        print(f"target {verdict}")
        summary.update(
            {
                "time_ratio": t_ratio,
                "cpu_time_ratio": cpu_ratio,
                "load_time_ratio": load_ratio,
                "memory_ratio": m_ratio,
                "target_met": verdict == "MET",
            }
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
