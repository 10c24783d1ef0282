"""Measure the MLP variants of :mod:`helpers.variants`, and read the results back.

One function, :func:`run`, measures every variant in one process (so the numbers share a device,
clocks and software) and returns a JSON-ready dict; ``benchmarks/mlp_variants.py`` is its command
line, and notebook 06 calls it live on a GPU. :func:`load_results` reads a saved result (by
default the H200 result committed in ``traces/benchmarks/``) into :class:`BenchResults`, which
gives the notebook its tables and figures, labelled with where and when it was recorded.

Per variant, at one shape:

- ``kernels_per_forward``: compute kernels per call in the profile (``helpers.profile``), and
  ``device_events_per_forward`` with memsets and copies;
- ``kernel_us``: device time per call, the sum over its kernels (mean over the profiled steps);
- ``e2e_nosync_us``: wall time per call when calls are issued back to back (one synchronise at
  the end); ``e2e_sync_us``: median wall time of one call followed by a synchronise;
- ``rel_err``: relative error against the float32 reference (:func:`helpers.variants.reference_forward`);
- rates against the ceilings measured in the same run: achieved TFLOP/s (116 GFLOP at the blog
  shape), % of the MLP's floor and % of the variant's own plan floor (:func:`helpers.variants.plan_floor_us`).

On a CPU there are no device kernels: eager ATen ops run inline and the Triton kernels run in the
interpreter, so ``kernel_us`` is None and rates use ``e2e_nosync_us`` (``rate_basis`` says which).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from . import variants as V
from .models import MLPShape, SimpleGeGLUMLP
from .paths import REPO_ROOT, TRACES_DIR
from .profiling import profile
from .trace import Trace
from .roofline import (Ceilings, ceilings_from_dict, geglu_bytes, geglu_mlp_flops, measure_ceilings, roofline_figure,
                       roofline_frame)

SCHEMA = "course-mlp-variants/1"
RESULTS_DIR = TRACES_DIR / "benchmarks"
RESULTS_PATH = RESULTS_DIR / "h200_mlp_variants.json"
RESULTS_ENV = "COURSE_MLP_RESULTS"  # development only: read another results file
SWEEP_SEQ = 128
GPU_SWEEP_M: tuple[int, ...] = tuple(2**i for i in range(7, 16))  # 128 ... 32768
# What the notebook runs live on a GPU: everything but max-autotune (its compile takes minutes).
LIVE_VARIANTS: tuple[str, ...] = tuple(n for n in V.VARIANT_NAMES if n != "compile-max-autotune")

Log = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


# ---------------------------------------------------------------------------------------------
# timing one variant
# ---------------------------------------------------------------------------------------------

def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_end_to_end(fn: Callable, x: torch.Tensor, iters: int) -> dict[str, float]:
    """Wall time per call, issued back to back (``nosync``) and with a synchronise after each (``sync``), in us.

    On CUDA the back-to-back loop is also timed with CUDA events (``nosync_events_us``).
    """
    if isinstance(iters, bool) or not isinstance(iters, int) or iters < 1:
        raise ValueError(f"iters must be a positive int, got {iters!r}")
    device = x.device
    with torch.no_grad():
        fn(x)
        _sync(device)
        out: dict[str, float] = {}
        events = None
        if device.type == "cuda":
            events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            events[0].record()
        start = time.perf_counter()
        for _ in range(iters):
            fn(x)
        if events is not None:
            events[1].record()
        _sync(device)
        out["nosync_us"] = (time.perf_counter() - start) / iters * 1e6
        if events is not None:
            out["nosync_events_us"] = events[0].elapsed_time(events[1]) * 1e3 / iters
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn(x)
            _sync(device)
            times.append(time.perf_counter() - t0)
        out["sync_us"] = statistics.median(times) * 1e6
    return out


def kernel_stats(fn: Callable, x: torch.Tensor, steps: int, warmup: int, label: str) -> dict[str, Any]:
    """Profile `steps` calls of ``fn(x)`` (``helpers.profile``) and summarise them with :func:`kernel_summary`."""
    trace = profile(fn, x, steps=steps, warmup=warmup, label=label)
    return kernel_summary(trace, device_kernels=x.device.type == "cuda")


def kernel_summary(trace: Trace, device_kernels: bool = True) -> dict[str, Any]:
    """The kernels of a profile, per call (each profiler step holds one call).

    Returns ``kernels_per_forward`` (compute kernels, plus C++ kernels generated by torch.compile
    on a CPU), ``device_events_per_forward`` (with memsets and copies), ``kernel_us`` (device time
    per call: mean over steps of the summed durations), ``kernel_us_min``, ``kernels`` (one dict
    per kernel name: kind, role, calls and us per forward) and ``steady`` (False when the steps
    launched different numbers of kernels). With ``device_kernels=False`` (a CPU profile) the
    times are None: only torch.compile's generated C++ kernels are listed there, while the GEMMs and
    every eager or interpreted op run outside them, so their sum is no kernel time of the forward
    (it is kept as ``cpu_generated_kernel_us``).
    """
    k = trace.kernels(allow_empty=True)
    steps_seen = trace.steps or [0]
    if trace.steps:
        k = k[k["step"].isin(steps_seen)]
    n = len(steps_seen)
    if k.empty:
        return {"kernels_per_forward": 0, "device_events_per_forward": 0, "kernel_us": None, "kernel_us_min": None,
                "kernels": [], "steady": True}
    compute = k[k["kind"].isin(["kernel", "cpu-generated"])]
    per_step_all = k.groupby("step").size().reindex(steps_seen, fill_value=0)
    per_step_compute = compute.groupby("step").size().reindex(steps_seen, fill_value=0)
    per_step_us = k.groupby("step")["duration_us"].sum().reindex(steps_seen, fill_value=0.0)
    rows = []
    for name, g in k.groupby("name", sort=False):
        rows.append({"name": str(name), "kind": str(g["kind"].iloc[0]), "role": V.kernel_role(str(name)),
                     "calls_per_forward": len(g) / n, "us_per_forward": float(g["duration_us"].sum()) / n,
                     "us_per_call": float(g["duration_us"].mean())})
    out: dict[str, Any] = {
        "kernels_per_forward": int(per_step_compute.median()),
        "device_events_per_forward": int(per_step_all.median()),
        "kernel_us": float(per_step_us.mean()),
        "kernel_us_min": float(per_step_us.min()),
        "kernels": rows,
        "steady": bool(per_step_all.nunique() == 1),
    }
    if not device_kernels:
        out["cpu_generated_kernel_us"] = out["kernel_us"]
        out["kernel_us"] = out["kernel_us_min"] = None
    return out


def measure_variant(variant: V.Variant, x: torch.Tensor, reference: torch.Tensor, ceilings: Ceilings,
                    shape: MLPShape, *, steps: int = 10, warmup: int = 5, e2e_iters: int = 50) -> dict[str, Any]:
    """Every number of one variant at one shape (see the module docstring). Never raises for a
    failing variant: its entry then has ``status`` "failed" and the ``reason``."""
    spec = variant.spec
    entry: dict[str, Any] = {"variant": spec.name, "label": spec.label, "description": spec.description,
                             "build_s": variant.build_s}
    dtype = x.dtype
    try:
        t0 = time.perf_counter()
        with torch.no_grad():
            out = variant(x)
        _sync(x.device)
        entry["first_call_s"] = time.perf_counter() - t0  # compile / autotune / first launch
        entry["rel_err"] = V.relative_error(out, reference)
        del out
        entry.update(kernel_stats(variant.fn, x, steps, warmup, spec.name))
        e2e = time_end_to_end(variant.fn, x, e2e_iters)
    except Exception as err:  # noqa: BLE001 - one failing variant must not stop the others
        reason = f"{type(err).__name__}: {str(err)[:500]}"
        if type(err).__name__ == "InterpreterError":
            reason = f"its Triton kernel cannot run in Triton's CPU interpreter ({reason})"
        return {**entry, "status": "failed", "reason": reason}
    entry["e2e_nosync_us"] = e2e["nosync_us"]
    entry["e2e_sync_us"] = e2e["sync_us"]
    if "nosync_events_us" in e2e:
        entry["e2e_nosync_events_us"] = e2e["nosync_events_us"]
    entry.update(derive_rates(entry, spec.plan, shape, dtype, ceilings))
    entry["status"] = "ok"
    return entry


def derive_rates(measured: Mapping[str, Any], plan: str | None, shape: MLPShape, dtype: torch.dtype,
                 ceilings: Ceilings) -> dict[str, Any]:
    """Plan, bytes, FLOPs, achieved rates and floors from a variant's measured times and kernels.

    `measured` holds ``kernel_us`` (None on a CPU), ``e2e_nosync_us`` and ``kernels`` (as from
    :func:`kernel_summary`); `plan` None means: read it from the kernel names.
    """
    out: dict[str, Any] = {}
    found = plan or V.infer_plan(k["name"] for k in measured["kernels"])
    out["plan"] = found
    out["plan_source"] = "by design" if plan else ("read from kernel names" if found else "unknown")
    flops = geglu_mlp_flops(shape.tokens, shape.dim, shape.hidden)
    out["flops"] = flops
    out["bytes"] = V.plan_bytes(found, shape, dtype) if found else None
    basis = "kernel_us" if measured.get("kernel_us") else "e2e_nosync_us"
    out["rate_basis"] = basis
    time_us = float(measured[basis])
    out["achieved_tflops"] = flops / time_us / 1e6
    out["achieved_tbps"] = out["bytes"] / time_us / 1e6 if out["bytes"] else None
    mlp_floor = max(flops / ceilings.matmul_flop_per_s, V.min_mlp_bytes(shape, dtype) / ceilings.copy_bytes_per_s) * 1e6
    out["mlp_floor_us"] = mlp_floor
    out["pct_of_mlp_floor"] = 100.0 * mlp_floor / time_us
    if found:
        out["plan_floor_us"] = V.plan_floor_us(found, ceilings, shape, dtype)
        out["pct_of_plan_floor"] = 100.0 * out["plan_floor_us"] / time_us
    pointwise = [k for k in measured["kernels"] if k["role"] == "pointwise"]
    if pointwise:
        out["pointwise_us"] = sum(k["us_per_forward"] for k in pointwise)
        out["pointwise_floor_us"] = geglu_bytes(shape.tokens, shape.hidden, dtype) / ceilings.copy_bytes_per_s * 1e6
    out["gemm_us"] = sum(k["us_per_forward"] for k in measured["kernels"] if k["role"] == "gemm") or None
    return out


# ---------------------------------------------------------------------------------------------
# the whole run
# ---------------------------------------------------------------------------------------------

def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, check=False)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _driver() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=False)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def _version(package: str) -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def provenance(device: torch.device, command: str | None = None) -> dict[str, Any]:
    """Where and when: device name, versions, date (UTC), command, git commit."""
    from .fused import triton_mode

    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        name, extra = props.name, {"sms": props.multi_processor_count, "cuda": torch.version.cuda,
                                   "driver": _driver(), "memory_gib": round(props.total_memory / 2**30)}
    else:
        from .roofline import cpu_name  # the same CPU name the ceilings report

        name, extra = f"CPU: {cpu_name()}", {"threads": torch.get_num_threads()}
    return {
        "device": name, "device_type": device.type, **extra,
        "torch": torch.__version__, "triton": _version("triton"), "liger_kernel": _version("liger-kernel"),
        "triton_mode": triton_mode(), "python": platform.python_version(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": command if command is not None else " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "git_commit": _git_commit(),
    }


def _mlp(shape: MLPShape, device: torch.device, dtype: torch.dtype, seed: int = 0) -> SimpleGeGLUMLP:
    torch.manual_seed(seed)
    return SimpleGeGLUMLP(shape.dim, shape.hidden).to(device, dtype).eval()


def _input(shape: MLPShape, device: torch.device, dtype: torch.dtype, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape.batch, shape.seq, shape.dim, generator=g).to(device, dtype)


@contextlib.contextmanager
def _settings(dev: torch.device) -> Iterator[None]:
    """Compiler settings for the run, restored afterwards.

    Dynamo's recompile limit is raised (each (variant, shape) is a static graph of the same forward,
    more than the default 8); on a CPU, Inductor's generated C++ kernels are made rows of the profile.
    """
    import torch._dynamo.config as dynamo_config
    import torch._inductor.config as inductor_config

    name = "recompile_limit" if hasattr(dynamo_config, "recompile_limit") else "cache_size_limit"
    with contextlib.ExitStack() as stack:
        stack.enter_context(dynamo_config.patch({name: max(getattr(dynamo_config, name), 64)}))
        if dev.type == "cpu":
            stack.enter_context(inductor_config.patch({"cpp.enable_kernel_profile": True}))
        yield


def run(device: str | torch.device = "cuda", *, shape: MLPShape | None = None, dtype: torch.dtype | None = None,
        variants: Sequence[str] = V.VARIANT_NAMES, sweep_m: Sequence[int] = (), sweep_seq: int = SWEEP_SEQ,
        sweep_variants: Sequence[str] | None = None, steps: int = 10, warmup: int = 5, e2e_iters: int = 50,
        sweep_steps: int = 5, sweep_note: str | None = None, budget_s: float | None = None, log: Log | None = None,
        on_stage: Callable[[dict], None] | None = None, command: str | None = None) -> dict[str, Any]:
    """Measure `variants` at `shape`, then kernel time per variant over `sweep_m`; returns the result dict.

    - device "cuda": blog shape in bf16 by default; "cpu": a small fp32 shape (Triton interpreter).
    - `sweep_variants`: variants in the sweep (default: those measured, minus max-autotune, whose
      compile takes minutes per shape). Each sweep size uses input ``[m // sweep_seq, sweep_seq, dim]``.
    - `sweep_note`: why variants outside `sweep_variants` were left out (stored in the result).
    - `budget_s`: stop the sweep early (and say so) once this many seconds have passed.
    - `log`: progress lines (default: silent); `on_stage(result)`: called after each stage with the
      partial result (the command line uses it to save as it goes).
    """
    log = log or _quiet
    started = time.perf_counter()
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' asked for, but no CUDA GPU is available here: use device='cpu'")
    if dev.type not in ("cuda", "cpu"):
        raise ValueError(f"device must be 'cuda' or 'cpu', got {device!r}")
    names = V.check_names(variants)
    from .fused import triton_mode

    if dev.type == "cuda" and triton_mode() != "cuda":
        raise ValueError("TRITON_INTERPRET is set: unset it to measure compiled Triton kernels on the GPU")
    if dev.type == "cpu":
        V.check_triton_ready()
    shape = shape or (MLPShape() if dev.type == "cuda" else MLPShape(batch=2, seq=16, dim=64, hidden=128))
    dtype = dtype or (torch.bfloat16 if dev.type == "cuda" else torch.float32)
    sweep_m = [int(m) for m in sweep_m]
    for m in sweep_m:
        if m < sweep_seq or m % sweep_seq:
            raise ValueError(f"sweep sizes must be multiples of sweep_seq={sweep_seq}, got {m}")
    with _settings(dev):
        def elapsed() -> float:
            return time.perf_counter() - started

        result: dict[str, Any] = {
            "schema": SCHEMA, "complete": False,
            "provenance": provenance(dev, command),
            "config": {"device": dev.type, "dtype": str(dtype).removeprefix("torch."),
                       "shape": {"batch": shape.batch, "seq": shape.seq, "dim": shape.dim, "hidden": shape.hidden,
                                 "tokens": shape.tokens},
                       "variants": names, "steps": steps, "warmup": warmup, "e2e_iters": e2e_iters,
                       "sweep_m": sweep_m, "sweep_seq": sweep_seq, "sweep_steps": sweep_steps,
                       "compile": "dynamic=False: one static graph per shape"},
            "variants": {}, "sweep": {"m": [], "rows": [], "skipped": {}}, "timings": {},
        }
        stage = on_stage or (lambda _r: None)

        log(f"{result['provenance']['device']}: torch {torch.__version__}, triton {result['provenance']['triton']}, "
            f"Triton mode {triton_mode()}")
        log("ceilings: copy bandwidth and matmul rate ...")
        ceilings = measure_ceilings(dev)
        result["ceilings"] = ceilings.as_dict()
        log(f"  copy {ceilings.copy_tbps:.3g} TB/s, matmul {ceilings.matmul_tflops:.3g} TFLOP/s ({ceilings.matmul_dtype})")
        stage(result)

        mlp = _mlp(shape, dev, dtype)
        x = _input(shape, dev, dtype)
        reference = V.reference_forward(mlp, x)
        log(f"shape batch {shape.batch} x seq {shape.seq} (M={shape.tokens}), dim {shape.dim}, hidden {shape.hidden}, "
            f"{result['config']['dtype']}")
        built: dict[str, V.Variant] = {}
        for name in names:
            t0 = time.perf_counter()
            log(f"variant {name}: build, first call{' (compiles)' if V.VARIANTS[name].compiles else ''}, profile, time ...")
            try:
                variant = V.build_variant(name, mlp)
            except V.VariantUnavailable as err:
                result["variants"][name] = {"variant": name, "label": V.VARIANTS[name].label, "status": "unavailable",
                                            "reason": str(err)}
                log(f"  unavailable: {err}")
                stage(result)
                continue
            entry = measure_variant(variant, x, reference, ceilings, shape, steps=steps, warmup=warmup, e2e_iters=e2e_iters)
            entry["measure_s"] = time.perf_counter() - t0
            result["variants"][name] = entry
            if entry["status"] == "ok":
                built[name] = variant
                kt = f"{entry['kernel_us']:.1f} us" if entry["kernel_us"] is not None else "n/a (no device kernels)"
                log(f"  {entry['kernels_per_forward']} kernels/forward, kernel time {kt}, e2e {entry['e2e_nosync_us']:.1f} us "
                    f"(sync {entry['e2e_sync_us']:.1f} us), rel err {entry['rel_err']:.1e}, "
                    f"{entry['pct_of_mlp_floor']:.0f}% of MLP floor  [{entry['measure_s']:.1f} s]")
            else:
                log(f"  FAILED: {entry['reason']}")
            stage(result)
        del reference

        if sweep_m:
            skipped = result["sweep"]["skipped"]
            if sweep_variants is None:
                wanted = [n for n in names if n != "compile-max-autotune"]
                if "compile-max-autotune" in names:
                    skipped["compile-max-autotune"] = "its compile takes minutes per shape: measured at the main shape only"
            else:
                wanted = V.check_names(sweep_variants)
                for n in names:
                    if n not in wanted:
                        skipped[n] = sweep_note or "left out of the sweep (sweep_variants)"
            for n in wanted:
                if n not in built:
                    skipped[n] = "not measured at the main shape (unavailable or failed)"
            sweep_names = [n for n in wanted if n in built]
            _sweep(result, built, mlp, sweep_names, sweep_m, sweep_seq, sweep_steps, dev, dtype, ceilings,
                   budget_s, elapsed, log, stage)

        result["timings"]["total_s"] = elapsed()
        result["complete"] = True
        stage(result)
        log(f"done in {elapsed():.1f} s")
        return result


def _sweep(result: dict, built: Mapping[str, V.Variant], mlp: SimpleGeGLUMLP, names: Sequence[str],
           sizes: Sequence[int], seq: int, steps: int, dev: torch.device, dtype: torch.dtype, ceilings: Ceilings,
           budget_s: float | None, elapsed: Callable[[], float], log: Log, stage: Callable[[dict], None]) -> None:
    sweep = result["sweep"]
    shape0 = result["config"]["shape"]
    log(f"sweep over M = {list(sizes)} (seq {seq}): {', '.join(names)}")
    last = 0.0
    for m in sizes:
        if budget_s is not None and elapsed() + 1.5 * last > budget_s:
            sweep["truncated"] = (f"stopped before M={m}: {elapsed():.0f} s spent, the last size took {last:.0f} s, "
                                  f"budget {budget_s:.0f} s")
            log(f"  {sweep['truncated']}")
            break
        t0 = time.perf_counter()
        shape = MLPShape(batch=m // seq, seq=seq, dim=shape0["dim"], hidden=shape0["hidden"])
        x = _input(shape, dev, dtype, seed=2)
        flops = geglu_mlp_flops(shape.tokens, shape.dim, shape.hidden)
        floor = max(flops / ceilings.matmul_flop_per_s, V.min_mlp_bytes(shape, dtype) / ceilings.copy_bytes_per_s) * 1e6
        parts = []
        for name in names:
            row: dict[str, Any] = {"variant": name, "m": m, "floor_us": floor}
            try:
                stats = kernel_stats(built[name].fn, x, steps, 2, name)
                e2e = time_end_to_end(built[name].fn, x, max(steps, 5))
                row.update(kernels_per_forward=stats["kernels_per_forward"], kernel_us=stats["kernel_us"],
                           e2e_nosync_us=e2e["nosync_us"], status="ok")
                shown = stats["kernel_us"] if stats["kernel_us"] is not None else e2e["nosync_us"]
                parts.append(f"{name} {shown:.1f}")
            except Exception as err:  # noqa: BLE001 - record and continue with the others
                row.update(status="failed", reason=f"{type(err).__name__}: {str(err)[:300]}")
                parts.append(f"{name} FAILED")
            sweep["rows"].append(row)
        sweep["m"].append(m)
        last = time.perf_counter() - t0
        log(f"  M={m:6d} (floor {floor:.1f} us): " + ", ".join(parts) + f" us  [{last:.1f} s]")
        stage(result)


# ---------------------------------------------------------------------------------------------
# saving and loading
# ---------------------------------------------------------------------------------------------

def save_results(result: Mapping[str, Any], path: str | os.PathLike) -> Path:
    """Write `result` as indented JSON, atomically (a reader never sees half a file)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=1, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, target)
    return target


