"""The stored tables of a decoder benchmark result: what notebook 08 shows, and the benchmark's targets.

:func:`tables` derives them from the raw measurements (``rows``, ``graph_prediction``,
``exercise``) against the ceilings of :func:`judged_ceilings`: the course's reference set for an
H200 recording, the run's own elsewhere. ``python -m benchmarks rejudge decoder`` rewrites them.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from helpers.decoder.generate import weight_read_floor_us
from helpers.lessons.results import reference_ceilings
from helpers.measure.ceilings import Ceilings, ceilings_from_dict

from .configurations import RUNS

RESULTS = ("h200_decoder",)
# The benchmark's acceptance targets (checked at the end of a run and by the tests, never shown in a lesson).
TARGETS = {"decode_pct_of_floor": 55.0, "graph_prediction_error": 0.25, "recompute_memory_ratio": 0.7}
COLUMNS = {  # column of the final table -> (use, measured number)
    "prefill_tokens_per_s": ("prefill", "tokens_per_s"),
    "decode_us": ("decode", "step_us"),
    "decode_tokens_per_s": ("decode", "tokens_per_s"),
    "train_step_ms": ("train", "step_ms"),
    "train_tokens_per_s": ("train", "tokens_per_s"),
    "train_peak_gb": ("train", "peak_gb"),
}
PREDICTION = ("eager_window_us", "kernel_us", "kernels", "idle_cpu_bound_us", "idle_waiting_us", "latency_us")
PREDICTION += ("median_waiting_us", "latency_from", "predicted_us", "predicted_speedup")


def judged_ceilings(data: dict[str, Any]) -> Ceilings:
    """The ceilings a run is judged against: the course's one reference set for an H200, else its own."""
    own = ceilings_from_dict(data["ceilings"])
    if "H200" in str((data.get("provenance") or {}).get("device", "")) and own.device_type == "cuda":
        return reference_ceilings()
    return own


def _ok(data: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["configuration"], r["use"]): r for r in data["rows"] if r.get("status") == "ok"}


def configurations_table(data: dict[str, Any], floor_us: float) -> pd.DataFrame:
    """One row per configuration measured (in the order of the final table) with each use's numbers."""
    ok = _ok(data)
    rows = []
    for name, run in RUNS.items():
        mine = {use: r for (n, use), r in ok.items() if n == name}
        if not mine:
            continue
        row: dict[str, Any] = {"configuration": name, "what": run.what}
        row.update({col: mine.get(use, {}).get(key) for col, (use, key) in COLUMNS.items()})
        row["pct_of_floor"] = 100.0 * floor_us / row["decode_us"] if row["decode_us"] else None
        rows.append(row)
    columns = ["configuration", "what", *list(COLUMNS)[:3], "pct_of_floor", *list(COLUMNS)[3:]]
    return pd.DataFrame(rows, columns=columns)


def targets(data: dict[str, Any], table: pd.DataFrame, floor_us: float) -> pd.DataFrame:
    """The benchmark's targets against the final `table`: value, met (None when not measured), detail."""
    rows: list[dict[str, Any]] = []
    t = table.set_index("configuration")

    def add(target: str, value: Any = None, met: bool | None = None, detail: str = "not measured") -> None:
        rows.append({"target": target, "value": value, "met": met, "detail": detail})

    def get(name: str, column: str) -> float | None:
        v = t[column].get(name) if name in t.index else None
        return None if v is None or pd.isna(v) else float(v)

    decodes = t["pct_of_floor"].dropna()
    target = f"decode at batch {data['sizes']['decode_batch']} >= {TARGETS['decode_pct_of_floor']:.0f}% of the weight-read floor"
    if decodes.empty:
        add(target, detail="no decode measured")
    else:
        best = decodes.idxmax()
        detail = f"best: {best} {t.loc[best, 'decode_us']:.0f} us/token, floor {floor_us:.0f} us"
        add(target, round(float(decodes[best]), 1), bool(decodes[best] >= TARGETS["decode_pct_of_floor"]), detail)
    target = "CUDA-graph decode step predicted from the eager trace within 25%"
    pred, graphed = data.get("graph_prediction") or {}, get("eager+graph", "decode_us")
    if pred.get("status") == "ok" and graphed:
        err = pred["predicted_us"] / graphed - 1
        detail = f"predicted {pred['predicted_us']:.0f} us, measured {graphed:.0f} us"
        add(target, round(err, 3), abs(err) <= TARGETS["graph_prediction_error"], detail)
    else:
        add(target)
    for use, column, higher in (("prefill", "prefill_tokens_per_s", True), ("train", "train_step_ms", False)):
        target = f"{use}: best course configuration faster than eager, not slower than compile"
        course = t[t.index.str.startswith("course") & ~t.index.str.contains("recompute")][column].dropna()
        eager, compiled = get("eager", column), get("compile", column)
        if not (eager and compiled and len(course)):
            add(target)
            continue
        top = course.idxmax() if higher else course.idxmin()
        faster = course[top] > eager if higher else course[top] < eager
        vs_compile = course[top] / compiled if higher else compiled / course[top]
        detail = f"{top}: {course[top]:,.1f} {COLUMNS[column][1]} (eager {eager:,.1f}, compile {compiled:,.1f})"
        add(target, round(vs_compile, 3), bool(faster and vs_compile >= 1.0), detail)
    eager_peak, eager_ms = get("eager", "train_peak_gb"), get("eager", "train_step_ms")
    for name in ("recompute", "course+recompute"):
        target, peak = f"peak training memory of {name} <= 0.7x eager", get(name, "train_peak_gb")
        if not (peak and eager_peak):
            add(target)
            continue
        ratio, slower = peak / eager_peak, get(name, "train_step_ms") / eager_ms
        detail = f"{peak:.1f} GB vs {eager_peak:.1f} GB; step time x{slower:.2f}"
        add(target, round(ratio, 3), ratio <= TARGETS["recompute_memory_ratio"], detail)
    return pd.DataFrame(rows, columns=["target", "value", "met", "detail"])


