"""Command-line pieces the benchmark scripts share, and the CUDA-graph timing only they use."""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

T0 = time.time()
ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "benchmarks" / "results"


def subject_parser(subject: str, doc: str, device_help: str, quick_help: str) -> argparse.ArgumentParser:
    """The command line every subject shares: ``python -m benchmarks <subject>``, its module docstring
    as help, ``--device`` (cuda or cpu) and ``--quick`` (the CI smoke run)."""
    ap = argparse.ArgumentParser(
        prog=f"python -m benchmarks {subject}",
        description=doc.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=doc,
    )
    ap.add_argument("--device", choices=["cuda", "cpu"], default=None, help=device_help)
    ap.add_argument("--quick", action="store_true", help=quick_help)
    return ap


def log(msg: str) -> None:
    """A progress line with the seconds since start (flushed: output may be piped)."""
    print(f"[{time.time() - T0:6.1f}s] {msg}", flush=True)


def write_json(path: Path, data: Any) -> None:
    """`data` as indented JSON at `path`, written whole or not at all (a reader never sees half a file)."""
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str) + "\n")
    tmp.replace(path)


def iter_sizes(text: str) -> list[int]:
    """Parse "128,256,512" into a list of ints (ValueError with the bad item)."""
    out = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if not item.isdigit():
            raise ValueError(f"not a size: {item!r}")
        out.append(int(item))
    return out


def default_out_allowed(result_device: str, out: Path) -> bool:
    """True unless `out` is named ``h200_*`` and the device is not an H200 (never file CPU numbers as H200's)."""
    return not (out.name.startswith("h200_") and "H200" not in result_device)


def fmt(v: Any, spec: str) -> str:
    """`v` formatted with `spec`, or "-" for a missing or NaN value."""
    return format(v, spec) if isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v)) else "-"


def variants_table(result: Mapping[str, Any]) -> str:
    """The tables of an MLP benchmark result as text (what the command line prints at the end)."""
    import pandas as pd

    from .mlp.results import BenchResults
    from .mlp.targets import check_targets

    r = BenchResults(result, source="live")
    c = r.ceilings
    lines = [f"{r.label}", f"ceilings: copy {c.copy_tbps:.3g} TB/s, matmul {c.matmul_tflops:.3g} TFLOP/s"]
    head = (
        f"{'variant':22s} {'kern':>4s} {'kernel':>8s} {'graphed':>8s} {'e2e':>8s} {'sync':>8s} {'host ov':>8s} "
        f"{'enqueue':>8s} {'TFLOP/s':>8s} {'rel err':>8s}"
    )
    for shape in r.shape_names():
        s = r.data["shapes"][shape]
        d = s["shape"]
        lines += [
            "",
            f"{shape}: M={d['tokens']}, dim {d['dim']}, hidden {d['hidden']}, {s['dtype']} (us per call)",
            head,
        ]
        lines.append("-" * len(head))
        for name, v in s["variants"].items():
            if v.get("status") != "ok":
                lines.append(f"{name:22s} {v.get('status')}: {str(v.get('reason'))[:90]}")
                continue
            lines.append(
                f"{name:22s} {v['kernels_per_forward']:4d} {fmt(v.get('kernel_us'), '8.1f'):>8s} "
                f"{fmt(v.get('graphed_us'), '8.1f'):>8s} {fmt(v['e2e_nosync_us'], '8.1f'):>8s} "
                f"{fmt(v['e2e_sync_us'], '8.1f'):>8s} {fmt(v.get('host_overhead_us'), '8.1f'):>8s} "
                f"{fmt(v.get('enqueue_us'), '8.1f'):>8s} {fmt(v.get('achieved_tflops'), '8.3g'):>8s} "
                f"{fmt(v.get('rel_err'), '8.1e'):>8s}"
            )
        train = r.training(shape)
        if not train.empty:
            lines += ["", f"{shape} training (forward + backward):", train.round(4).to_string(index=False)]
    sweep = r.sweep()
    ok = sweep[sweep["status"] == "ok"]
    for metric in ("kernel_us", "e2e_nosync_us", "e2e_sync_us", "graphed_us"):
        if not ok.empty and ok[metric].notna().any():
            pivot = ok.pivot(index="m", columns="variant", values=metric)
            lines += ["", f"sweep: {metric} per forward", pivot.round(1).to_string()]
    targets = check_targets(r) if r.on_gpu else pd.DataFrame()
    if not targets.empty:
        lines += ["", "targets (issue 14):", targets.to_string(index=False)]
    return "\n".join(lines)


