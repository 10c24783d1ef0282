"""The tables notebook 09 shows of a ddp result, derived from its raw runs, analyses and predictions."""

from __future__ import annotations

import statistics
from typing import Any

import pandas as pd

from helpers.distributed.runs import summary_row

from .run import PREDICTION_TOLERANCE


def _ok(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n: r for n, r in (data.get("runs") or {}).items() if r.get("status") == "ok" and r.get("analysis")}


def _runs(data: dict[str, Any]) -> pd.DataFrame:
    rows = []
    for name, r in (data.get("runs") or {}).items():
        row = {"configuration": name, "status": r.get("status"), "reason": r.get("reason")}
        if r.get("status") == "ok":
            row.update(summary_row(r["summary"]))
        rows.append(row)
    return pd.DataFrame(rows)


def _communication(data: dict[str, Any]) -> pd.DataFrame:
    rows = []
    for name, r in _ok(data).items():
        a, ranks = r["analysis"], r["summary"]["world_size"]
        steps = [s for s in a["communication_per_step"] if s["step"] >= 0]
        overlap = a.get("overlap") or steps  # whole-trace overlap on GPUs, else per step
        comm = sum(o["communication_us"] for o in overlap)
        rows.append(
            {
                "configuration": name,
                "mode": r["summary"]["options"]["mode"],
                "collectives_per_step": sum(c["per_step"] for c in a["collectives_per_step"]) / ranks,
                "communication_ms_per_step": statistics.median(s["communication_us"] for s in steps) / 1e3,
                "exposed_ms_per_step": statistics.median(s["exposed_communication_us"] for s in steps) / 1e3,
                "overlap_pct": 100.0 * sum(o["overlap_us"] for o in overlap) / comm if comm > 0 else None,
                "step_ms": r["summary"]["step_ms"],
            }
        )
    return pd.DataFrame(rows)


def _overlap(data: dict[str, Any]) -> pd.DataFrame:
    rows = []
    for name, r in _ok(data).items():
        for o in r["analysis"].get("overlap") or []:
            pct = 100.0 * o["idle_cpu_bound_us"] / o["window_us"] if o["window_us"] > 0 else None
            rows.append({"configuration": name, **o, "idle_cpu_bound_pct": pct})
    return pd.DataFrame(rows)


def _error_pct(p: dict[str, Any]) -> float | None:
    if "predicted_change_ms" not in p or not p["measured_change_ms"]:
        return None
    return 100.0 * abs(p["predicted_change_ms"] - p["measured_change_ms"]) / abs(p["measured_change_ms"])


def _predictions(data: dict[str, Any]) -> pd.DataFrame:
    cols = ["prediction", "from", "to", "predicted_change_ms", "measured_change_ms", "error_pct", "latency_us"]
    cols += ["bandwidth_gb_s", "measured_tail_ms", "replayed_tail_ms", "status", "reason"]
    rows = []
    for p in data.get("predictions") or []:
        model = p.get("model") or {}
        row = {k: p.get(k) for k in cols}
        row.update(
            error_pct=_error_pct(p),
            latency_us=model.get("latency_us"),
            bandwidth_gb_s=model.get("bandwidth_gb_s"),
            status=p.get("status", "predicted"),
        )
        rows.append(row)
    return pd.DataFrame(rows, columns=cols)


def _targets(data: dict[str, Any]) -> pd.DataFrame:
    tolerance = 100.0 * PREDICTION_TOLERANCE
    rows = []
    for p in data.get("predictions") or []:
        error = _error_pct(p)
        rows.append(
            {
                "prediction": p["prediction"],
                "error_pct": error,
                "tolerance_pct": tolerance,
                "met": error is not None and error <= tolerance,
            }
        )
    return pd.DataFrame(rows, columns=["prediction", "error_pct", "tolerance_pct", "met"])


def tables(data: dict[str, Any]) -> dict[str, tuple[pd.DataFrame, str]]:
    """The stored tables of a ddp result (see benchmarks/results/README.md)."""
    return {
        "runs": (
            _runs(data),
            "every configuration as run: step time without the profiler (median over the timed steps of the "
            "slowest rank), per rank, model state and peak memory per rank",
        ),
        "communication": (
            _communication(data),
            "per configuration: collectives per step and rank, communication and exposed communication per step "
            "(medians over ranks and profiled steps), share of communication hidden behind compute",
        ),
        "overlap": (
            _overlap(data),
            "per configuration and GPU: compute, communication, overlap and idle time over the profiled window (us)",
        ),
        "predictions": (
            _predictions(data),
            "step-time changes predicted from the traces against the changes measured without the profiler",
        ),
        "targets": (_targets(data), "the benchmark's acceptance target: each prediction within the tolerance"),
    }
