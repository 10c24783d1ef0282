"""What stands between batch-1 decode and the weight-read floor, cause by cause.

    python -m benchmarks decode-floor --out benchmarks/results/h200_decode_floor.json   # on a GPU (~2 min)

The floor is every weight read once at the memory roof (``weight_read_floor_us``). For each graphed
decode configuration of notebook 08, the unprofiled step (back to back, as the decoder benchmark
times it) is split into:

- the GEMMs' kernel time, and the part of it above the floor (the GEMV kernels below the memory roof);
  the LM head's GEMM on its own (the last GEMM of the step), with its bytes;
- every other kernel family's time (attention over the KV cache, norms, elementwise work such as
  RoPE and the residual adds, copies such as the KV-cache update, reductions such as the argmax);
- the GPU idle between kernels inside the step (what a graph replay still leaves between launches);
- the rest of the unprofiled step: the replay's own launch and what the profiler's step adds.

The kernels come from a profile of graph replays; the step from ``decode_timing`` without a profiler.
The causes are in order of size, so the first row is the first thing to fix.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from helpers.decoder.config import get_config
from helpers.decoder.generate import Generator, decode_timing, weight_read_floor_us
from helpers.decoder.model import random_tokens
from helpers.measure.ceilings import measure_ceilings, reference_ceilings_for
from helpers.measure.device import provenance, resolve_device
from helpers.measure.profile import profile
from helpers.trace.kernel_names import decode_kernel

from .common import log, store_tables, write_json
from .decoder.configurations import RUNS

# the best configuration of the decoder benchmark first: a run cut short still says the most
SDPA_BACKENDS = ("flash", "efficient", "cudnn", "math")
CONFIGURATIONS = (
    "course-concat+compile+graph",
    "eager+graph",
    "compile+graph",
    "course-gemv+compile+graph",
    "course-gemv-attn+compile+graph",
)
PROMPT_LEN, STEPS, PROFILED = 128, 50, 10


def _busy_us(start: np.ndarray, end: np.ndarray) -> float:
    """Time covered by at least one of the intervals (kernels on several streams may overlap)."""
    order = np.argsort(start)
    busy, reach = 0.0, -np.inf
    for s, e in zip(start[order], end[order]):
        if e > reach:
            busy += e - max(s, reach)
            reach = e
    return busy


def _causes(kernels: pd.DataFrame, step_us: float, floor_us: float, head_bytes: int, roof: float) -> list[dict]:
    """Per step (median over the profiled steps): each cause's microseconds."""
    k = kernels.copy()
    k["family"] = [decode_kernel(n).get("family") or "other" for n in k["name"]]
    k["end_us"] = k["start_us"] + k["duration_us"]
    per_step: list[dict[str, float]] = []
    for _, s in k.groupby("step"):
        row = s.groupby("family")["duration_us"].sum().to_dict()
        gemms = s[s["family"] == "gemm"]
        row["lm_head"] = float(gemms["duration_us"].iloc[-1]) if len(gemms) else 0.0
        span = float(s["end_us"].max() - s["start_us"].min())
        row["idle_between_kernels"] = span - _busy_us(s["start_us"].to_numpy(), s["end_us"].to_numpy())
        row["span"] = span
        per_step.append(row)
    steps = pd.DataFrame(per_step).fillna(0.0).median()
    gemm = float(steps.get("gemm", 0.0))
    head_floor = head_bytes / roof * 1e6
    rows = [
        {"cause": "weights at the memory roof (the floor)", "us": floor_us},
        {"cause": "GEMV kernels above the floor (below the memory roof), LM head excluded",
         "us": gemm - float(steps["lm_head"]) - (floor_us - head_floor)},
        {"cause": "LM head GEMV above its own floor", "us": float(steps["lm_head"]) - head_floor},
    ]  # fmt: skip
    for family, us in steps.items():
        if family not in ("gemm", "lm_head", "idle_between_kernels", "span"):
            rows.append({"cause": f"{family} kernels", "us": float(us)})
    # read under the profiler, which stretches the gaps: the last row's negative part comes back from here
    rows.append(
        {"cause": "GPU idle between kernels inside the step (profiled)", "us": float(steps["idle_between_kernels"])}
    )
    # negative when the profiler stretches the replay's span beyond the unprofiled step
    rows.append({"cause": "the unprofiled step beyond the profiled kernels' span (launch; negative: profiler cost)",
                 "us": step_us - float(steps["span"])})  # fmt: skip
    return rows


