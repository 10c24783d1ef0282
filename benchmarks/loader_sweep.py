"""Peak memory and CPU time of `helpers.load_trace` against HolisticTraceAnalysis over trace sizes.

    python benchmarks/loader_sweep.py --json benchmarks/results/cpu_loader_sweep.json
    python benchmarks/loader_sweep.py --sizes-mb 1 5 --no-real   # a quick look

The traces: every real trace of the course's training set (``tests/data``, ``traces/`` and
``../shared/traces/thirdparty``) whose JSON text is at least ``--min-mb`` (duplicates by content
counted once), plus traces tiled from the H200 eager-MLP trace to about each of ``--sizes-mb``
megabytes of JSON (built as in ``trace_loading.py``). Each trace is measured by the children of
``trace_loading.py``: helpers (``load_trace``, ``kernels()``, ``ops()``) and HTA
(``TraceAnalysis`` on a folder holding only that trace), each in its own fresh process, one after
the other; ``--repeat`` runs of each, keeping the highest peak RSS and the lowest CPU seconds.
Each child also reports its peak RSS after its imports (helpers + pandas; HTA's
``hta.trace_analysis``), so the table shows the loaders' own memory beside the totals.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import trace_loading as tl  # noqa: E402  (the child programs and the measuring live there)

REAL_DIRS = [tl.ROOT / "tests" / "data", tl.ROOT / "traces", tl.ROOT.parent / "shared" / "traces" / "thirdparty"]
DEFAULT_WORKDIR = tl.DEFAULT_WORKDIR.parent / "course-loader-sweep"
BYTES_PER_EVENT = 254  # of the tiled H200 MLP trace: sets how many events give a target size


def real_traces(min_bytes: int) -> list[tuple[str, Path, int]]:
    """(name, path, JSON bytes) of each distinct real trace at least `min_bytes` of JSON."""
    seen: dict[str, tuple[str, Path, int]] = {}
    for folder in REAL_DIRS:
        for path in sorted(folder.glob("*.json.gz")):
            data = gzip.decompress(path.read_bytes())
            digest = hashlib.sha256(data).hexdigest()
            if len(data) >= min_bytes and digest not in seen:
                seen[digest] = (path.name.removesuffix(".json.gz"), path, len(data))
    return sorted(seen.values(), key=lambda t: t[2])


def hta_folder(workdir: Path, name: str, path: Path) -> Path:
    """A folder holding only `path` (HTA reads every trace file of its folder)."""
    folder = workdir / "hta" / name
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / path.name
    if not link.exists():
        link.symlink_to(path.resolve())
    return folder


def measure(label: str, python: str, code: str, args: list[str], repeat: int, env: dict[str, str] | None) -> dict:
    """`repeat` runs of one child: highest peak RSS, lowest CPU seconds, or the reason it failed."""
    runs = []
    for _ in range(repeat):
        try:
            runs.append(tl.run_child(python, code, args, env))
        except RuntimeError as exc:  # a loader that refuses a trace: keep its last words
            tail = [line for line in str(exc).splitlines() if line.strip()]
            return {"failed": True, "why": tail[-1][:300] if tail else "no message"}
    out = {
        "peak_rss_mb": round(max(r["peak_rss_mb"] for r in runs), 1),
        "import_rss_mb": round(max(r["import_rss_mb"] for r in runs), 1),
        "cpu_s": round(min(r["cpu_s"] for r in runs), 2),
        "load_s": round(min(r["load_s"] + r["tables_s"] for r in runs), 2),
        "events": runs[0]["events"],
        "all_peak_rss_mb": [round(r["peak_rss_mb"], 1) for r in runs],
        "all_cpu_s": [round(r["cpu_s"], 2) for r in runs],
        "all_ru_maxrss_mb": [round(r["ru_maxrss_mb"], 1) for r in runs],
    }
    if "torch_imported" in runs[0]:
        out["torch_imported"] = runs[0]["torch_imported"]
    tl.log(
        f"  {label}: {out['peak_rss_mb']:.0f} MB peak ({out['import_rss_mb']:.0f} after imports), {out['cpu_s']} CPU s"
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", type=float, nargs="*", default=[1, 5, 20, 50, 100, 200])
    parser.add_argument("--min-mb", type=float, default=1.0, help="smallest real trace, MB of JSON")
    parser.add_argument("--no-real", action="store_true", help="only the tiled traces")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    parser.add_argument("--hta-venv", type=Path, default=tl.DEFAULT_HTA_VENV)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    traces: list[dict[str, Any]] = []
    if not args.no_real:
        for name, path, size in real_traces(int(args.min_mb * 1e6)):
            traces.append({"name": name, "kind": "real", "path": path, "json_bytes": size})
    for mb in args.sizes_mb:
        name = f"tiled_{mb:g}mb"
        path = args.workdir / "tiled" / f"{name}.json"
        n_events = int(mb * 1e6 / BYTES_PER_EVENT)
        recipe_file = path.with_suffix(".recipe.json")
        recipe = {"source": str(tl.DEFAULT_SOURCE), "events": n_events, "steps": 10}
        built = json.loads(recipe_file.read_text()) if recipe_file.exists() and path.exists() else None
        if built is None or built.get("recipe") != recipe:
            tl.log(f"building {name} ({n_events:,} events) ...")
            built = tl.build_big_trace(tl.DEFAULT_SOURCE, path, n_events, 10)
            built["recipe"] = recipe
            recipe_file.write_text(json.dumps(built))
        traces.append({"name": name, "kind": "tiled", "path": path, "json_bytes": path.stat().st_size})

    hta_python = str(tl.ensure_hta(args.hta_venv))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(tl.ROOT), os.environ.get("PYTHONPATH", "")) if p))
    rows = []
    for t in traces:
        tl.log(f"{t['name']} ({t['json_bytes'] / 1e6:.1f} MB of JSON)")
        folder = hta_folder(args.workdir, t["name"], t["path"])
        helpers_row = measure("helpers", sys.executable, tl.HELPERS_CHILD, [str(t["path"]), "auto"], args.repeat, env)
        hta_row = measure("HTA", hta_python, tl.HTA_CHILD, [str(folder)], args.repeat, None)
        row = {
            "trace": t["name"],
            "kind": t["kind"],
            "file": os.path.relpath(t["path"], tl.ROOT) if t["kind"] == "real" else t["path"].name,
            "json_mb": round(t["json_bytes"] / 1e6, 2),
            "helpers": helpers_row,
            "hta": hta_row,
        }
        if not helpers_row.get("failed") and not hta_row.get("failed"):
            row["peak_ratio"] = round(helpers_row["peak_rss_mb"] / hta_row["peak_rss_mb"], 3)
            own = helpers_row["peak_rss_mb"] - helpers_row["import_rss_mb"]
            hta_own = hta_row["peak_rss_mb"] - hta_row["import_rss_mb"]
            row["own_peak_ratio"] = round(own / hta_own, 3) if hta_own > 0 else None
            row["cpu_ratio"] = round(helpers_row["cpu_s"] / hta_row["cpu_s"], 3)
        rows.append(row)

    print()
    print(f"{'trace':<58}{'JSON MB':>9}{'helpers MB':>12}{'HTA MB':>9}{'ratio':>7}{'own ratio':>11}{'CPU ratio':>11}")
    for r in rows:
        h, a = r["helpers"], r["hta"]
        hm = "failed" if h.get("failed") else f"{h['peak_rss_mb']:.0f}"
        am = "failed" if a.get("failed") else f"{a['peak_rss_mb']:.0f}"
        ratio = f"{r['peak_ratio']:.2f}" if "peak_ratio" in r else "-"
        own = f"{r['own_peak_ratio']:.2f}" if r.get("own_peak_ratio") is not None else "-"
        cpu = f"{r['cpu_ratio']:.2f}" if "cpu_ratio" in r else "-"
        print(f"{r['trace'][:57]:<58}{r['json_mb']:>9.1f}{hm:>12}{am:>9}{ratio:>7}{own:>11}{cpu:>11}")
    for r in rows:
        for side in ("helpers", "hta"):
            if r[side].get("failed"):
                print(f"{side} failed on {r['trace']}: {r[side]['why']}")
    compared = [r for r in rows if "peak_ratio" in r]
    met = all(r["peak_ratio"] <= 1.0 for r in compared)
    print(f"peak memory helpers <= HTA on every trace both load: {'MET' if met else 'NOT MET'}")

    if args.json:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=tl.ROOT
        ).stdout.strip()
        dirty = bool(
            subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True, cwd=tl.ROOT).stdout
        )
        import importlib.metadata as md

        summary = {
            "what": "peak RSS and CPU seconds of helpers.load_trace (+kernels(), ops()) and HTA's TraceAnalysis, "
            "each in a fresh child process, over trace sizes (issue 24 item 5)",
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs (shared), {platform.platform()}",
            "python": platform.python_version(),
            "versions": {
                "helpers_pandas": md.version("pandas"),
                "helpers_numpy": md.version("numpy"),
                "hta": tl.HTA_VERSION,
                "hta_python": subprocess.run(
                    [hta_python, "-c", "import platform, pandas; print(platform.python_version(), pandas.__version__)"],
                    capture_output=True,
                    text=True,
                ).stdout.split(),
            },
            "commit": commit + (" (with uncommitted changes)" if dirty else ""),
            "command": "python benchmarks/loader_sweep.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "method": "each child reports its own peak resident memory (VmHWM in /proc/self/status; ru_maxrss "
            "from os.wait4 would also count the parent's memory at fork, kept as all_ru_maxrss_mb) and its "
            "user+system CPU; max peak and min CPU over the repeats. "
            "import_rss_mb: the child's peak RSS after its imports, before reading the trace.",
            "repeat": args.repeat,
            "peak_target_met": met,
            "rows": rows,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
