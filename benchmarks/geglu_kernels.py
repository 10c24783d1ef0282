"""Benchmark the course's fused Triton kernels against eager PyTorch, Inductor and Liger (GPU only).

    python benchmarks/geglu_kernels.py --out benchmarks/results/h200_geglu_kernels.json          # the table (~40 s on an H200)
    python benchmarks/geglu_kernels.py --sweep --out benchmarks/results/h200_geglu_kernels.json    # + tuning sweep (~20 s more)

What is measured, all in one process so the numbers share a GPU, clocks and software:
- ceilings: device copy bandwidth (a large ``copy_``, bytes read + written) and the bf16 GEMM rate
  (8192^3 ``torch.mm``);
- the GeGLU pointwise ``gelu_tanh(gate) * up`` on [8192, 3072] bf16: eager (two kernels),
  Inductor (``torch.compile`` of the same function: one generated kernel), Liger's GEGLU (if
  ``liger_kernel`` imports), the course's ``helpers.fused.geglu`` (separate tensors, and the two
  strided halves of one [M, 2H] tensor);
- the whole MLP forward at the blog shape (M=8192, dim 768, hidden 3072, bf16, no_grad): eager,
  ``torch.compile`` (default mode), ``helpers.fused.FusedGeGLUMLP``, and its two kernels alone.

Each row gives: the ``triton.testing.do_bench`` median (it flushes L2 between calls); the mean of
50 back-to-back calls between two CUDA events; the sum of device kernel time per call from
``torch.profiler`` (the measure notebook 04 uses: median of 3 rounds, the variants interleaved);
and the host time per call (enqueue only), which is where launch overhead shows up: when it
exceeds the kernel time, do_bench and the events measure the CPU, not the GPU. Rates and
"% floor" use the kernel time: TB/s for memory-bound rows (bytes read + written once), TFLOP/s
for GEMM rows; "% floor" = floor time / kernel time, the floor being bytes / measured copy
bandwidth or flops / measured GEMM rate (above 100% means faster than the ceiling measurement).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from helpers.measure.ceilings import measure_ceilings  # noqa: E402
from helpers.measure.device import provenance  # noqa: E402
from helpers.measure.numerics import relative_error  # noqa: E402

T0 = time.time()


def log(msg: str) -> None:
    """Progress line with elapsed seconds (flushed: the run may be piped)."""
    print(f"[{time.time() - T0:6.1f}s] {msg}", flush=True)


def time_fn(fn: Callable[[], object], iters: int = 50) -> dict[str, float]:
    """do_bench median (us) and mean of ``iters`` back-to-back calls between CUDA events (us)."""
    import triton.testing

    med_ms = triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    host_s = time.perf_counter() - t0  # enqueue time only: the GPU queue does not fill in `iters` calls
    end.record()
    torch.cuda.synchronize()
    return {
        "do_bench_us": med_ms * 1e3,
        "events_us": start.elapsed_time(end) * 1e3 / iters,
        "cpu_us": host_s * 1e6 / iters,
    }


def kernel_time(fn: Callable[[], object], steps: int = 10) -> dict[str, object]:
    """Device time per call summed over all kernels/memsets (torch.profiler), and the kernels seen."""
    from torch.profiler import ProfilerActivity, profile

    # Warm up for ~20 ms of device work first: after an idle spell (a compile, say) the GPU's clocks
    # are low and take a while to ramp up, which would bias whichever variant is measured first.
    t_end = time.perf_counter() + 0.02
    while time.perf_counter() < t_end:
        fn()
        torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            fn()
        torch.cuda.synchronize()
    kernels: dict[str, dict[str, float]] = {}
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA and ev.device_time > 0:
            k = kernels.setdefault(ev.name, {"calls": 0, "us": 0.0})
            k["calls"] += 1
            k["us"] += ev.device_time
    per_call = {name: {"per_call": v["calls"] / steps, "us": v["us"] / v["calls"]} for name, v in kernels.items()}
    total = sum(v["us"] for v in kernels.values()) / steps
    return {"kernel_us": total, "kernels": per_call}


class Table:
    """Rows of (section, name, timings, work) rendered as text and kept for the JSON."""

    def __init__(self, copy_tbps: float, gemm_tflops: float) -> None:
        self.copy_tbps, self.gemm_tflops = copy_tbps, gemm_tflops
        self.rows: list[dict] = []

    def add(self, section: str, name: str, t: dict, *, nbytes: float = 0.0, flops: float = 0.0, **extra) -> dict:
        us = t.get("kernel_us", t["do_bench_us"])
        row = {"section": section, "name": name, **t, "bytes": nbytes, "flops": flops, **extra}
        if flops:
            row["tflops"] = flops / (us * 1e-6) / 1e12
            row["floor_us"] = flops / (self.gemm_tflops * 1e12) * 1e6
        elif nbytes:
            row["tbps"] = nbytes / (us * 1e-6) / 1e12
            row["floor_us"] = nbytes / (self.copy_tbps * 1e12) * 1e6
        if "floor_us" in row:
            row["pct_floor"] = 100.0 * row["floor_us"] / us
        self.rows.append(row)
        rate = (
            f"{row['tflops']:7.1f} TFLOP/s"
            if "tflops" in row
            else (f"{row['tbps']:7.2f} TB/s    " if "tbps" in row else " " * 15)
        )
        pct = f"{row['pct_floor']:5.1f}%" if "pct_floor" in row else "     "
        kt = f"{t['kernel_us']:8.1f}" if "kernel_us" in t else " " * 8
        log(
            f"  {section:9s} {name:42s} do_bench {t['do_bench_us']:8.1f} us  events {t['events_us']:8.1f} us  "
            f"kernels {kt} us  cpu {t['cpu_us']:7.1f} us  {rate} {pct}"
        )
        return row

    def render(self) -> str:
        head = f"{'section':9s} {'variant':42s} {'do_bench us':>11s} {'events us':>9s} {'kernel us':>9s} {'cpu us':>7s} {'rate':>16s} {'% floor':>7s}"
        lines = [head, "-" * len(head)]
        for r in self.rows:
            rate = f"{r['tflops']:.1f} TFLOP/s" if "tflops" in r else (f"{r['tbps']:.2f} TB/s" if "tbps" in r else "")
            pct = f"{r['pct_floor']:.1f}" if "pct_floor" in r else ""
            kt = f"{r['kernel_us']:.1f}" if "kernel_us" in r else ""
            lines.append(
                f"{r['section']:9s} {r['name']:42s} {r['do_bench_us']:11.1f} {r['events_us']:9.1f} {kt:>9s} {r['cpu_us']:7.1f} {rate:>16s} {pct:>7s}"
            )
        return "\n".join(lines)


def course_ceilings() -> tuple[float, float, dict]:
    """The course's one ceiling measurement (helpers.measure_ceilings), as TB/s and TFLOP/s."""
    log("ceilings: copy bandwidth and bf16 matmul rate (helpers.measure_ceilings) ...")
    c = measure_ceilings("cuda")
    log(f"  copy {c.copy_tbps:.2f} TB/s (read + write), matmul {c.matmul_tflops:.0f} TFLOP/s")
    return c.copy_tbps, c.matmul_tflops, c.as_dict()


