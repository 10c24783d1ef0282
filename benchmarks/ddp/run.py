"""The 2-GPU reference run of notebook 09: every configuration launched, measured, analysed, predicted.

Each configuration is one ``launch_run`` (its own torchrun, its own timeout), in the priority order
of :data:`helpers.distributed.workloads.ORDER` inside a global time budget. A configuration that
fails or does not fit is recorded with the reason; the results are saved after every configuration
(``"complete": false`` until the end). Then the predictions made from the small-bucket trace are
set against the measured step times.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from helpers.distributed.launch import launch_run
from helpers.distributed.predict import predict_bucket_change
from helpers.distributed.runs import SUMMARY, load_run, run_summary
from helpers.distributed.workloads import ORDER, configurations
from helpers.measure.device import provenance
from helpers.trace.collectives import collectives, communication_per_step, rank_table
from helpers.trace.overlap import overlap

# the issue's measurement on two H200s, kept beside the results for comparison
ISSUE_ANCHOR = {
    "step_ms": 43.4,
    "ddp_bucket25": {"nccl_kernels": 54, "overlap_pct": 59.0},
    "ddp_bucket200": {"nccl_kernels": 14, "overlap_pct": 74.0},
}
PREDICTION_TOLERANCE = 0.20  # a prediction is met within 20% of the measured change
MIN_START_S = 40.0  # no run starts with less of the budget left


def analyse(folder: Path) -> dict[str, Any]:
    """What the lesson reads from a run's traces, in numbers: collectives, overlap, exposed communication."""
    run = load_run(folder)
    coll = collectives(run)
    steps = max(len(run.steps), 1)
    counts = coll.groupby(["rank", "collective", "name"]).size().div(steps).rename("per_step").reset_index()
    out: dict[str, Any] = {
        "collectives_per_step": counts.to_dict(orient="records"),
        "communication_per_step": communication_per_step(run).to_dict(orient="records"),
    }
    if coll["where"].eq("GPU kernel").any():
        out["overlap"] = overlap(run).to_dict(orient="records")
        out["nccl_kernels_per_step"] = float(len(coll) / steps / len(run.ranks))
    return out


def _met(predicted: float, measured: float) -> bool:
    return bool(abs(predicted - measured) <= PREDICTION_TOLERANCE * abs(measured))


def predictions(runs: dict[str, Any], folders: dict[str, Path]) -> list[dict[str, Any]]:
    """The lesson's predictions from the traces (bucket sizes, the straggler), against the measured step times.

    `runs`: configuration -> entry (``status``, ``summary``); `folders`: configuration -> its traces.
    """
    out: list[dict[str, Any]] = []

    def ok(name: str) -> bool:
        return runs.get(name, {}).get("status") == "ok" and name in folders

    if not ok("ddp_bucket25"):
        return out
    base = runs["ddp_bucket25"]["summary"]
    run = None
    for target, what in (("ddp_bucket200", "large buckets"), ("ddp_one_bucket", "one bucket for all gradients")):
        if not ok(target):
            continue
        new = runs[target]["summary"]
        row: dict[str, Any] = {"prediction": f"step-time change with {what}", "from": "ddp_bucket25", "to": target}
        try:
            run = run or load_run(folders["ddp_bucket25"])
            table = predict_bucket_change(
                run,
                new["options"]["bucket_cap_mb"],
                base["options"]["bucket_cap_mb"],
                bucket_bytes=(base.get("ddp") or {}).get("bucket_bytes"),
            )
            predicted = float(table.groupby("step")["predicted_change_us"].max().mean() / 1e3)
            measured = float(new["step_ms"] - base["step_ms"])
            row.update(
                predicted_change_ms=predicted,
                measured_change_ms=measured,
                measured_tail_ms=float(table["measured_tail_us"].mean() / 1e3),
                replayed_tail_ms=float(table["replayed_tail_us"].mean() / 1e3),
                model=dict(table.attrs),
                met=_met(predicted, measured),
            )
        except Exception as err:  # noqa: BLE001 - recorded: the traces are kept and can be read again
            row.update(status="not predicted", reason=f"{type(err).__name__}: {err}")
        out.append(row)
    if ok("ddp_straggler"):
        slow = runs["ddp_straggler"]["summary"]
        row = {"prediction": "step time the straggler costs", "from": "ddp_straggler", "to": "ddp_bucket25"}
        try:
            table = rank_table(load_run(folders["ddp_straggler"]))
            # how late the slowest rank starts its steps: what the others wait at their first collective
            predicted = float((table["start_idle_us"].max() - table["start_idle_us"].min()) / 1e3)
            measured = float(slow["step_ms"] - base["step_ms"])
            row.update(predicted_change_ms=predicted, measured_change_ms=measured, met=_met(predicted, measured))
        except Exception as err:  # noqa: BLE001 - recorded: the traces are kept and can be read again
            row.update(status="not predicted", reason=f"{type(err).__name__}: {err}")
        out.append(row)
    return out


def _entry(folder: Path, shown: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"status": "ok", "folder": shown, "summary": run_summary(folder)}
    try:
        entry["analysis"] = analyse(folder)
    except Exception as err:  # noqa: BLE001 - the run is kept; the analysis failure is recorded
        entry["analysis_error"] = f"{type(err).__name__}: {err}"
    return entry