class BenchResults:
    """A benchmark result (from :func:`run` or a saved file) with the notebook's tables and figures."""

    def __init__(self, data: Mapping[str, Any], source: str, path: str | None = None) -> None:
        if not isinstance(data, Mapping) or data.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} result (schema {data.get('schema') if isinstance(data, Mapping) else None!r}); "
                             "write one with benchmarks/mlp_variants.py")
        missing = [k for k in ("provenance", "config", "ceilings", "variants", "sweep") if k not in data]
        if missing:
            raise ValueError(f"results lack {missing}: the file is incomplete or from another tool")
        self.data = dict(data)
        self.source = source  # "live" or "file"
        self.path = path

    # ------------------------------------------------------------------ what it is
    @property
    def provenance(self) -> dict[str, Any]:
        return dict(self.data["provenance"])

    @property
    def label(self) -> str:
        """e.g. "NVIDIA H200, torch 2.11.0+cu130, triton 3.6.0, 2026-11-29 (recorded results)"."""
        p = self.provenance
        kind = "measured live" if self.source == "live" else "recorded results"
        return f"{p['device']}, torch {p['torch']}, triton {p['triton']}, {str(p['date'])[:10]} ({kind})"

    @property
    def on_gpu(self) -> bool:
        """True when the numbers were measured on a CUDA GPU (kernel times exist)."""
        return self.data["config"]["device"] == "cuda"

    @property
    def complete(self) -> bool:
        return bool(self.data.get("complete"))

    @property
    def shape(self) -> MLPShape:
        s = self.data["config"]["shape"]
        return MLPShape(batch=s["batch"], seq=s["seq"], dim=s["dim"], hidden=s["hidden"])

    @property
    def dtype(self) -> torch.dtype:
        return getattr(torch, self.data["config"]["dtype"])

    @property
    def ceilings(self) -> Ceilings:
        """The ceilings measured in that run; marked as a recorded reference when read from a file."""
        c = dict(self.data["ceilings"])
        if self.source != "live":
            c["source"] = "reference"
            c["method"] = f"measured in the benchmark run on {self.provenance['device']}: {c.get('method', '')}"
            c["recorded"] = str(self.provenance["date"])[:10]
        return ceilings_from_dict(c)

    def card(self) -> pd.DataFrame:
        """Provenance as a two-column table (item, value)."""
        p = self.provenance
        rows = [("results", self.label), ("file", self.path or "(live run, not saved)"),
                ("complete", str(self.complete))]
        rows += [(k, str(v)) for k, v in p.items() if v is not None]
        c = self.ceilings
        rows += [("copy bandwidth", f"{c.copy_tbps:.3g} TB/s"), ("matmul rate", f"{c.matmul_tflops:.3g} TFLOP/s"),
                 ("shape", f"batch {self.shape.batch} x seq {self.shape.seq} (M={self.shape.tokens}), "
                           f"dim {self.shape.dim}, hidden {self.shape.hidden}, {self.data['config']['dtype']}")]
        return pd.DataFrame(rows, columns=["item", "value"])

    def __repr__(self) -> str:
        ok = sum(1 for v in self.data["variants"].values() if v.get("status") == "ok")
        return f"<BenchResults {self.label}: {ok} variants measured, {len(self.data['sweep']['m'])} sweep sizes>"

    # ------------------------------------------------------------------ tables
    def variant(self, name: str) -> dict[str, Any]:
        """The entry of one variant; KeyError naming those present."""
        if name not in self.data["variants"]:
            raise KeyError(f"variant {name!r} is not in these results; present: {list(self.data['variants'])}")
        return dict(self.data["variants"][name])

    def measured(self) -> list[str]:
        """Names of the variants measured successfully, in run order."""
        return [n for n, v in self.data["variants"].items() if v.get("status") == "ok"]

    def table(self) -> pd.DataFrame:
        """One row per variant: kernels, times, rates, floors, error (unavailable ones with their reason)."""
        cols = ["variant", "label", "status", "kernels_per_forward", "device_events_per_forward", "kernel_us",
                "e2e_nosync_us", "e2e_sync_us", "achieved_tflops", "mlp_floor_us", "pct_of_mlp_floor", "plan",
                "plan_floor_us",
                "pct_of_plan_floor", "pointwise_us", "rel_err", "first_call_s", "reason"]
        rows = [{c: v.get(c) for c in cols} for v in self.data["variants"].values()]
        out = pd.DataFrame(rows, columns=cols)
        out.attrs["results"] = self.label
        return out

    def kernels(self, name: str) -> pd.DataFrame:
        """The kernels one variant launches per forward: name, kind, role, calls and us per forward."""
        v = self.variant(name)
        if v.get("status") != "ok":
            raise ValueError(f"variant {name!r} was not measured: {v.get('reason')}")
        out = pd.DataFrame(v["kernels"], columns=["name", "kind", "role", "calls_per_forward", "us_per_forward",
                                                  "us_per_call"])
        out.attrs["results"] = f"{name}: {self.label}"
        return out

    def pointwise(self) -> pd.DataFrame:
        """The GeGLU pointwise work of each variant that has any: its kernels, time per forward and
        % of the memory floor (gate and up read, h written once, at the copy bandwidth of the run)."""
        rows = []
        for n in self.measured():
            v = self.variant(n)
            if v.get("pointwise_us") is None:
                continue
            names = [k["name"] for k in v["kernels"] if k["role"] == "pointwise"]
            rows.append({"variant": n, "pointwise_kernels": len(names), "us_per_forward": v["pointwise_us"],
                         "floor_us": v["pointwise_floor_us"],
                         "pct_of_floor": 100 * v["pointwise_floor_us"] / v["pointwise_us"],
                         "kernel_names": "; ".join(_short(k) for k in names)})
        out = pd.DataFrame(rows, columns=["variant", "pointwise_kernels", "us_per_forward", "floor_us", "pct_of_floor",
                                          "kernel_names"])
        out.attrs["results"] = self.label
        return out

    def time_us(self, name: str) -> float:
        """The time a variant's rates use: kernel time on a GPU, back-to-back wall time on a CPU."""
        v = self.variant(name)
        if v.get("status") != "ok":
            raise ValueError(f"variant {name!r} was not measured: {v.get('reason')}")
        return float(v[v["rate_basis"]])

    def roofline_frame(self) -> pd.DataFrame:
        """``helpers.roofline.roofline_frame`` of the measured variants (whole forward: plan bytes, MLP FLOPs)."""
        rows = [{"name": self.variant(n)["label"], "duration_us": self.time_us(n),
                 "bytes": self.variant(n).get("bytes"), "flops": self.variant(n)["flops"]} for n in self.measured()]
        return roofline_frame(rows, self.ceilings)

    def roofline_figure(self):
        """Roofline with every measured variant placed on it, titled with where the numbers come from."""
        fig = roofline_figure(self.roofline_frame(), self.ceilings)
        basis = "kernel time" if all(self.variant(n)["rate_basis"] == "kernel_us" for n in self.measured()) \
            else "wall time"
        fig.update_layout(title=f"MLP forward, {basis} per call: {self.label}")
        return fig

    def sweep(self) -> pd.DataFrame:
        """One row per (variant, M) of the sweep: kernels, kernel time, back-to-back wall time, floor."""
        rows = self.data["sweep"]["rows"]
        cols = ["variant", "m", "kernels_per_forward", "kernel_us", "e2e_nosync_us", "floor_us", "status"]
        out = pd.DataFrame([{c: r.get(c) for c in cols} for r in rows], columns=cols)
        out.attrs["results"] = self.label
        return out

    def sweep_winners(self) -> pd.DataFrame:
        """Per sweep size: the fastest variant by kernel time, its time, and the runner-up."""
        df = self.sweep()
        df = df[df["status"] == "ok"].copy()
        if df.empty:
            raise ValueError(f"no sweep in {self.label}: run benchmarks/mlp_variants.py with a sweep")
        metric = "kernel_us" if df["kernel_us"].notna().all() else "e2e_nosync_us"
        rows = []
        for m, g in df.groupby("m"):
            g = g.sort_values(metric)
            first, second = g.iloc[0], (g.iloc[1] if len(g) > 1 else None)
            rows.append({"m": int(m), "fastest": first["variant"], f"fastest_{metric}": first[metric],
                         "runner_up": None if second is None else second["variant"],
                         "margin_pct": None if second is None else 100 * (second[metric] / first[metric] - 1),
                         "pct_of_floor": 100 * first["floor_us"] / first[metric]})
        return pd.DataFrame(rows)

    def sweep_figure(self, relative_to: str | None = None):
        """Kernel time per forward against M, one line per variant, the floor dashed (log-log).

        `relative_to`: a variant name; then each line is that variant's time divided by this one's
        (below 1: faster than it).
        """
        import plotly.graph_objects as go

        df = self.sweep()
        df = df[df["status"] == "ok"]
        if df.empty:
            raise ValueError(f"no sweep in {self.label}")
        metric = "kernel_us" if df["kernel_us"].notna().all() else "e2e_nosync_us"
        what = "kernel time per forward" if metric == "kernel_us" else "wall time per forward (back to back)"
        fig = go.Figure()
        base = None
        if relative_to is not None:
            if relative_to not in set(df["variant"]):
                raise ValueError(f"{relative_to!r} is not in the sweep; variants: {sorted(set(df['variant']))}")
            base = df[df["variant"] == relative_to].set_index("m")[metric]
        labels = {n: v.get("label", n) for n, v in self.data["variants"].items()}
        for name, g in df.groupby("variant", sort=False):
            g = g.sort_values("m")
            y = g[metric].to_numpy() if base is None else (g[metric].to_numpy() / base.reindex(g["m"]).to_numpy())
            fig.add_trace(go.Scatter(x=g["m"], y=y, mode="lines+markers", name=labels.get(name, name),
                                     hovertemplate=f"{labels.get(name, name)}<br>M=%{{x}}<br>%{{y:.3g}}<extra></extra>"))
        if base is None:
            floor = df.groupby("m")["floor_us"].first().sort_index()
            fig.add_trace(go.Scatter(x=floor.index, y=floor.to_numpy(), mode="lines", name="floor (ceilings of this run)",
                                     line={"color": "black", "dash": "dash"}))
            fig.update_yaxes(type="log", title=f"{what} (us)")
        else:
            fig.add_hline(y=1.0, line={"color": "gray", "dash": "dot"})
            fig.update_yaxes(title=f"{what} / {labels.get(relative_to, relative_to)}'s")
        fig.update_xaxes(type="log", title="M = batch x seq (tokens)")
        fig.update_layout(title=f"Sweep over M: {self.label}", template="plotly_white")
        return fig


