"""Hostile trace files against both loading paths: time, peak memory and the message a user gets.

    python benchmarks/hostile_inputs.py --json benchmarks/results/cpu_hostile_inputs.json
    python benchmarks/hostile_inputs.py --helpers /work/main --timeout 90 ...   # another checkout ("before")
    python benchmarks/hostile_inputs.py --quick                                 # small files (CI)

What it does:
1. Builds the probes (damaged files and gzip bombs) in a temporary folder (never committed):
   - ``damaged_80mb``: an 80 MB Kineto trace (the H200 eager-MLP trace tiled, one event per line)
     with one byte changed at 60 MB (the opening quote of a key becomes ``#``);
   - ``bomb_spaces``: a 2 MB gzip file holding ``{"traceEvents": [`` and 2 GiB of spaces;
   - ``bomb_events``: a 2 MB gzip file holding ~600 MB of tiny valid events (the kind that would
     become gigabytes of tables if it were read to the end);
   - ``bomb_zeros``: a 2 MB gzip file of 2 GiB of zero bytes.
2. Loads each with ``helpers.load_trace(path, keep_document=True)`` (the whole-file path) and
   ``keep_document=False`` (the streamed path), each in a fresh Python process under a time
   limit, and reads that process's wall time and peak resident memory from the operating system
   (``os.wait4``). The child reports what happened: the error type and message, or what loaded.
3. Prints a table and checks the target: every probe answered with a clear error in under 10 s
   and under 1 GB of peak memory.
4. Round 2, the resource probes of ``benchmarks/hostile_resources.py``: 12M events from
   a ~30 MB gzip, 200 MB of ``Input Dims`` on 8 events, 16 rank files of ~41 MB, a 100k-deep nest
   (``ops()``, ``chain()``), one 70 MB event; each answered by one call in a child process, whose
   outcome must be the expected one (a clear error, or the table with its notes) within the same
   targets. ``--probes`` picks among both rounds (default: all).

``--helpers DIR`` imports ``helpers`` from another checkout, for the numbers before a change
(children past ``--timeout`` are killed and reported as such; ``--memory-limit`` caps their
address space so an old loader cannot take the machine down).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import resource
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _folder in (ROOT, ROOT / "benchmarks"):  # helpers, and the scripts beside this one (also when imported)
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

from common import log  # noqa: E402
from hostile_resources import CHILD as RESOURCE_CHILD  # noqa: E402
from hostile_resources import EXPECTED, RESOURCE_PROBES, build_resource_probes  # noqa: E402
from trace_loading import PEAK_RSS, build_big_trace  # noqa: E402

SOURCE = ROOT / "traces" / "h200_mlp_eager.json.gz"
TARGET_S, TARGET_MB = 10.0, 1000.0
EVENT = b'{"ph":"X","cat":"cpu_op","name":"aten::mm","ts":1,"dur":1,"pid":1,"tid":1},'

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import helpers
path, keep = sys.argv[1], sys.argv[2] == "whole"
t1 = time.perf_counter()
try:
    trace = helpers.load_trace(path, keep_document=keep)
    report = {"outcome": "loaded", "message": f"{len(trace.events):,} events; notes: {trace.notes[:2]}"}
except BaseException as err:
    report = {"outcome": type(err).__name__, "message": str(err)}
report.update(load_s=time.perf_counter() - t1, import_s=t1 - t0, own_peak_rss_mb=peak_mb())
print(json.dumps(report))
"""


