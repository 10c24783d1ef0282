"""The decoder benchmark: every configuration of notebook 08's final table, measured in one process.

:func:`run` measures, in priority order and within a time budget (what is left is recorded as
skipped), each :data:`~helpers.decoder.configurations.CONFIGURATIONS` entry on the 1B model in
bf16: prefill tokens per second, decode time per token at batch 1 against the weight-read floor,
training step time and peak memory. It also predicts the CUDA-graph decode step from an eager
trace (:func:`~helpers.decoder.breakdown.graph_prediction`) before measuring it, and measures the
transfer exercise's variant and its fix. The result (a JSON-ready dict) is handed to `on_stage`
after every measurement, so an interrupted run keeps what it measured (``"complete": false``).
``benchmarks/decoder.py`` is the command line; :mod:`helpers.decoder.results` reads the file.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

import torch

from ..measure.ceilings import measure_ceilings
from ..measure.device import provenance, resolve_device
from ..measure.profile import profile
from .breakdown import graph_prediction, part_breakdown
from .config import get_config
from .configurations import CONFIGURATIONS, CPU_SIZES, GPU_SIZES, Sizes, measure
from .generate import weight_read_floor_us
from .workloads import VARIANT_X, decode, prefill

# Priority order: what needs no compile first (a few seconds each), then the compiled configurations
# (tens of seconds of compile each), then the rest. A second run (--resume) fills what the first skipped.
ORDER = (
    "eager",
    "eager+graph",
    "recompute",
    "course+recompute",
    "course",
    "course+graph",
    "compile+graph",
    "compile",
    "course+compile",
    "course+compile+graph",
    "course-concat+compile+graph",
    "course+flash",
    "sdpa-flash",
    "sdpa-efficient",
    "sdpa-cudnn",
    "sdpa-math",
)
QUICK = {"eager": None, "recompute": None, "sdpa-math": None, "course": ("prefill",)}  # CPU smoke run: uses
# The smoke run's sizes: the course's kernels run in Triton's interpreter on a CPU, slowly.
QUICK_SIZES = Sizes(prefill_batch=1, prompt_len=16, decode_prompt_len=8, decode_steps=4, train_batch=2, train_seq=32)
COMPILE_RESERVE_S = 45.0  # each use of a compiled configuration (it may compile) starts only with this much left
TARGETS = {"decode_pct_of_floor": 55.0, "graph_prediction_error": 0.25, "recompute_memory_ratio": 0.7}


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
    """Measure the configurations on `device`; returns the result dict (see the module docstring).

    `config`: a decoder preset (default: ``"1b"`` on a GPU, ``"small"`` on a CPU). `quick`: the CPU
    smoke run (the tiny model, four configurations, no compiled or graphed ones). `previous`: an
    earlier result of the same model on the same kind of device, whose successful measurements are
    kept (a second run within the time budget measures only what the first one skipped).
    """
    dev = resolve_device(device)
    cfg = get_config("tiny" if quick else config or ("1b" if dev.type == "cuda" else "small"))
    sizes = sizes or (QUICK_SIZES if quick else CPU_SIZES if dev.type != "cuda" else GPU_SIZES)
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    names = list(QUICK) if quick else list(configurations or ORDER)
    unknown = [n for n in names if n not in CONFIGURATIONS]
    if unknown:
        raise ValueError(f"unknown configurations {unknown}; known: {', '.join(CONFIGURATIONS)}")
    t0 = time.perf_counter()
    log(f"decoder benchmark on {dev}: {cfg.describe()}, {str(dtype).removeprefix('torch.')}")
    ceilings = measure_ceilings(dev)
    bytes_per = torch.tensor([], dtype=dtype).element_size()
    floor_us = weight_read_floor_us(cfg.weight_bytes(bytes_per), ceilings)
    result: dict[str, Any] = {
        "benchmark": "decoder",
        "complete": False,
        "provenance": provenance(dev, command),
        "config": cfg.as_dict(),
        "dtype": str(dtype).removeprefix("torch."),
        "sizes": asdict(sizes),
        "ceilings": ceilings.as_dict(),
        "weight_bytes": cfg.weight_bytes(bytes_per),
        "decode_floor_us": floor_us,
        "budget_s": budget_s,
        "rows": [],
        "graph_prediction": None,
        "exercise": None,
    }
    log(f"weights {result['weight_bytes'] / 1e9:.2f} GB; decode floor at batch 1: {floor_us:.0f} us per token")
    done = _kept(previous, result, log)

    def save() -> None:
        result["elapsed_s"] = time.perf_counter() - t0
        if on_stage:
            on_stage(result)

    def left() -> float:
        return budget_s - (time.perf_counter() - t0)

    for name in names:
        conf = CONFIGURATIONS[name]
        uses = tuple(u for u in ((QUICK.get(name) if quick else None) or conf.uses) if (name, u) not in done)
        if uses and (left() <= 0 or (conf.compiled and left() < COMPILE_RESERVE_S)):
            for use in uses:
                result["rows"].append(
                    {"configuration": name, "use": use, "status": "skipped", "reason": "time budget used up"}
                )
        elif uses:
            result["rows"].extend(
                measure(
                    conf,
                    cfg,
                    sizes,
                    dev,
                    dtype,
                    uses=uses,
                    log=log,
                    deadline=t0 + budget_s,
                    compile_reserve_s=COMPILE_RESERVE_S,
                )
            )
        judge_decodes(result, floor_us)
        save()
        prediction = result.get("graph_prediction") or {}
        if name == "eager" and dev.type == "cuda" and prediction.get("status") != "ok" and left() > 0:
            result["graph_prediction"] = _predict_graph(dev, cfg, sizes, log)
            save()
    if not quick and left() > 0 and (result.get("exercise") or {}).get("status") != "ok":
        result["exercise"] = _exercise(dev, sizes, log)
    result["targets"] = targets(result)
    result["complete"] = True
    save()
    log(f"done in {time.perf_counter() - t0:.0f} s")
    return result


def _kept(previous: dict[str, Any] | None, result: dict[str, Any], log: Callable[[str], None]) -> set:
    """Copy `previous`'s successful measurements into `result`; the (configuration, use) pairs kept."""
    if not previous:
        return set()
    same = (previous.get("config") or {}).get("name") == result["config"]["name"] and previous.get("dtype") == result[
        "dtype"
    ]
    if not same or previous.get("benchmark") != "decoder":
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


