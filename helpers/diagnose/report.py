"""``python -m helpers report TRACE_OR_FOLDER [-o report.html]``: findings, critical path, kernels, TFLOP/s and
the timeline on one self-contained page (plotly inlined, so it opens offline)."""

from __future__ import annotations

import argparse
import html
import os
import sys
import time
from pathlib import Path
from typing import TextIO

import pandas as pd

from helpers.trace.flops import achieved_flops
from helpers.trace.model import Trace
from helpers.trace.work import kernel_breakdown

from .critical_path import path_summary
from .diagnose import as_trace, run_rules

_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px}table{border-collapse:collapse;
font-size:13px}td,th{border:1px solid #ccc;padding:4px 6px;text-align:left;vertical-align:top}
th{background:#f3f3f3}h2{margin-top:1.6em}.note{color:#555}"""
FINDING_COLUMNS = ["finding", "saving_upper_bound_us", "saving_pct", "confidence", "evidence", "fix", "lesson"]


def _table(frame: pd.DataFrame, empty: str) -> str:
    if frame is None or frame.empty:
        return f"<p class='note'>{html.escape(empty)}</p>"
    return frame.to_html(index=False, escape=True, float_format=lambda v: f"{v:,.1f}", border=0)


def _section(title: str, body: str) -> str:
    return f"<h2>{html.escape(title)}</h2>\n{body}\n"


def render(trace: Trace, log=None) -> str:
    """The report of `trace` as one HTML document (plotly inlined: no network needed)."""
    say = log or (lambda msg: None)
    say("diagnosing (rules and critical path)")
    findings, ctx = run_rules(trace)
    parts = [f"<h1>Profile report</h1><p>{html.escape(trace.info.describe())}: {len(trace.events):,} events, "
             f"{findings.attrs['steps']} step(s), about {findings.attrs['step_us']:,.0f} us per step on the "
             "critical path.</p>"]  # fmt: skip
    parts.append(_section("Findings, largest possible saving first", _table(
        findings[FINDING_COLUMNS], "No rule found anything to fix in this trace.")))  # fmt: skip
    notes = [f"rule {k} skipped: {v}" for k, v in findings.attrs["skipped"].items()] + findings.attrs["notes"]
    notes += list(trace.notes)[:10]
    if notes:
        parts.append("<ul class='note'>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    say("critical path, kernel breakdown, achieved TFLOP/s")
    parts.append(_section("Critical path by kind (all analysed steps)", _table(path_summary(ctx.path), "")))
    top = ctx.path.groupby(["name", "kind"], sort=False)["duration_us"].sum().nlargest(15).reset_index()
    parts.append(_section("What holds the critical path longest", _table(top, "")))
    has_device = bool(trace.events["on_device"].any())
    parts.append(_section("Kernel breakdown", _table(kernel_breakdown(trace) if has_device else None,
                                                     "No device kernels in this trace (a CPU-only run).")))  # fmt: skip
    flops = achieved_flops(trace).head(20)
    parts.append(
        _section(
            "Achieved TFLOP/s (matrix products, attention, convolutions)",
            _table(
                flops, "No operator with recorded shapes launched a matrix product (record with record_shapes=True)."
            ),
        )
    )
    say("timeline")
    fig = trace.timeline()
    parts.append(_section("Timeline", fig.to_html(full_html=False, include_plotlyjs=True)))
    body = "\n".join(parts)
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Profile report: "
            f"{html.escape(trace.info.label)}</title><style>{_STYLE}</style></head><body>{body}</body></html>")  # fmt: skip


def write_report(trace_or_path: Trace | str | os.PathLike, output: str | os.PathLike | None = None,
                 stream: TextIO | None = None) -> Path:  # fmt: skip
    """Write the report of a trace, a trace file or a folder of per-rank files (default beside the trace); returns its path."""
    err = stream or sys.stderr
    t0 = time.perf_counter()

    def say(msg: str) -> None:
        print(f"[report {time.perf_counter() - t0:6.1f} s] {msg}", file=err, flush=True)

    if not isinstance(trace_or_path, Trace):
        say(f"loading {trace_or_path}")
    trace = as_trace(trace_or_path)
    page = render(trace, say)
    if output is None:
        base = Path(trace.info.path).name if trace.info.path else trace.info.label
        base = base.removesuffix(".gz").removesuffix(".json")
        output = Path(f"{base}.report.html")
    out = Path(output)
    out.write_text(page, encoding="utf-8")
    say(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m helpers report TRACE_OR_FOLDER [-o report.html]``."""
    parser = argparse.ArgumentParser(prog="python -m helpers report", description=__doc__.splitlines()[0])
    parser.add_argument("trace", help="a Kineto/Chrome trace (.json or .json.gz) or a folder of per-rank traces")
    parser.add_argument("-o", "--output", default=None, help="where to write the HTML page")
    args = parser.parse_args(argv)
    try:
        write_report(args.trace, args.output)
    except (OSError, ValueError, TypeError) as err:
        print(f"error: cannot report on {args.trace}: {err}", file=sys.stderr)
        return 2
    return 0