def _peak_of(pid: int) -> float | None:
    """A running process's peak resident memory so far (VmHWM, MB); None without /proc."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration, ValueError):
        return None


def build_damaged(path: Path, size: int) -> dict[str, Any]:
    """A tiled trace of about `size` bytes with one byte changed at 3/4 of its length."""
    built = build_big_trace(SOURCE, path, n_events=max(2_000, size // 252))  # ~252 bytes per event
    data = bytearray(path.read_bytes())
    where = data.index(b'"name"', int(len(data) * 0.75))
    data[where : where + 1] = b"#"
    path.write_bytes(bytes(data))
    return {"bytes": len(data), "events": built["events"], "changed_byte": where}


def build_bomb(path: Path, head: bytes, block: bytes, text_bytes: int, tail: bytes) -> dict[str, Any]:
    """A gzip file whose text is `head`, `block` repeated up to `text_bytes`, then `tail`."""
    count = max(1, text_bytes // len(block))
    with gzip.open(path, "wb", compresslevel=9) as gz:
        gz.write(head)
        for _ in range(count):
            gz.write(block)
        gz.write(tail)
    return {"bytes": path.stat().st_size, "text_bytes": len(head) + count * len(block) + len(tail)}


PROBES = ("damaged_80mb", "bomb_spaces", "bomb_events", "bomb_zeros")


def build_probes(workdir: Path, quick: bool, names: tuple[str, ...] = PROBES) -> dict[str, dict[str, Any]]:
    scale = 1 / 8 if quick else 1.0  # bombs stay past the 32 MB before the ratio check starts
    workdir.mkdir(parents=True, exist_ok=True)
    probes = {}
    log("building the probes ...")
    if "damaged_80mb" in names:
        path = workdir / "damaged_80mb.json"
        probes["damaged_80mb"] = {"path": path, **build_damaged(path, int(80e6 / 32 if quick else 80e6))}
    spaces = b" " * (1 << 20)
    events = EVENT * ((1 << 20) // len(EVENT))
    recipes = {
        "bomb_spaces": (b'{"traceEvents": [', spaces, int((2 << 30) * scale), b"]}"),
        "bomb_events": (b'{"traceEvents": [', events, int((600 << 20) * scale), EVENT[:-1] + b"]}"),
        "bomb_zeros": (b"", b"\0" * (1 << 20), int((2 << 30) * scale), b""),
    }
    for name, (head, block, size, tail) in recipes.items():
        if name not in names:
            continue
        path = workdir / f"{name}.json.gz"
        probes[name] = {"path": path, **build_bomb(path, head, block, size, tail)}
    for name, p in probes.items():
        text = p.get("text_bytes", p["bytes"])
        log(f"  {name}: {p['bytes'] / 1e6:.1f} MB on disk, {text / 1e6:,.0f} MB of text")
    return probes


def run_child(
    helpers_root: Path, path: Path, mode: str, timeout: float, memory_limit: int, script: str = CHILD
) -> dict[str, Any]:
    """One load in a fresh interpreter: its report, wall time and peak RSS (also when killed at `timeout`).

    The peak is the child's own (VmHWM, see ``trace_loading.PEAK_RSS``; the last one read while it ran when it
    is killed): wait4's ru_maxrss would also count this process's memory at the fork.
    """

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))

    from helpers.paths import env_with_first_on_path

    env = env_with_first_on_path(helpers_root)
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", PEAK_RSS + script, str(path), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=str(helpers_root),
        preexec_fn=limit,
    )
    out, timed_out, seen_peak = b"", False, None
    while True:
        seen_peak = _peak_of(proc.pid) or seen_peak
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() - start > timeout:
            proc.kill()
            _, status, usage = os.wait4(proc.pid, 0)
            timed_out = True
            break
        ready, _, _ = select.select([proc.stdout], [], [], 0.05)
        if ready:
            out += os.read(proc.stdout.fileno(), 1 << 16)
    wall = time.perf_counter() - start
    out += proc.stdout.read()
    proc.stdout.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    lines = out.decode(errors="replace").strip().splitlines()
    if timed_out:
        report = {"outcome": "no answer", "message": f"killed after {timeout:g} s"}
    elif lines:
        report = json.loads(lines[-1])
    else:
        report = {"outcome": f"exit {proc.returncode}", "message": "the process died without a report"}
    peak = report.pop("own_peak_rss_mb", None) or seen_peak or usage.ru_maxrss / 1024
    report.update(wall_s=round(wall, 2), peak_rss_mb=round(peak), timed_out=timed_out)
    return report


def verdict(row: dict[str, Any]) -> bool:
    """A clear error (a ValueError or one of its kinds, with words), fast and small.

    A round-2 probe must give one of its :data:`EXPECTED` outcomes (an error with words, or done).
    """
    wanted = EXPECTED.get(row["probe"], ("ValueError", "TraceTooLargeError"))
    clear = row["outcome"] in wanted and (row["outcome"] == "done" or len(row["message"]) > 40)
    return clear and row["wall_s"] < TARGET_S and row["peak_rss_mb"] < TARGET_MB


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "course-hostile-inputs")
    parser.add_argument("--helpers", type=Path, default=ROOT, help="checkout to import helpers from")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds before a child is killed")
    parser.add_argument("--memory-limit", type=float, default=6.0, help="GiB of address space per child")
    parser.add_argument("--quick", action="store_true", help="small probes (1/32 and 1/8 of the sizes): a CI check")
    every = PROBES + RESOURCE_PROBES
    parser.add_argument("--probes", default=",".join(every), help=f"which probes, of {', '.join(every)}")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument(
        "--note", default="", help="free text stored with the results (e.g. which code --helpers holds)"
    )
    args = parser.parse_args(argv)
    names = tuple(p.strip() for p in args.probes.split(",") if p.strip())
    if not names or set(names) - set(every):
        parser.error(f"--probes takes names among {', '.join(every)}, got {args.probes!r}")

    probes = build_probes(args.workdir, args.quick, tuple(n for n in names if n in PROBES))
    log("building the resource probes (once; kept in the work folder) ...")
    resources = build_resource_probes(args.workdir, args.quick, tuple(n for n in names if n in RESOURCE_PROBES), SOURCE)
    runs = [(name, probe, mode, CHILD) for name, probe in probes.items() for mode in ("whole", "streamed")]
    runs += [(name, probe, probe["action"], RESOURCE_CHILD) for name, probe in resources.items()]
    probes.update(resources)
    rows = []
    for name, probe, mode, script in runs:
        log(f"{name}, {mode} ...")
        row = run_child(args.helpers, probe["path"], mode, args.timeout, int(args.memory_limit * 2**30), script)
        row.update(probe=name, path=mode)
        row["target_met"] = verdict(row)
        rows.append(row)
        log(f"  {row['outcome']} in {row['wall_s']:.2f} s, {row['peak_rss_mb']} MB: {row['message'][:150]}")

    print()
    print(
        f"helpers from: {args.helpers}; machine: {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, load {os.getloadavg()[0]:.1f}"
    )
    print(f"{'probe':<22}{'path':<14}{'outcome':<20}{'wall s':>8}{'peak MB':>9}  target  message")
    for r in rows:
        print(
            f"{r['probe']:<22}{r['path']:<14}{r['outcome']:<20}{r['wall_s']:>8.2f}{r['peak_rss_mb']:>9}  "
            f"{'met' if r['target_met'] else 'NOT':<6}  {r['message'][:110]}"
        )
    met = all(r["target_met"] for r in rows)
    print(
        f"\ntarget (a clear error in < {TARGET_S:g} s and < {TARGET_MB:g} MB for every probe): {'MET' if met else 'NOT MET'}"
    )
    if args.json:
        import torch

        from helpers.measure.device import provenance

        commit = subprocess.run(
            ["git", "-C", str(args.helpers), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
        summary = {
            "provenance": provenance(torch.device("cpu")),
            "helpers_from": str(args.helpers),
            "helpers_commit": commit or None,  # the code measured (provenance's commit is this script's)
            "note": args.note,
            "quick": args.quick,
            "timeout_s": args.timeout,
            "probes": {k: {kk: str(vv) if kk == "path" else vv for kk, vv in v.items()} for k, v in probes.items()},
            "rows": rows,
            "target": {"seconds": TARGET_S, "peak_mb": TARGET_MB},
            "target_met": met,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