def liger_geglu() -> Callable | None:
    """Liger-Kernel's GEGLU forward ``f(gate, up)``, or None (with a printed reason) if absent."""
    try:
        from liger_kernel.ops.geglu import LigerGELUMulFunction  # type: ignore[import-not-found]
    except Exception as exc:  # noqa: BLE001 - any import failure means "skip"
        log(f"  liger_kernel not importable ({type(exc).__name__}: {exc}): skipping Liger's GEGLU")
        return None
    return lambda g, u: LigerGELUMulFunction.apply(g, u)


def measure_variants(
    table: Table, section: str, variants: list[tuple[str, Callable[[], object], dict]], results: dict, rounds: int = 3
) -> None:
    """Time every variant: do_bench/events once, then profiler kernel time in ``rounds`` interleaved
    rounds (variant A, B, C, A, B, C, ...) and keep each variant's median, so a slow spell of the
    GPU (clocks, temperature) does not land on one variant only."""
    timings = {}
    for name, fn, _ in variants:
        timings[name] = time_fn(fn)
    kts: dict[str, list[dict]] = {name: [] for name, _, _ in variants}
    for r in range(rounds):
        log(f"  {section}: profiler round {r + 1}/{rounds}")
        for name, fn, _ in variants:
            kts[name].append(kernel_time(fn))
    for name, _, work in variants:
        runs = sorted(kts[name], key=lambda k: k["kernel_us"])
        median = runs[len(runs) // 2]
        results.setdefault("kernels", {}).setdefault(section, {})[name] = {
            "median": median,
            "all_kernel_us": [k["kernel_us"] for k in kts[name]],
        }
        table.add(section, name, {**timings[name], "kernel_us": median["kernel_us"]}, **work)


def bench_pointwise(table: Table, M: int, H: int, results: dict) -> None:
    from helpers import geglu, geglu_reference

    dt = torch.bfloat16
    gate = torch.randn(M, H, device="cuda", dtype=dt)
    up = torch.randn(M, H, device="cuda", dtype=dt)
    wide = torch.randn(M, 2 * H, device="cuda", dtype=dt)
    g_half, u_half = wide[:, :H], wide[:, H:]
    nbytes = 3 * M * H * gate.element_size()
    ref = geglu_reference(gate, up)

    def eager(g, u):
        return F.gelu(g, approximate="tanh") * u

    log(f"pointwise [{M}, {H}] bf16: torch.compile of gelu * mul (Inductor) ...")
    t = time.time()
    compiled = torch.compile(eager)
    log(f"  compiled in {time.time() - t:.1f} s, rel err {relative_error(compiled(gate, up), ref):.2e}")
    errs = {
        "course": relative_error(geglu(gate, up), ref),
        "halves": relative_error(geglu(g_half, u_half), geglu_reference(g_half, u_half)),
    }
    log(f"  course geglu rel err vs fp32 reference: {errs['course']:.2e} (halves of one tensor: {errs['halves']:.2e})")
    w = {"nbytes": nbytes}
    variants = [
        ("eager gelu + mul (2 kernels)", lambda: eager(gate, up), w),
        ("Inductor fused (torch.compile)", lambda: compiled(gate, up), w),
    ]
    liger = liger_geglu()
    if liger is not None:
        log(f"  Liger rel err {relative_error(liger(gate, up), ref):.2e}")
        variants.append(("Liger GEGLU", lambda: liger(gate, up), w))
    variants += [
        ("course geglu (separate tensors)", lambda: geglu(gate, up), {**w, "rel_err": errs["course"]}),
        ("course geglu (halves of one [M, 2H])", lambda: geglu(g_half, u_half), {**w, "rel_err": errs["halves"]}),
    ]
    log("pointwise: timing " + ", ".join(v[0] for v in variants))
    measure_variants(table, "pointwise", variants, results)


def bench_mlp(table: Table, shape, results: dict) -> None:
    from helpers import FusedGeGLUMLP, SimpleGeGLUMLP, gate_up_geglu
    from helpers.fused.gate_up_tuning import tuned_configs

    M, dim, hidden = shape.tokens, shape.dim, shape.hidden
    dt = torch.bfloat16
    torch.manual_seed(0)
    mlp = SimpleGeGLUMLP(dim, hidden).to("cuda", dt).eval()
    x = torch.randn(shape.batch, shape.seq, dim, device="cuda", dtype=dt)
    flops = 2 * M * dim * hidden * 3
    with torch.no_grad():
        ref = F.linear(
            F.gelu(F.linear(x.float(), mlp.gate_proj.weight.float()), approximate="tanh")
            * F.linear(x.float(), mlp.up_proj.weight.float()),
            mlp.down_proj.weight.float(),
        )
        log(f"MLP M={M} dim={dim} hidden={hidden} bf16: torch.compile (default mode) ...")
        t = time.time()
        cmlp = torch.compile(mlp)
        log(f"  compiled in {time.time() - t:.1f} s, rel err {relative_error(cmlp(x), ref):.2e}")
        log("MLP: helpers.fused.FusedGeGLUMLP (the first call autotunes the fused kernel) ...")
        t = time.time()
        fused = FusedGeGLUMLP.from_module(mlp).eval()
        err = relative_error(fused(x), ref)
        log(f"  ready in {time.time() - t:.1f} s, rel err vs fp32 reference {err:.2e}")
        results["autotuned_configs"] = {str(k): str(v) for k, v in tuned_configs().items()}
        log(f"  autotune picked: {results['autotuned_configs']}")
        x2 = x.reshape(-1, dim)
        w = fused.gate_up_weight
        w_cat = torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight])
        h = gate_up_geglu(x2, w)
        gu = {"flops": 2 * M * dim * 2 * hidden}
        variants = [
            ("eager (5 kernels)", lambda: mlp(x), {"flops": flops}),
            ("torch.compile default", lambda: cmlp(x), {"flops": flops}),
            ("course FusedGeGLUMLP (2 kernels)", lambda: fused(x), {"flops": flops, "rel_err": err}),
            ("gate+up: course gate_up_geglu", lambda: gate_up_geglu(x2, w), gu),
            ("gate+up: cuBLAS [Wg; Wu] (no GeGLU)", lambda: F.linear(x2, w_cat), gu),
            ("down: cuBLAS down_proj", lambda: F.linear(h, mlp.down_proj.weight), {"flops": 2 * M * dim * hidden}),
        ]
        log("MLP: timing " + ", ".join(v[0] for v in variants))
        measure_variants(table, "mlp", variants, results)