def _top_kernels(kernels: pd.DataFrame, steps: int, n: int = 12) -> list[dict[str, Any]]:
    """The kernels that take most of a step: short name, family, launches and microseconds per step."""
    decoded = [decode_kernel(k) for k in kernels["name"]]
    k = kernels.assign(kernel=[d.get("short_name") or n for d, n in zip(decoded, kernels["name"])],
                       family=[d.get("family") or "other" for d in decoded])  # fmt: skip
    top = k.groupby(["kernel", "family"])["duration_us"].agg(["count", "sum"]).nlargest(n, "sum").reset_index()
    return [{"kernel": r.kernel[:120], "family": r.family, "per_step": r["count"] / steps, "us": r["sum"] / steps}
            for _, r in top.iterrows()]  # fmt: skip


def _run(name: str, cfg: Any, dev: torch.device) -> tuple[dict[str, Any], pd.DataFrame]:
    """One configuration (``NAME`` or ``NAME@backend``, SDPA forced to that backend): its unprofiled decode
    timing, and the kernels of profiled graph replays."""
    name, _, backend = name.partition("@")
    conf = RUNS[name].configuration
    if backend:
        conf = replace(conf, sdpa_backend=backend)
    model = conf.build(cfg, dev, torch.bfloat16)
    max_len = PROMPT_LEN + 2 * STEPS + 2 + 3 * PROFILED + 16
    gen = Generator(model, 1, max_len, graph=True, compiled_prefill=False)
    prompts = random_tokens(cfg, 1, PROMPT_LEN, device=dev)
    with conf.running():
        timing = decode_timing(gen, prompts, steps=STEPS)
        trace = profile(lambda _token: gen.step(), gen.token, steps=PROFILED, warmup=2, label="decode")
    return timing, trace.kernels()


def measure(device: str | None, configurations: tuple[str, ...], out_path: Path | None = None) -> dict[str, Any]:
    """Each configuration in turn; the result so far is written to `out_path` after each."""
    dev = resolve_device(device)
    if dev.type != "cuda":
        raise SystemExit("decode-floor replays CUDA graphs: run it on a CUDA GPU")
    cfg = get_config("1b")
    # the course's one ceiling set for this GPU where it has one, else measured here
    ceilings = reference_ceilings_for(torch.cuda.get_device_name(dev)) or measure_ceilings(dev)
    roof = ceilings.bandwidth_bytes_per_s
    floor_us = weight_read_floor_us(cfg.weight_bytes(2), ceilings)
    head_bytes = cfg.vocab_size * cfg.hidden_size * 2
    out: dict[str, Any] = {"benchmark": "decode-floor", "provenance": provenance(dev), "ceilings": ceilings.label,
                           "floor_us": floor_us, "configurations": {}}  # fmt: skip
    for name in configurations:
        timing, kernels = _run(name, cfg, dev)
        rows = _causes(kernels, timing["step_us"], floor_us, head_bytes, roof)
        out["configurations"][name] = {"timing": timing, "kernels_per_step": len(kernels) / PROFILED, "causes": rows,
                                       "top_kernels": _top_kernels(kernels, PROFILED)}  # fmt: skip
        log(f"{name}: {timing['step_us']:.0f} us/token; the floor is {100 * floor_us / timing['step_us']:.1f}% of it")
        for r in sorted(rows[1:], key=lambda r: -r["us"]):
            log(f"    {r['us']:8.1f} us  {r['cause']}")
        torch.cuda.empty_cache()
        if out_path is not None:
            write_json(out_path, store_tables(out, tables(out)))
    return out


def tables(data: dict[str, Any]) -> dict[str, tuple[pd.DataFrame, str]]:
    rows = []
    for name, c in data["configurations"].items():
        for r in c["causes"]:
            rows.append({"configuration": name, "cause": r["cause"], "us": r["us"],
                         "pct_of_step": 100 * r["us"] / c["timing"]["step_us"]})  # fmt: skip
    return {"causes": (pd.DataFrame(rows), "each configuration's decode step split by cause (us per token)")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks decode-floor", description=__doc__.split("\n")[0])
    p.add_argument("--device", default=None)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--configurations", nargs="+", default=list(CONFIGURATIONS),
                   help="decoder configurations with graphed decode; NAME@flash (efficient, cudnn, math) forces SDPA's backend")  # fmt: skip
    args = p.parse_args(argv)
    for name in args.configurations:
        base, _, backend = name.partition("@")
        if base not in RUNS or not RUNS[base].configuration.graph or backend not in ("", *SDPA_BACKENDS):
            graphed = [n for n, r in RUNS.items() if r.configuration.graph]
            p.error(f"{name!r}: give a graphed configuration {graphed}, optionally @ one of {SDPA_BACKENDS}")
    measure(args.device, tuple(args.configurations), args.out)
    log(f"wrote {args.out}")
    return 0