def _short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."


def load_results(path: str | os.PathLike | None = None) -> BenchResults:
    """Read a saved result (default: ``traces/benchmarks/h200_mlp_variants.json``, the committed H200 run).

    The environment variable ``COURSE_MLP_RESULTS`` points the default elsewhere (for developing
    the notebook); the result's own provenance is always what the tables show. A missing file
    raises FileNotFoundError that says how to record it.
    """
    if path is None:
        path = os.environ.get(RESULTS_ENV) or RESULTS_PATH
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(
            f"no benchmark results at {p}. They are recorded on a GPU (about 4 minutes on an H200) with\n"
            f"    python benchmarks/mlp_variants.py --out {RESULTS_PATH.relative_to(REPO_ROOT)}\n"
            "and committed; notebook 06 reads them on machines without a GPU.")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{p} is not valid JSON ({err}); was the benchmark interrupted while writing?") from None
    return BenchResults(data, source="file", path=str(p))


def from_run(result: Mapping[str, Any]) -> BenchResults:
    """Wrap the dict :func:`run` returned in this process."""
    return BenchResults(result, source="live")


def default_out_allowed(result_device: str, out: Path) -> bool:
    """True unless `out` is named ``h200_*`` and the device is not an H200 (never file CPU numbers as H200's)."""
    return not (out.name.startswith("h200_") and "H200" not in result_device)