def run(
    device: str,
    out: Path,
    quick: bool = False,
    nproc: int = 2,
    budget_s: float = 170.0,
    names: list[str] | None = None,
    log: Callable[[str], None] = print,
    on_stage: Callable[[dict[str, Any]], None] | None = None,
    command: str | None = None,
    prefix: str | None = None,
) -> dict[str, Any]:
    """Every configuration (or `names`) on `nproc` ranks; traces under ``<out>/traces``; returns the results.

    A run starts only while `budget_s` leaves it :data:`MIN_START_S`; each has the time left (at
    most 120 s) as its timeout. Trace folders are named ``<prefix><configuration>`` (default
    ``<device><nproc>_``; ``h200x2_`` for the H200 references).
    """
    if device == "cuda" and torch.cuda.device_count() < nproc:
        raise ValueError(f"{nproc} ranks need {nproc} GPUs; {torch.cuda.device_count()} here")
    chosen = list(names or ORDER)
    unknown = sorted(set(chosen) - set(ORDER))
    if unknown:
        raise ValueError(f"unknown configuration(s) {unknown}; known: {', '.join(ORDER)}")
    prefix = prefix or f"{device}{nproc}_"
    folders = {name: out / "traces" / f"{prefix}{name}" for name in chosen}
    start = time.perf_counter()
    results: dict[str, Any] = {
        "benchmark": "ddp",
        "provenance": {**provenance(torch.device(device), command), "ranks": nproc},
        "quick": quick,
        "configurations": {name: opts for name, opts in configurations(device, quick).items() if name in chosen},
        "issue_anchor": ISSUE_ANCHOR,
        "runs": {},
        "complete": False,
    }
    for name in chosen:
        left = budget_s - (time.perf_counter() - start)
        if left < MIN_START_S:
            results["runs"][name] = {"status": "skipped", "reason": f"time budget: {left:.0f} s left of {budget_s:.0f}"}
            log(f"{name}: skipped ({left:.0f} s left)")
            continue
        log(f"{name}: launching ({left:.0f} s of budget left)")
        try:
            folder = launch_run(
                folders[name].name,
                nproc=nproc,
                timeout_s=min(left, 120.0),
                out=folders[name],
                **results["configurations"][name],
            )
            entry = _entry(folder, str(Path("traces") / folders[name].name))
            log(f"{name}: step {entry['summary']['step_ms']:.2f} ms")
        except Exception as err:  # noqa: BLE001 - one failed configuration must not lose the others
            entry = {"status": "failed", "reason": f"{type(err).__name__}: {str(err)[-3000:]}"}
            log(f"{name}: FAILED {type(err).__name__}")
        results["runs"][name] = entry
        if on_stage:
            on_stage(results)
    results["predictions"] = predictions(results["runs"], folders)
    results["seconds"] = time.perf_counter() - start
    results["complete"] = True
    return results


def from_runs(root: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Results of runs launched already, one folder per configuration under `root` (``<root>/ddp_bucket25`` ...).

    What notebook 09 reads of its own runs on GPUs: the same analysis and predictions as :func:`run`.
    """
    folders = {name: root / name for name in ORDER if (root / name / SUMMARY).is_file()}
    if not folders:
        raise ValueError(f"{root} holds no finished run of a known configuration ({', '.join(ORDER)})")
    runs = {}
    for name, folder in folders.items():
        log(f"{name}: reading its traces")
        runs[name] = _entry(folder, str(folder))
    first = next(iter(runs.values()))["summary"]
    return {
        "benchmark": "ddp",
        "live": True,
        "provenance": {**first.get("provenance", {}), "ranks": first["world_size"]},
        "configurations": {name: r["summary"]["options"] for name, r in runs.items()},
        "runs": runs,
        "predictions": predictions(runs, folders),
        "complete": True,
    }


def repredict(results: dict[str, Any], root: Path, note: str) -> dict[str, Any]:
    """`results` with its predictions made again from its runs' trace folders (relative to `root`).

    When the way of predicting changes, the new predictions are made from the same traces, against
    the same measured step times; the old ones stay under ``predictions_before`` with `note` (and
    the rounds before them under its ``before``).
    """
    if not isinstance(results, dict) or "runs" not in results:
        raise ValueError("results must be a ddp benchmark's JSON (a dict with 'runs')")
    folders = {name: root / r["folder"] for name, r in results["runs"].items() if r.get("folder")}
    out = dict(results)
    before = {"note": note, "predictions": results.get("predictions")}
    if results.get("predictions_before"):  # the earlier rounds stay, newest first
        before["before"] = results["predictions_before"]
    out["predictions_before"] = before
    out["predictions"] = predictions(results["runs"], folders)
    return out


def summary_lines(results: dict[str, Any]) -> list[str]:
    """The table printed at the end: each configuration, then each prediction against its target."""
    lines = [
        f"{'configuration':18s} {'status':8s} {'step ms':>8s} {'per rank':>16s} {'NCCL/step':>9s} {'overlap%':>8s}"
    ]
    for name, r in results["runs"].items():
        if r["status"] != "ok":
            lines.append(f"{name:18s} {r['status']:8s} {str(r.get('reason'))[-90:]}")
            continue
        s, a = r["summary"], r.get("analysis") or {}
        ov = a.get("overlap") or []
        comm = sum(o["communication_us"] for o in ov)
        pct = 100.0 * sum(o["overlap_us"] for o in ov) / comm if comm else float("nan")
        per_rank = ",".join(f"{x['median_step_ms']:.1f}" for x in s["ranks"])
        kernels = a.get("nccl_kernels_per_step", float("nan"))
        lines.append(f"{name:18s} ok       {s['step_ms']:8.2f} {per_rank:>16s} {kernels:9.1f} {pct:8.1f}")
    for p in results.get("predictions") or []:
        if "predicted_change_ms" in p:
            lines.append(
                f"[{'met' if p['met'] else 'NOT met'}] {p['prediction']}: predicted {p['predicted_change_ms']:+.2f} ms, "
                f"measured {p['measured_change_ms']:+.2f} ms (target: within {PREDICTION_TOLERANCE:.0%})"
            )
        else:
            lines.append(f"[not predicted] {p['prediction']}: {p.get('reason')}")
    return lines