def device_and_out(device_arg: str | None, out: Path | None, default_out: Path) -> tuple[str, Path] | None:
    """The device to run on and the file to write, or None after printing why the run cannot start.

    `default_out` (an ``h200_*`` file) is used only on an H200; elsewhere ``--out`` is required, and
    a file named ``h200_*`` is refused for any other device.
    """
    import sys

    import torch

    device = device_arg or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        print("--device cuda: no CUDA GPU here. Use --device cpu --quick for the smoke run.", file=sys.stderr)
        return None
    name = torch.cuda.get_device_name(0) if device == "cuda" else "CPU"
    if out is None:
        if "H200" not in name:
            print(
                f"this machine ({name}) is not an H200: pass --out PATH ({default_out.name} holds H200 results only)",
                file=sys.stderr,
            )
            return None
        out = default_out
    if not default_out_allowed(name, out):
        print(f"refusing to write {name} results to {out}: files named h200_* hold H200 results only", file=sys.stderr)
        return None
    return device, out


def stored_table(frame: Any, about: str) -> dict[str, Any]:
    """A DataFrame as the {about, columns, rows} object a results file stores (NaN and inf as null)."""
    import numpy as np

    def cell(v: Any) -> Any:
        if isinstance(v, (np.integer,)):
            return int(v)
        if isinstance(v, (np.floating, float)):
            return float(v) if math.isfinite(float(v)) else None
        if isinstance(v, np.bool_):
            return bool(v)
        if v is None or isinstance(v, (str, int, bool)):
            return v
        try:
            import pandas as pd

            if pd.isna(v):
                return None
        except (TypeError, ValueError):
            pass
        return str(v)

    return {
        "about": about,
        "columns": [str(c) for c in frame.columns],
        "rows": [[cell(v) for v in row] for row in frame.itertuples(index=False, name=None)],
    }


def store_tables(data: dict[str, Any], tables: Mapping[str, tuple[Any, str]]) -> dict[str, Any]:
    """`data` with its ``tables`` replaced by `tables` (name -> (DataFrame, about)), ready to write."""
    out = dict(data)
    out["tables"] = {name: stored_table(frame, about) for name, (frame, about) in tables.items()}
    return out


def time_graphed(fn: Callable, *inputs: Any, iters: int = 20, calls_per_graph: int = 1) -> dict[str, Any]:
    """Device time per call replayed from a CUDA graph of `calls_per_graph` calls (CUDA only, ``no_grad``),
    checked against a direct call; the graph and its memory are released on return."""
    import torch

    from helpers.checks import bounded_int, check_callable
    from helpers.measure.device import device_of
    from helpers.measure.timing import MAX_REPEATS

    check_callable(fn)
    iters = bounded_int("iters", iters, 1, MAX_REPEATS)
    calls_per_graph = bounded_int("calls_per_graph", calls_per_graph, 1, 1000)
    device = device_of(inputs)
    if device is None or device.type != "cuda":
        raise ValueError("time_graphed needs CUDA inputs: CUDA graphs exist on NVIDIA GPUs only")
    with torch.no_grad():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                direct = fn(*inputs)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls_per_graph):
                static_out = fn(*inputs)
        graph.replay()
        torch.cuda.synchronize()
        diff = float((static_out.float() - direct.float()).abs().max()) if static_out.numel() else 0.0
        per_call_us = _replay_us(graph, iters) / calls_per_graph
        del graph, static_out, direct
    return {"graphed_us": per_call_us, "max_abs_diff": diff}


def time_calls_graphed(calls: list[Callable[[], Any]], device: Any, replays: int) -> float:
    """Microseconds per call of `calls` (each on its own data, so caches do not serve them) captured back to back
    in one CUDA graph and replayed `replays` times; on a CPU the wall clock of one pass (the smoke runs)."""
    import torch

    if device.type != "cuda":
        start = time.perf_counter()
        for fn in calls:
            fn()
        return (time.perf_counter() - start) * 1e6 / len(calls)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for fn in calls[:2]:  # autotunes and compiles outside the capture
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for fn in calls:
            fn()
    graph.replay()
    return _replay_us(graph, replays) / len(calls)


def _replay_us(graph: Any, replays: int) -> float:
    """Microseconds per replay of a captured CUDA graph, `replays` back to back between two events."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / replays