def print_table(result: Mapping[str, Any]) -> str:
    """The main table as text (what the command line prints at the end)."""
    r = BenchResults(result, source="live")
    c = r.ceilings
    lines = [f"{r.label}", f"ceilings: copy {c.copy_tbps:.3g} TB/s, matmul {c.matmul_tflops:.3g} TFLOP/s; "
             f"shape M={r.shape.tokens}, dim {r.shape.dim}, hidden {r.shape.hidden}, {r.data['config']['dtype']}"]
    head = (f"{'variant':22s} {'kern':>4s} {'kernel us':>10s} {'e2e us':>9s} {'sync us':>9s} {'TFLOP/s':>8s} "
            f"{'%floor':>7s} {'%plan':>6s} {'rel err':>8s}")
    lines += [head, "-" * len(head)]

    def f(v: Any, fmt: str) -> str:
        return format(v, fmt) if isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v)) else "-"

    for name, v in r.data["variants"].items():
        if v.get("status") != "ok":
            lines.append(f"{name:22s} {v.get('status')}: {str(v.get('reason'))[:90]}")
            continue
        lines.append(f"{name:22s} {v['kernels_per_forward']:4d} {f(v['kernel_us'], '10.1f'):>10s} "
                     f"{v['e2e_nosync_us']:9.1f} {v['e2e_sync_us']:9.1f} {v['achieved_tflops']:8.3g} "
                     f"{v['pct_of_mlp_floor']:7.1f} {f(v.get('pct_of_plan_floor'), '6.1f'):>6s} {v['rel_err']:8.1e}")
    sweep = r.sweep()
    if not sweep.empty:
        metric = "kernel_us" if sweep["kernel_us"].notna().all() else "e2e_nosync_us"
        pivot = sweep[sweep["status"] == "ok"].pivot(index="m", columns="variant", values=metric)
        lines += ["", f"sweep: {metric} per forward", pivot.round(1).to_string()]
    return "\n".join(lines)


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
