"""The course's critical path against HolisticTraceAnalysis's, on the same traces and windows.

    python benchmarks/critical_path_vs_hta.py --hta-python /tmp/hta-venv/bin/python \
        --json benchmarks/results/cpu_critical_path_vs_hta.json

For each case (a trace from tests/data and a window: HTA's annotation and instance), the course's
:func:`helpers.diagnose.critical_path` runs here, and HTA's ``critical_path_analysis`` runs in a
child process of the given Python (a virtual environment with HolisticTraceAnalysis installed:
it is not a dependency of the course). HTA's path length is the sum of the weights of the edges on
its longest path (its ``get_critical_path_breakdown``); the course's is the sum of its pieces.
HTA gives the dependency between consecutive top-level operators of a thread no weight (the time
between them, Python or untraced code, is not on its path) and gives synchronisation edges no
weight: the comparable course figure is the path's length without its "cpu gap" and "sync wait"
pieces (``comparable_us``); the course's full length (``length_us``) is the window's.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DATA = ROOT / "tests" / "data"
# (trace file, HTA annotation ("" = whole trace), instance)
CASES = [
    ("hta__critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz",
     "[param|pytorch.model.alex_net|0|0|0|measure|forward]", 1),
    ("hta__critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz",
     "[param|pytorch.model.alex_net|0|0|0|measure|forward]", 0),
    ("hta__critical_path_cuda_event_sync_multi_stream_event_sync_trace.json.gz", "", None),
    ("kineto__plugin_samples_resnet50_num_workers_0_worker0.pt.trace.json.gz", "ProfilerStep", 1),
    ("hta__cupti_profiler_benchmark_result_924719_1679055439_trace.json.gz", "", None),
]  # fmt: skip

HTA_CHILD = r"""
import json, logging, sys, time
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
folder, annotation, instance = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
t0 = time.perf_counter()
analyzer = TraceAnalysis(trace_dir=folder)
graph, ok = analyzer.critical_path_analysis(rank=0, annotation=annotation, instance_id=instance)
breakdown = graph.get_critical_path_breakdown()
print(json.dumps({"ok": bool(ok), "length_us": float(breakdown["duration"].sum()),
                  "edges": int(len(breakdown)), "seconds": time.perf_counter() - t0}))
"""


def hta_length(python: str, trace: Path, annotation: str, instance) -> dict:
    """HTA's critical path length for one window, from a child process (HTA wants a folder per run)."""
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(trace, Path(tmp) / trace.name)
        out = subprocess.run(
            [python, "-c", HTA_CHILD, tmp, annotation, json.dumps(instance)], capture_output=True, text=True
        )
    if out.returncode != 0:
        return {"ok": False, "error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def ours(trace_path: Path, annotation: str, instance) -> dict:
    import helpers
    from helpers.diagnose import critical_path, path_summary

    trace = helpers.load_trace(trace_path)
    t0 = time.perf_counter()
    if annotation:
        path = critical_path(trace, annotation=annotation, instance=instance or 0)
    else:
        path = critical_path(trace)
    by_kind = path_summary(path).set_index("kind")["us"].round(1).to_dict()
    comparable = float(path.loc[~path["kind"].isin(["cpu gap", "sync wait"]), "duration_us"].sum())
    return {"length_us": path.attrs["length_us"], "comparable_us": comparable, "pieces": len(path), "seconds": time.perf_counter() - t0,
            "by_kind_us": by_kind}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hta-python", default="/tmp/hta-venv/bin/python", help="Python with HTA installed")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args(argv)
    hta_version = subprocess.run(
        [args.hta_python, "-c", "import importlib.metadata as m; print(m.version('HolisticTraceAnalysis'))"],
        capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    rows = []
    for name, annotation, instance in CASES:
        mine = ours(DATA / name, annotation, instance)
        theirs = hta_length(args.hta_python, DATA / name, annotation, instance)
        row = {"trace": name, "annotation": annotation or "(whole trace)", "instance": instance,
               "course": mine, "hta": theirs}  # fmt: skip
        if theirs.get("ok") and theirs.get("length_us"):
            row["difference_pct"] = 100.0 * (mine["comparable_us"] - theirs["length_us"]) / theirs["length_us"]
        rows.append(row)
        print(f"{name[:60]:60s} {annotation[:30]:30s} course {mine['comparable_us']:>12,.0f} us (window {mine['length_us']:,.0f})  "
              f"HTA {theirs.get('length_us', float('nan')):>12,.0f} us  {row.get('difference_pct', float('nan')):+.2f} %")  # fmt: skip
    import pandas

    result = {
        "what": "critical path length, course (helpers.diagnose.critical_path) vs HolisticTraceAnalysis",
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.node()} ({platform.machine()}, {platform.system()}), CPU only",
        "python": platform.python_version(),
        "pandas": pandas.__version__,
        "hta": hta_version,
        "cases": rows,
    }
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