def sweep(results: dict, shape, copy_tbps: float, gemm_tflops: float) -> None:
    """Tuning sweep: pointwise block shapes and gate+up GEMM variants (explicit configs, no autotune).

    Each variant is timed by the profiler's kernel time (mean of 20 launches): do_bench medians
    of ~40 us kernels carry a few us of event overhead that hides 1% differences.
    """
    from helpers.fused.gate_up import gate_up_geglu, pack_gate_up
    from helpers.fused.gate_up_tuning import gate_up_config as _cfg
    from helpers.fused.geglu_pointwise import launch_geglu

    out: dict[str, list] = {"pointwise": [], "gate_up": []}
    M, H = shape.tokens, shape.hidden
    dt = torch.bfloat16
    gate = torch.randn(M, H, device="cuda", dtype=dt)
    up = torch.randn(M, H, device="cuda", dtype=dt)
    o = torch.empty_like(gate)
    nbytes = 3 * M * H * 2
    floor = nbytes / (copy_tbps * 1e12) * 1e6
    log(f"sweep: pointwise block shapes (floor {floor:.1f} us), profiler kernel time")
    for bm, bn, nw, stream in [
        (1, 1024, 4, False),
        (2, 1024, 4, False),
        (4, 1024, 4, False),
        (4, 1024, 8, False),
        (8, 1024, 8, False),
        (2, 2048, 8, False),
        (8, 512, 4, False),
        (16, 256, 4, False),
        (1, 1024, 4, True),
        (2, 1024, 4, True),
        (4, 1024, 4, True),
        (4, 1024, 8, True),
        (8, 1024, 8, True),
    ]:
        try:
            fn = lambda: launch_geglu(gate, up, o, bm, bn, nw, streaming=stream)  # noqa: E731
            fn()
            us = kernel_time(fn, steps=20)["kernel_us"]
            out["pointwise"].append(
                {
                    "block_m": bm,
                    "block_n": bn,
                    "num_warps": nw,
                    "streaming": stream,
                    "kernel_us": us,
                    "pct_floor": 100 * floor / us,
                }
            )
            log(
                f"  BLOCK {bm:3d} x {bn:5d}, {nw} warps, streaming={stream!s:5s}: {us:6.2f} us  {100 * floor / us:5.1f}% of floor"
            )
        except Exception as exc:  # noqa: BLE001 - keep sweeping
            log(f"  BLOCK {bm} x {bn}, {nw} warps, streaming={stream}: FAILED {type(exc).__name__}: {str(exc)[:160]}")
    gate = up = o = None  # free the buffers before the GEMM sweep

    dim = shape.dim
    hidden = H
    x = torch.randn(M, dim, device="cuda", dtype=dt)
    wg = torch.randn(hidden, dim, device="cuda", dtype=dt) / dim**0.5
    wu = torch.randn(hidden, dim, device="cuda", dtype=dt) / dim**0.5
    ref = F.gelu(x.float() @ wg.float().T, approximate="tanh") * (x.float() @ wu.float().T)
    flops = 2 * M * dim * 2 * hidden
    packed = {1: pack_gate_up(wg, wu)}
    variants = [
        ("tma", _cfg(128, 256, 64, 3, 8, FLATTEN=True)),
        ("tma", _cfg(128, 256, 64, 4, 8, FLATTEN=True)),
        ("tma", _cfg(128, 256, 64, 3, 8, FLATTEN=False)),
        ("tma", _cfg(256, 128, 64, 4, 8, FLATTEN=True)),
        ("tma", _cfg(128, 128, 64, 4, 4, FLATTEN=True)),
        ("tma", _cfg(128, 256, 64, 3, 8, FLATTEN=True, GROUP_ROWS=128)),
        ("tma", _cfg(128, 256, 64, 3, 8, group_m=4, FLATTEN=True)),
        ("tma", _cfg(128, 256, 64, 3, 8, group_m=16, FLATTEN=True)),
        # Hopper warp specialisation (triton 3.6): 128x128 tiles with 4 warps crashed the compiler
        # (WSDataPartition "unsupported op type"), so only the large tile is swept.
        ("tma", _cfg(128, 256, 64, 3, 8, FLATTEN=False, WARP_SPECIALIZE=True)),
        ("tma", _cfg(128, 256, 64, 3, 8, FLATTEN=True, WARP_SPECIALIZE=True)),
        ("pointer", _cfg(128, 256, 64, 3, 8)),
        ("pointer", _cfg(128, 128, 64, 3, 8)),
    ]
    log(f"sweep: gate+up GEMM with GeGLU epilogue, M={M} dim={dim} hidden={hidden} ({len(variants)} variants)")
    w_cat = torch.cat([wg, wu])
    t_cub = kernel_time(lambda: F.linear(x, w_cat), steps=20)["kernel_us"]
    log(f"  reference: cuBLAS concatenated GEMM (no GeGLU) {t_cub:.1f} us = {flops / t_cub / 1e6:.0f} TFLOP/s")
    out["cublas_concat_kernel_us"] = t_cub
    for kern, cfg in variants:
        group = cfg.kwargs.get("GROUP_ROWS", 1)
        if group not in packed:
            packed[group] = pack_gate_up(wg, wu, group=group)
        w = packed[group]
        kw = cfg.kwargs
        name = (
            f"{kern:7s} {kw['BLOCK_M']}x{kw['BLOCK_N']}x{kw['BLOCK_K']} s{cfg.num_stages} w{cfg.num_warps} G{kw['GROUP_M']} "
            f"flat={kw.get('FLATTEN', '-')} ws={kw.get('WARP_SPECIALIZE', False)} rows={group}"
        )
        try:
            t = time.time()
            h = gate_up_geglu(x, w, kernel=kern, config=cfg)
            torch.cuda.synchronize()
            ct = time.time() - t
            err = relative_error(h, ref)
            us = kernel_time(lambda: gate_up_geglu(x, w, kernel=kern, config=cfg), steps=20)["kernel_us"]
            out["gate_up"].append(
                {"variant": name, "kernel_us": us, "tflops": flops / us / 1e6, "rel_err": err, "compile_s": ct}
            )
            log(f"  {name:66s} {us:7.1f} us {flops / us / 1e6:5.0f} TFLOP/s  err {err:.1e}  (compile {ct:.1f} s)")
        except Exception as exc:  # noqa: BLE001
            out["gate_up"].append({"variant": name, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
            log(f"  {name:66s} FAILED {type(exc).__name__}: {str(exc)[:200]}")
    results["sweep"] = out


def summarize(rows: list[dict]) -> dict:
    """The comparisons the course cares about, from profiler kernel times of this run."""
    by = {(r["section"], r["name"]): r for r in rows}
    out: dict = {"lines": []}
    ours, ind = (
        by.get(("pointwise", "course geglu (separate tensors)")),
        by.get(("pointwise", "Inductor fused (torch.compile)")),
    )
    if ours and ind:
        out["pointwise"] = {
            "course_us": ours["kernel_us"],
            "inductor_us": ind["kernel_us"],
            "course_pct_floor": ours["pct_floor"],
            "inductor_pct_floor": ind["pct_floor"],
        }
        out["lines"].append(
            f"pointwise: course {ours['kernel_us']:.1f} us ({ours['pct_floor']:.1f}% of copy floor) vs Inductor "
            f"{ind['kernel_us']:.1f} us ({ind['pct_floor']:.1f}%): ratio {ours['kernel_us'] / ind['kernel_us']:.3f}"
        )
    fused, comp = by.get(("mlp", "course FusedGeGLUMLP (2 kernels)")), by.get(("mlp", "torch.compile default"))
    if fused and comp:
        ratio = fused["kernel_us"] / comp["kernel_us"]
        out["mlp"] = {"fused_us": fused["kernel_us"], "compile_us": comp["kernel_us"], "ratio": ratio}
        out["lines"].append(
            f"MLP forward kernel time: FusedGeGLUMLP {fused['kernel_us']:.1f} us vs torch.compile {comp['kernel_us']:.1f} us: ratio {ratio:.3f}"
        )
    gu, cub = by.get(("mlp", "gate+up: course gate_up_geglu")), by.get(("mlp", "gate+up: cuBLAS [Wg; Wu] (no GeGLU)"))
    if gu and cub:
        out["lines"].append(
            f"gate+up: fused kernel {gu['kernel_us']:.1f} us vs cuBLAS concatenated GEMM (no GeGLU) {cub['kernel_us']:.1f} us"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="where to write the JSON results")
    ap.add_argument("--sweep", action="store_true", help="also run the tuning sweep of kernel variants")
    ap.add_argument("--no-main", action="store_true", help="skip the main table (with --sweep)")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("This benchmark needs a CUDA GPU (the CPU interpreter would take hours and mean nothing).")
        return 2
    import triton

    from helpers import triton_mode
    from helpers.mlp.model import BLOG_SHAPE

    if triton_mode() != "cuda":
        print("TRITON_INTERPRET is set: unset it to benchmark compiled kernels.")
        return 2
    results: dict = {
        "provenance": {
            **provenance(torch.device("cuda", 0)),
            "shapes": {
                "pointwise": [BLOG_SHAPE.tokens, BLOG_SHAPE.hidden],
                "mlp": vars(BLOG_SHAPE) | {"tokens": BLOG_SHAPE.tokens},
            },
            "dtype": "bfloat16",
        }
    }
    log(f"{results['provenance']['device']}, torch {torch.__version__}, triton {triton.__version__}")
    copy_tbps, gemm_tflops, raw = course_ceilings()
    results["ceilings"] = {"copy_tbps": copy_tbps, "gemm_bf16_tflops": gemm_tflops, "raw": raw}
    table = Table(copy_tbps, gemm_tflops)
    sections = [("sweep", lambda: sweep(results, BLOG_SHAPE, copy_tbps, gemm_tflops))] if args.sweep else []
    if not args.no_main:
        sections += [
            ("pointwise", lambda: bench_pointwise(table, BLOG_SHAPE.tokens, BLOG_SHAPE.hidden, results)),
            ("mlp", lambda: bench_mlp(table, BLOG_SHAPE, results)),
        ]
    for name, run in sections:
        try:
            run()
        except Exception:  # noqa: BLE001 - report, keep the other sections and the JSON
            import traceback

            log(f"section {name} FAILED:\n{traceback.format_exc()}")
            results.setdefault("errors", {})[name] = traceback.format_exc()
    results["rows"] = table.rows
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1, default=str))
    print()
    print(
        f"ceilings: copy {copy_tbps:.2f} TB/s, bf16 GEMM {gemm_tflops:.0f} TFLOP/s  (% floor = floor time / measured)"
    )
    print(table.render())
    summary = summarize(table.rows)
    results["summary"] = summary
    args.out.write_text(json.dumps(results, indent=1, default=str))
    for line in summary["lines"]:
        print(line)
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
