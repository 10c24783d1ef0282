"""The decoder benchmark's run: every configuration in priority order, within a time budget.

:func:`run` measures each :data:`~benchmarks.decoder.configurations.RUNS` entry in the order given
(what does not fit in `budget_s` is recorded as skipped), predicts the CUDA-graph decode step from
an eager trace before measuring it (on a GPU), then the transfer exercise. The result is handed to
`on_stage` after every measurement, so an interrupted run keeps what it measured.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

import torch

from helpers.decoder.config import get_config
from helpers.decoder.workloads import CPU_SIZES, Sizes
from helpers.measure.ceilings import measure_ceilings
from helpers.measure.device import provenance, resolve_device

from .configurations import ORDER, QUICK, QUICK_SIZES, RUNS, gpu_sizes
from .measure import exercise, measure, predict_graph

COMPILE_RESERVE_S = 45.0  # each use of a compiled configuration (it may compile) starts only with this much left


def default_sizes(dev: torch.device) -> Sizes:
    """On a GPU the full sizes with a training batch that fits its memory; small ones on a CPU."""
    return gpu_sizes(torch.cuda.get_device_properties(dev).total_memory) if dev.type == "cuda" else CPU_SIZES


def run(
    device: str | torch.device | None = None,
    config: str | None = None,
    sizes: Sizes | None = None,
    configurations: Sequence[str] | None = None,
    quick: bool = False,
    budget_s: float = 225.0,
    log: Callable[[str], None] = print,
    on_stage: Callable[[dict], None] | None = None,
    command: str | None = None,
    previous: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Measure the configurations on `device`; returns the result dict (raw measurements, no tables).

    `config`: a decoder preset (default ``"1b"`` on a GPU, ``"small"`` on a CPU). `quick`: the CPU
    smoke run (the tiny model, :data:`QUICK`). `previous`: an earlier result of the same model and
    dtype whose successful measurements are kept (a second run measures only what it skipped).
    """
    dev = resolve_device(device)
    cfg = get_config("tiny" if quick else config or ("1b" if dev.type == "cuda" else "small"))
    sizes = sizes or (QUICK_SIZES if quick else default_sizes(dev))
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    names = list(QUICK) if quick else list(configurations or ORDER)
    unknown = [n for n in names if n not in RUNS]
    if unknown:
        raise ValueError(f"unknown configurations {unknown}; known: {', '.join(RUNS)}")
    t0 = time.perf_counter()
    log(f"decoder benchmark on {dev}: {cfg.describe()}, {str(dtype).removeprefix('torch.')}")
    ceilings = measure_ceilings(dev)
    weight_bytes = cfg.weight_bytes(torch.tensor([], dtype=dtype).element_size())
    result: dict[str, Any] = {
        "benchmark": "decoder",
        "complete": False,
        "provenance": provenance(dev, command),
        "config": cfg.as_dict(),
        "dtype": str(dtype).removeprefix("torch."),
        "sizes": asdict(sizes),
        "ceilings": ceilings.as_dict(),
        "weight_bytes": weight_bytes,
        "budget_s": budget_s,
        "rows": [],
        "graph_prediction": None,
        "exercise": None,
    }
    log(f"weights {weight_bytes / 1e9:.2f} GB, {len(names)} configurations, budget {budget_s:.0f} s")
    done = _kept(previous, result, log)

    def save() -> None:
        result["elapsed_s"] = time.perf_counter() - t0
        if on_stage:
            on_stage(result)

    def left() -> float:
        return budget_s - (time.perf_counter() - t0)

    for name in names:
        r = RUNS[name]
        uses = tuple(u for u in ((QUICK.get(name) if quick else None) or r.uses) if (name, u) not in done)
        if uses and (left() <= 0 or (r.configuration.compiled and left() < COMPILE_RESERVE_S)):
            result["rows"] += [
                {"configuration": name, "use": u, "status": "skipped", "reason": "time budget used up"} for u in uses
            ]
        elif uses:
            deadline = t0 + budget_s
            result["rows"] += measure(
                r, cfg, sizes, dev, dtype, uses=uses, log=log, deadline=deadline, compile_reserve_s=COMPILE_RESERVE_S
            )
        save()
        prediction = result.get("graph_prediction") or {}
        if name == "eager" and dev.type == "cuda" and prediction.get("status") != "ok" and left() > 0:
            result["graph_prediction"] = predict_graph(dev, cfg, sizes, log)
            save()
    if not quick and left() > 0 and (result.get("exercise") or {}).get("status") != "ok":
        result["exercise"] = exercise(dev, sizes, log)
    result["complete"] = True
    save()
    log(f"done in {time.perf_counter() - t0:.0f} s")
    return result


def _kept(previous: dict[str, Any] | None, result: dict[str, Any], log: Callable[[str], None]) -> set:
    """Copy `previous`'s successful measurements into `result`; the (configuration, use) pairs kept."""
    if not previous:
        return set()
    same = (previous.get("config") or {}).get("name") == result["config"]["name"]
    if not same or previous.get("dtype") != result["dtype"] or previous.get("benchmark") != "decoder":
        raise ValueError(
            "the previous result is another benchmark, model or dtype "
            f"({(previous.get('config') or {}).get('name')}, {previous.get('dtype')}): start a fresh file instead"
        )
    rows = [r for r in previous.get("rows", []) if r.get("status") == "ok"]
    result["rows"] = rows
    for key in ("graph_prediction", "exercise"):
        if (previous.get(key) or {}).get("status") == "ok":
            result[key] = previous[key]
    result["resumed_from"] = {"date": (previous.get("provenance") or {}).get("date"), "rows_kept": len(rows)}
    log(f"kept {len(rows)} measurements of the run of {result['resumed_from']['date']}")
    return {(r["configuration"], r["use"]) for r in rows}