def tables(data: dict[str, Any]) -> dict[str, tuple[pd.DataFrame, str]]:
    """The stored tables of a decoder benchmark result (name -> (DataFrame, about))."""
    ceilings = judged_ceilings(data)
    floor_us = weight_read_floor_us(int(data["weight_bytes"]), ceilings)
    setup = {"config": data["config"]["name"], "dtype": data["dtype"], **data["sizes"]}
    setup.update(weight_bytes=int(data["weight_bytes"]), memory_roof_tbps=ceilings.bandwidth_tbps)
    setup.update(decode_floor_us=floor_us, ceilings=ceilings.label)
    table = configurations_table(data, floor_us)
    pred = data.get("graph_prediction") or {}
    prediction = pd.DataFrame(columns=[*PREDICTION, "measured_us", "eager_measured_us"])
    if pred.get("status") == "ok":
        measured = {n: table.set_index("configuration")["decode_us"].get(n) for n in ("eager+graph", "eager")}
        row = {k: pred.get(k) for k in PREDICTION} | {"measured_us": measured["eager+graph"]}
        prediction = pd.DataFrame([row | {"eager_measured_us": measured["eager"]}], columns=prediction.columns)
    ex = data.get("exercise") or {}
    exercise = pd.DataFrame(columns=["variant", "prefill_all_us", "prefill_last_us", "speedup"])
    if ex.get("status") == "ok":
        exercise.loc[0] = [ex["variant"]["name"], ex["prefill_all_us"], ex["prefill_last_us"], ex["speedup"]]
    failed = [r for r in data["rows"] if r.get("status") != "ok"]
    failures = pd.DataFrame(failed, columns=["configuration", "use", "status", "reason"])
    return {
        "setup": (pd.DataFrame([setup]), "the model, dtype and sizes of the run; the decode floor at batch 1 (us)"),
        "configurations": (table, "the final table: one row per configuration, each use's numbers; % of the floor"),
        "graph_prediction": (prediction, "the CUDA-graph decode step predicted from the eager trace, and measured"),
        "exercise": (exercise, "the transfer exercise's variant: prefill with every position's logits, then the last"),
        "failures": (failures, "measurements that failed or were skipped, with the reason"),
        "targets": (
            targets(data, table, floor_us),
            "the benchmark's acceptance targets (for the tests, not the lesson)",
        ),
    }


def summary(data: dict[str, Any]) -> str:
    """The text printed at the end of a run: the final table, the failures, then the targets."""
    from ..common import fmt

    t = tables(data)
    setup, table, failures = t["setup"][0].iloc[0], t["configurations"][0], t["failures"][0]
    p = data.get("provenance") or {}
    lines = [
        f"{p.get('device', '?')}, torch {p.get('torch', '?')}, {str(p.get('date', '?'))[:10]}",
        f"{setup['config']}: {setup['weight_bytes'] / 1e9:.2f} GB of weights, decode floor "
        f"{setup['decode_floor_us']:.0f} us/token at a memory roof of {setup['memory_roof_tbps']:.2f} TB/s",
        f"{'configuration':22s} {'prefill tok/s':>13s} {'decode us':>10s} {'%floor':>7s} {'train ms':>9s} {'peak GB':>8s}",
    ]
    for row in table.itertuples():
        lines.append(
            f"{row.configuration:22s} {fmt(row.prefill_tokens_per_s, '13,.0f'):>13s} {fmt(row.decode_us, '10.1f'):>10s} "
            f"{fmt(row.pct_of_floor, '7.1f'):>7s} {fmt(row.train_step_ms, '9.1f'):>9s} {fmt(row.train_peak_gb, '8.1f'):>8s}"
        )
    if not failures.empty:
        lines.append("")
        lines += [f"{f.configuration} {f.use}: {f.status} ({str(f.reason)[:100]})" for f in failures.itertuples()]
    lines.append("")
    for r in t["targets"][0].itertuples():
        mark = {True: "met", False: "NOT met"}.get(r.met, "not measured")
        lines.append(f"[{mark}] {r.target}: {r.value} ({r.detail})")
    return "\n".join(lines)
