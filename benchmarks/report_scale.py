"""`python -m helpers report` on a ~1M-event trace: wall time and peak memory of the child process.

    python benchmarks/report_scale.py --json benchmarks/results/cpu_report_scale.json
    python benchmarks/report_scale.py --source traces/h200_decoder_decode.json.gz \
        --json benchmarks/results/cpu_report_scale_decode.json

Builds the big trace with :func:`benchmarks.trace_loading.build_big_trace` (tiles a reference trace, the H200
eager MLP by default, into ~1,000,000 events, 10 profiler steps; never committed; the decoder's decode step
has hundreds of elementwise chains and launch gaps per step, the worst case for the rules), then runs the report in a
child process under ``/usr/bin/time -v`` and reads its wall time and maximum resident set size.
Targets: under 30 s and under 1 GB on the 2-core machine.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.trace_loading import build_big_trace  # noqa: E402

SOURCE = ROOT / "traces" / "h200_mlp_eager.json.gz"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--source", type=Path, default=SOURCE, help="the reference trace to tile")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "course-report-bench")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    big = args.workdir / f"big_{args.source.name.split('.')[0]}_{args.events}.json"
    if not big.exists():
        build_big_trace(args.source, big, args.events)
    out = args.workdir / "report.html"
    done = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "helpers", "report", str(big), "-o", str(out)],
                          capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", done.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    h, m, s = (float(g or 0) for g in wall.groups()) if wall else (0, 0, float("nan"))
    result = {
        "what": "python -m helpers report on a tiled ~1M-event trace, child process under /usr/bin/time -v",
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.node()} ({platform.machine()}, {platform.system()}), CPU only",
        "python": platform.python_version(),
        "source": str(args.source.resolve().relative_to(ROOT))
        if args.source.resolve().is_relative_to(ROOT)
        else str(args.source),
        "events_target": args.events,
        "trace_mb": round(big.stat().st_size / 1e6, 1),
        "returncode": done.returncode,
        "wall_s": h * 3600 + m * 60 + s,
        "peak_rss_mb": int(rss.group(1)) / 1024 if rss else None,
        "html_mb": round(out.stat().st_size / 1e6, 2) if out.exists() else None,
        "progress": [line for line in done.stderr.splitlines() if line.startswith("[report")],
    }
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0 if done.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
