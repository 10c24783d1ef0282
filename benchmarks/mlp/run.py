"""Measure the MLP variants of :mod:`helpers.mlp.variants` at several shapes, in one process.

:func:`run` measures, in this order (the most important first, so that a time budget cuts the
least important): the main shape (inference, then training), the sweep over M at the main
shape's dims, then the other shape presets (:data:`SHAPES`). It returns a JSON-ready dict;
``benchmarks/mlp_variants.py`` is its command line, notebook 06 calls it live on a GPU, and
:func:`helpers.mlp.results.load_results` reads a saved one. What each number means is in
:mod:`helpers.mlp.bench_measure`.

On a CPU there are no device kernels: eager ATen ops run inline and the Triton kernels run in the
interpreter, so ``kernel_us`` is None and rates use ``e2e_nosync_us`` (``rate_basis`` says which).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from helpers.kernels.gate_up_tuning import load_table
from helpers.kernels.launch_plans import plans_table
from helpers.measure.ceilings import Ceilings, measure_ceilings
from helpers.measure.device import provenance, resolve_device
from helpers.measure.timing import time_end_to_end
from helpers.mlp import plans as P
from helpers.mlp import variants as V
from helpers.mlp.model import MLPShape, SimpleGeGLUMLP, reference_forward
from helpers.paths import REPO_ROOT
from helpers.triton_env import ensure_interpreter_ready, portable_kernels, triton_mode

from . import training_variants as TV
from .measure import graphed, kernel_stats, measure_training, measure_variant
from .shapes import SHAPES, ShapePreset, check_shapes

SCHEMA = "course-mlp-variants/2"
RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
RESULTS_PATH = RESULTS_DIR / "h200_mlp_variants.json"
RESULTS_ENV = "COURSE_MLP_RESULTS"  # development only: read another results file
SWEEP_SEQ = 128
GPU_SWEEP_M: tuple[int, ...] = tuple(2**i for i in range(7, 16))  # 128 ... 32768
# What the notebook runs live on a GPU: everything but max-autotune (its compile takes minutes).
LIVE_VARIANTS: tuple[str, ...] = tuple(n for n in V.VARIANT_NAMES if n != "compile-max-autotune")

Log = Callable[[str], None]


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


class _Budget:
    """Seconds since the run started, and whether a stage expected to take `need` s still fits."""

    def __init__(self, budget_s: float | None) -> None:
        self.started = time.perf_counter()
        self.budget_s = budget_s

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def fits(self, need: float) -> bool:
        return self.budget_s is None or self.elapsed() + need <= self.budget_s


def run(
    device: str | torch.device = "cuda",
    *,
    shapes: Sequence[str] | None = None,
    shape: MLPShape | None = None,
    dtype: torch.dtype | None = None,
    variants: Sequence[str] | None = None,
    training: Sequence[str] | None = None,
    sweep_m: Sequence[int] = (),
    sweep_seq: int = SWEEP_SEQ,
    sweep_variants: Sequence[str] | None = None,
    steps: int = 10,
    warmup: int = 5,
    e2e_iters: int = 50,
    train_steps: int = 10,
    sweep_steps: int = 5,
    sweep_note: str | None = None,
    graphs: bool = True,
    budget_s: float | None = None,
    log: Log | None = None,
    on_stage: Callable[[dict], None] | None = None,
    command: str | None = None,
) -> dict[str, Any]:
    """Measure the variants at each shape preset, and kernel and wall times over `sweep_m`; returns the result dict.

    - `shapes`: preset names of :data:`SHAPES` (or tags: ``model``, ``decode``); the first is the
      main shape (the sweep uses its dims). Default: ``["blog"]`` on a GPU, ``["tiny"]`` on a CPU.
      `shape`/`dtype` override the main preset's sizes and dtype.
    - `variants` / `training`: override the main shape's inference / training variant lists
      (``training=()``: no training); other presets use their own lists.
    - `sweep_variants`: variants in the sweep (default: those measured at the main shape, minus
      max-autotune). Each sweep size uses input ``[m // sweep_seq, sweep_seq, dim]``.
    - `budget_s`: skip stages (and say so) that would end after this many seconds.
    - `log`: progress lines (default: silent); `on_stage(result)`: called after each stage with the
      partial result (the command line uses it to save as it goes).
    """
    log = log or (lambda _m: None)
    budget = _Budget(budget_s)
    dev = resolve_device(device)
    if dev.type == "cuda" and triton_mode() != "cuda":
        raise ValueError("TRITON_INTERPRET is set: unset it to measure compiled Triton kernels on the GPU")
    if dev.type == "cpu":
        ensure_interpreter_ready()
    names = check_shapes(shapes or (["blog"] if dev.type == "cuda" else ["tiny"]))
    main = SHAPES[names[0]]
    if shape is not None or dtype is not None:
        main = ShapePreset(
            main.name,
            shape or main.shape,
            str(dtype or getattr(torch, main.dtype)).removeprefix("torch."),
            main.why if shape is None else "a shape given by the caller",
            main.variants,
            main.training,
        )
    main_variants = TV.check_names(variants if variants is not None else main.variants)
    main_training = list(training if training is not None else main.training)
    for n in main_training:
        if n not in TV.TRAINING_VARIANTS:
            raise ValueError(f"unknown training variant {n!r}; choose from {', '.join(TV.TRAINING_VARIANTS)}")
    sweep_m = [int(m) for m in sweep_m]
    for m in sweep_m:
        if m < sweep_seq or m % sweep_seq:
            raise ValueError(f"sweep sizes must be multiples of sweep_seq={sweep_seq}, got {m}")
    table = load_table()
    result: dict[str, Any] = {
        "schema": SCHEMA,
        "complete": False,
        "provenance": provenance(dev, command),
        "config": {
            "device": dev.type,
            "main": main.name,
            "shapes": names,
            "dtype": main.dtype,
            "shape": main.describe()["shape"],
            "variants": main_variants,
            "training": main_training,
            "steps": steps,
            "warmup": warmup,
            "e2e_iters": e2e_iters,
            "train_steps": train_steps,
            "sweep_m": sweep_m,
            "sweep_seq": sweep_seq,
            "sweep_steps": sweep_steps,
            "graphs": graphs,
            "budget_s": budget_s,
            "compile": "dynamic=False: one static graph per shape",
            "portable_kernels": portable_kernels(),
            "gate_up_table": None if table is None else {"device": table.get("device"), **_table_date(table)},
        },
        "shapes": {},
        "sweep": {"m": [], "rows": [], "skipped": {}},
        "skipped": {},
        "timings": {},
    }
    stage = on_stage or (lambda _r: None)
    with _settings(dev):
        log(
            f"{result['provenance']['device']}: torch {torch.__version__}, triton {result['provenance']['triton']}, "
            f"Triton mode {triton_mode()}, portable kernels {portable_kernels()}, "
            f"gate+up table {'none (defaults)' if table is None else table.get('device')}"
        )
        log("ceilings: memory roof and matmul rate ...")
        ceilings = measure_ceilings(dev)
        result["ceilings"] = ceilings.as_dict()
        log(
            f"  memory roof {ceilings.bandwidth_tbps:.3g} TB/s (copy {ceilings.copy_tbps:.3g}), "
            f"matmul {ceilings.matmul_tflops:.3g} TFLOP/s ({ceilings.matmul_dtype})"
        )
        stage(result)

        opts = {"steps": steps, "warmup": warmup, "e2e_iters": e2e_iters, "graphs": graphs, "log": log}
        built = _measure_shape(
            result, main, main_variants, main_training, dev, ceilings, train_steps, opts, budget, stage
        )
        if sweep_m:
            _sweep(
                result,
                main,
                built,
                sweep_variants,
                sweep_note,
                sweep_m,
                sweep_seq,
                sweep_steps,
                dev,
                ceilings,
                budget,
                log,
                stage,
            )
        del built
        for name in names[1:]:
            preset = SHAPES[name]
            if not budget.fits(25.0):
                result["skipped"][name] = f"time budget: {budget.elapsed():.0f} s of {budget_s:.0f} s spent"
                log(f"shape {name}: skipped ({result['skipped'][name]})")
                continue
            _measure_shape(
                result,
                preset,
                list(preset.variants),
                list(preset.training),
                dev,
                ceilings,
                train_steps,
                opts,
                budget,
                stage,
            )
        result["gate_up_plans"] = json.loads(plans_table().to_json(orient="records"))  # plain JSON types
        result["timings"]["total_s"] = budget.elapsed()
        result["complete"] = True
        stage(result)
        log(f"done in {budget.elapsed():.1f} s")
        return result


def _table_date(table: Mapping[str, Any]) -> dict[str, Any]:
    p = table.get("provenance") or {}
    return {"date": p.get("date"), "triton": p.get("triton"), "entries": len(table.get("entries", []))}


def _measure_shape(
    result: dict,
    preset: ShapePreset,
    names: list[str],
    training: list[str],
    dev: torch.device,
    ceilings: Ceilings,
    train_steps: int,
    opts: dict,
    budget: _Budget,
    stage: Callable[[dict], None],
) -> dict[str, V.Variant]:
    """Inference (then training) of one preset; returns the built inference variants (for the sweep)."""
    log = opts["log"]
    shape, dtype = preset.shape, getattr(torch, preset.dtype)
    if dev.type == "cpu" and dtype != torch.float32:
        dtype = torch.float32  # the interpreter computes bf16 wrongly
    entry: dict[str, Any] = {
        **preset.describe(),
        "dtype": str(dtype).removeprefix("torch."),
        "variants": {},
        "training": {},
    }
    result["shapes"][preset.name] = entry
    mlp = _mlp(shape, dev, dtype)
    x = _input(shape, dev, dtype)
    reference = reference_forward(mlp, x)
    log(
        f"shape {preset.name}: M={shape.tokens}, dim {shape.dim}, hidden {shape.hidden}, {entry['dtype']} ({preset.why})"
    )
    built: dict[str, V.Variant] = {}
    for name in names:
        t0 = time.perf_counter()
        spec = V.VARIANTS[name]
        log(f"  {name}: build, first call{' (compiles)' if spec.compiles else ''}, profile, time, graph ...")
        try:
            variant = V.build_variant(name, mlp)
        except V.VariantUnavailable as err:
            entry["variants"][name] = {
                "variant": name,
                "label": spec.label,
                "status": "unavailable",
                "reason": str(err),
            }
            log(f"    unavailable: {err}")
            continue
        v = measure_variant(
            variant, x, reference, ceilings, shape, steps=opts["steps"], warmup=opts["warmup"],
            e2e_iters=opts["e2e_iters"], graphs=opts["graphs"],
        )  # fmt: skip
        v["measure_s"] = time.perf_counter() - t0
        entry["variants"][name] = v
        if v["status"] == "ok":
            built[name] = variant
            log("    " + _inference_line(v))
        else:
            log(f"    FAILED: {v['reason']}")
        stage(result)
    del reference
    if training:
        _measure_training(entry, mlp, x, training, dev, train_steps, budget, log, stage, result)
    return built


def _fmt(v: Any, spec: str = ".1f") -> str:
    return format(v, spec) if isinstance(v, (int, float)) else "n/a"


def _inference_line(v: Mapping[str, Any]) -> str:
    return (
        f"{v['kernels_per_forward']} kernels, kernel {_fmt(v.get('kernel_us'))} us, e2e {_fmt(v['e2e_nosync_us'])} "
        f"(sync {_fmt(v['e2e_sync_us'])}, host overhead {_fmt(v.get('host_overhead_us'))}, enqueue "
        f"{_fmt(v.get('enqueue_us'))}), graphed {_fmt(v.get('graphed_us'))} us, rel err {v['rel_err']:.1e} "
        f"[{v['measure_s']:.1f} s]"
    )


def _measure_training(entry, mlp, x, names, dev, train_steps, budget, log, stage, result) -> None:
    train_x = x.detach().clone().requires_grad_(True)
    g = torch.Generator().manual_seed(3)
    dy = torch.randn(x.shape, generator=g).to(x.device, x.dtype)
    # float32 reference of the input gradient
    ref_mlp = _mlp(MLPShape(1, 1, mlp.gate_proj.in_features, mlp.gate_proj.out_features), x.device, torch.float32)
    ref_mlp.load_state_dict({k: v.float() for k, v in mlp.state_dict().items()})
    xf = x.detach().float().requires_grad_(True)
    ref_mlp(xf).backward(dy.float())
    dx_ref = xf.grad
    del ref_mlp, xf
    for name in names:
        if not budget.fits(10.0):
            entry["training"][name] = {"variant": name, "status": "skipped", "reason": "time budget"}
            continue
        log(
            f"  training {name}: build, first step{' (compiles)' if TV.TRAINING_VARIANTS[name].compiles else ''}, time, memory ..."
        )
        t0 = time.perf_counter()
        try:
            spec, module = TV.build_training(name, mlp)
        except V.VariantUnavailable as err:
            entry["training"][name] = {"variant": name, "status": "unavailable", "reason": str(err)}
            log(f"    unavailable: {err}")
            continue
        t = measure_training(spec, module, train_x, dy, dx_ref, steps=train_steps)
        t["measure_s"] = time.perf_counter() - t0
        entry["training"][name] = t
        del module
        if t["status"] == "ok":
            log(
                f"    step {_fmt(t['step_us'])} us (wall {_fmt(t['step_wall_us'])}), peak {_fmt(t.get('peak_mb'))} MB, "
                f"saved {_fmt(t.get('saved_mb'))} MB, dx rel err {t['dx_rel_err']:.1e} [{t['measure_s']:.1f} s]"
            )
        else:
            log(f"    FAILED: {t['reason']}")
        stage(result)


def _sweep(
    result, main, built, sweep_variants, sweep_note, sizes, seq, steps, dev, ceilings, budget, log, stage
) -> None:
    sweep = result["sweep"]
    skipped = sweep["skipped"]
    measured = list(result["shapes"][main.name]["variants"])
    if sweep_variants is None:
        wanted = [n for n in measured if n != "compile-max-autotune"]
        if "compile-max-autotune" in measured:
            skipped["compile-max-autotune"] = "its compile takes minutes per shape: measured at the main shape only"
    else:
        wanted = TV.check_names(sweep_variants)
        for n in measured:
            if n not in wanted:
                skipped[n] = sweep_note or "left out of the sweep (sweep_variants)"
    for n in wanted:
        if n not in built:
            skipped[n] = "not measured at the main shape (unavailable or failed)"
    names = [n for n in wanted if n in built]
    dtype = getattr(torch, result["shapes"][main.name]["dtype"])
    log(f"sweep over M = {list(sizes)} (seq {seq}): {', '.join(names)}")
    last = 0.0
    for m in sizes:
        if not budget.fits(1.5 * last):
            sweep["truncated"] = (
                f"stopped before M={m}: {budget.elapsed():.0f} s spent, the last size took {last:.0f} s"
            )
            log(f"  {sweep['truncated']}")
            break
        t0 = time.perf_counter()
        shape = MLPShape(batch=m // seq, seq=seq, dim=main.shape.dim, hidden=main.shape.hidden)
        x = _input(shape, dev, dtype, seed=2)
        floor = P.mlp_floor_us(shape, dtype, ceilings)
        parts = []
        for name in names:
            row: dict[str, Any] = {"variant": name, "m": m, "floor_us": floor}
            try:
                stats = kernel_stats(built[name].fn, x, steps, 2, name)
                e2e = time_end_to_end(built[name].fn, x, iters=max(steps, 10))
                row.update(
                    kernels_per_forward=stats["kernels_per_forward"],
                    kernel_us=stats["kernel_us"],
                    e2e_nosync_us=e2e["nosync_us"],
                    e2e_sync_us=e2e["sync_us"],
                    enqueue_us=e2e.get("enqueue_us"),
                    status="ok",
                )
                if result["config"]["graphs"]:
                    row.update(graphed(built[name].fn, x, max(steps, 10)))
                shown = stats["kernel_us"] if stats["kernel_us"] is not None else e2e["nosync_us"]
                parts.append(f"{name} {shown:.1f}/{e2e['sync_us']:.1f}")
            except Exception as err:  # noqa: BLE001 - record and continue with the others
                row.update(status="failed", reason=f"{type(err).__name__}: {str(err)[:300]}")
                parts.append(f"{name} FAILED")
            sweep["rows"].append(row)
        sweep["m"].append(m)
        last = time.perf_counter() - t0
        log(f"  M={m:6d} (floor {floor:.1f} us), kernel/sync us: " + ", ".join(parts) + f"  [{last:.1f} s]")
        stage(result)


# ---------------------------------------------------------------------------------------------
# saving
# ---------------------------------------------------------------------------------------------


def save_results(result: Mapping[str, Any], path: str | os.PathLike) -> Path:
    """Write `result` as indented JSON, atomically (a reader never sees half a file)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=1, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, target)
    return target