def _predict_graph(dev: torch.device, cfg, sizes: Sizes, log: Callable[[str], None]) -> dict[str, Any]:
    """Profile eager prefill and decode, predict the graphed decode step (before it is measured)."""
    try:
        pre = prefill(dev, cfg, sizes)
        pre_trace = profile(pre.fn, *pre.inputs, steps=2, warmup=1, label="prefill")
        dec = decode(dev, cfg, sizes)
        dec_trace = profile(dec.fn, *dec.inputs, steps=5, warmup=2, label="decode")
        out: dict[str, Any] = {"status": "ok", **graph_prediction(dec_trace, pre_trace)}
        out["decode_breakdown"] = part_breakdown(dec_trace).to_dict("records")
        out["prefill_breakdown"] = part_breakdown(pre_trace).to_dict("records")
        log(
            f"graph prediction: eager window {out['eager_window_us']:.0f} us, kernels {out['kernel_us']:.0f} us "
            f"({out['kernels']:.0f}), latency {out['latency_us']:.2f} us -> predicted {out['predicted_us']:.0f} us"
        )
        return out
    except Exception as err:  # noqa: BLE001 - recorded, the run goes on
        log(f"graph prediction failed: {type(err).__name__}: {err}")
        return {"status": "failed", "reason": f"{type(err).__name__}: {str(err)[:400]}"}


def _exercise(dev: torch.device, sizes: Sizes, log: Callable[[str], None]) -> dict[str, Any]:
    """The transfer exercise's variant: prefill with every position's logits, then with the last one's only."""
    from ..measure.timing import time_per_call

    out: dict[str, Any] = {"variant": VARIANT_X.as_dict()}
    try:
        for logits in ("all", "last"):
            built = prefill(dev, VARIANT_X, sizes, prefill_logits=logits)
            out[f"prefill_{logits}_us"] = time_per_call(built.fn, *built.inputs, repeats=10, warmup=2) * 1e6
            del built
        out["speedup"] = out["prefill_all_us"] / out["prefill_last_us"]
        out["status"] = "ok"
        log(f"exercise variant: prefill {out['prefill_all_us']:.0f} us -> {out['prefill_last_us']:.0f} us with the fix")
    except Exception as err:  # noqa: BLE001 - recorded
        out.update(status="failed", reason=f"{type(err).__name__}: {str(err)[:400]}")
    return out


def _ok(result: dict, configuration: str, use: str) -> dict | None:
    for row in result["rows"]:
        if row["configuration"] == configuration and row["use"] == use and row["status"] == "ok":
            return row
    return None


def judge_decodes(result: dict[str, Any], floor_us: float) -> None:
    """Put the floor and each measured decode step's percentage of it into `result` (in place)."""
    result["decode_floor_us"] = floor_us
    for row in result["rows"]:
        if row["use"] == "decode" and row["status"] == "ok":
            row["pct_of_floor"] = 100.0 * floor_us / row["step_us"]


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets against what `result` measured: one dict per target (``met`` None when not measured)."""
    rows: list[dict[str, Any]] = []

    def add(target: str, value: Any, met: bool | None, detail: str) -> None:
        rows.append({"target": target, "value": value, "met": met, "detail": detail})

    decodes = [r for r in result["rows"] if r["use"] == "decode" and r["status"] == "ok" and "pct_of_floor" in r]
    best = max(decodes, key=lambda r: r["pct_of_floor"], default=None)
    add(
        f"decode at batch {result['sizes']['decode_batch']} >= {TARGETS['decode_pct_of_floor']:.0f}% of the weight-read floor",
        None if best is None else round(best["pct_of_floor"], 1),
        None if best is None else best["pct_of_floor"] >= TARGETS["decode_pct_of_floor"],
        "no decode measured"
        if best is None
        else f"best: {best['configuration']} {best['step_us']:.0f} us/token, floor {result['decode_floor_us']:.0f} us",
    )
    pred, graphed = result.get("graph_prediction") or {}, _ok(result, "eager+graph", "decode")
    if pred.get("status") == "ok" and graphed:
        err = pred["predicted_us"] / graphed["step_us"] - 1
        add(
            "CUDA-graph decode step predicted from the eager trace within 25%",
            round(err, 3),
            abs(err) <= TARGETS["graph_prediction_error"],
            f"predicted {pred['predicted_us']:.0f} us, measured {graphed['step_us']:.0f} us",
        )
    else:
        add("CUDA-graph decode step predicted from the eager trace within 25%", None, None, "not measured")
    for use, key, better in (("prefill", "tokens_per_s", max), ("train", "step_ms", min)):
        eager, compiled = _ok(result, "eager", use), _ok(result, "compile", use)
        course = [
            r
            for r in result["rows"]
            if r["use"] == use and r["status"] == "ok" and r["configuration"].startswith("course")
        ]
        course = [r for r in course if "recompute" not in r["configuration"]]
        if not (eager and compiled and course):
            add(
                f"{use}: best course configuration faster than eager, not slower than compile",
                None,
                None,
                "not measured",
            )
            continue
        top = better(course, key=lambda r: r[key])
        faster = top[key] > eager[key] if key == "tokens_per_s" else top[key] < eager[key]
        vs_compile = top[key] / compiled[key] if key == "tokens_per_s" else compiled[key] / top[key]
        add(
            f"{use}: best course configuration faster than eager, not slower than compile",
            round(vs_compile, 3),
            bool(faster and vs_compile >= 1.0),
            f"{top['configuration']}: {top[key]:,.1f} {key} (eager {eager[key]:,.1f}, compile {compiled[key]:,.1f})",
        )
    eager_train = _ok(result, "eager", "train")
    for name in ("recompute", "course+recompute"):
        row = _ok(result, name, "train")
        if not (row and eager_train and "peak_gb" in row and "peak_gb" in eager_train):
            add(f"peak training memory of {name} <= 0.7x eager", None, None, "not measured")
            continue
        ratio = row["peak_gb"] / eager_train["peak_gb"]
        add(
            f"peak training memory of {name} <= 0.7x eager",
            round(ratio, 3),
            ratio <= TARGETS["recompute_memory_ratio"],
            f"{row['peak_gb']:.1f} GB vs {eager_train['peak_gb']:.1f} GB; step time x{row['step_ms'] / eager_train['step_ms']:.2f}",
        )
    return rows
