"""Tune the course's gate+up kernels on a GPU and write the table the launchers read.

    python benchmarks/geglu_kernels.py --out /tmp/h200_gate_up_tuning.json --table-out /tmp/gate_up_table.json
        # on an H200, about 3 minutes: every candidate configuration at every problem below
    python benchmarks/geglu_kernels.py --table-from /tmp/h200_gate_up_tuning.json --table-out helpers/kernels/gate_up_table.json
        # (CPU) rebuild the table from a saved sweep
    python benchmarks/geglu_kernels.py --device cpu --quick --out /tmp/t.json --table-out /tmp/t_table.json   # CI smoke run

Three kernels ("kinds", helpers/kernels/gate_up_tuning.py): ``forward`` (gate+up GEMM with the
GeGLU epilogue), ``forward_gu`` (the same, also storing the pre-activations: training in save
mode) and ``backward`` (the dh GEMM with the GeGLU-backward epilogue). For each problem (dim,
hidden, M) every candidate configuration of the kind is compiled, checked against a float32
reference (a configuration that computes wrong numbers is rejected) and timed: a CUDA graph of
5 launches replayed 4 times between CUDA events, so the time is the kernels' own (no host launch
cost, which at small M exceeds the kernel). Next to it, the same stage done the way
torch.compile does it: ``reference_us`` (forward: two cuBLAS GEMMs and the GeGLU kernel;
backward: the cuBLAS dh GEMM and the GeGLU backward kernel), and ``gemm_only_us`` (the cuBLAS GEMM
alone, no GeGLU: the GEMM speed a fused kernel must approach).

Warp-specialised candidates run last, after the table has been written once: a compiler crash
there leaves the rest. The results JSON (with provenance) and the table are rewritten after every
problem. Commit the table as ``helpers/kernels/gate_up_table.json`` and the results under
``benchmarks/results/``; the launchers pick the nearest tuned entry for a new shape.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402
from common import log, time_graphed  # noqa: E402

from helpers.kernels import gate_up_tuning as T  # noqa: E402
from helpers.kernels.gate_up import gate_up_forward, geglu_backward_gemm, pack_gate_up  # noqa: E402
from helpers.kernels.geglu_pointwise import geglu, geglu_backward  # noqa: E402
from helpers.kernels.launch_plans import clear_plans, config_label  # noqa: E402
from helpers.measure.device import provenance  # noqa: E402
from helpers.measure.numerics import relative_error  # noqa: E402

SCHEMA = "course-gate-up-tuning/1"

# What the sweep tries on a Hopper GPU (TMA path), largest tiles first; warp-specialised variants
# last, since a compiler crash there must not cost the rest. Timings: benchmarks/results/h200_gate_up_tuning.json.
CANDIDATES: dict[str, list[triton.Config]] = {
    "forward": [
        T.tma_config(128, 256, 64, 3, 8),
        T.tma_config(128, 256, 64, 4, 8),
        T.tma_config(256, 128, 64, 3, 8),
        T.tma_config(128, 128, 64, 4, 8),
        T.tma_config(128, 128, 64, 4, 4),
        T.tma_config(128, 128, 128, 3, 8),
        T.tma_config(64, 256, 64, 4, 4),
        T.tma_config(64, 128, 64, 4, 4),
        T.tma_config(64, 128, 128, 4, 4),
        T.tma_config(64, 64, 64, 5, 4),
        T.tma_config(64, 64, 128, 4, 4),
        T.tma_config(128, 256, 64, 3, 8, group_m=16),
        T.tma_config(128, 256, 64, 3, 8, WARP_SPECIALIZE=True),
        T.tma_config(128, 256, 64, 4, 8, FLATTEN=False, WARP_SPECIALIZE=True),
    ],
    "forward_gu": [
        T.tma_config(128, 256, 64, 2, 8),
        T.tma_config(128, 128, 64, 4, 8),
        T.tma_config(128, 128, 64, 3, 8),
        T.tma_config(128, 128, 64, 4, 4),
        T.tma_config(256, 128, 64, 2, 8),
        T.tma_config(64, 256, 64, 3, 4),
        T.tma_config(64, 128, 64, 4, 4),
        T.tma_config(64, 64, 64, 4, 4),
    ],
    "backward": [
        T.tma_config(128, 64, 64, 4, 8),
        T.tma_config(128, 64, 64, 4, 4),
        T.tma_config(128, 128, 64, 2, 8),
        T.tma_config(64, 128, 64, 4, 4),
        T.tma_config(128, 64, 128, 3, 8),
        T.tma_config(64, 64, 64, 4, 4),
        T.tma_config(256, 64, 64, 3, 8),
    ],
}


def make_table(rows: Iterable[Mapping[str, Any]], provenance: Mapping[str, Any]) -> dict[str, Any]:
    """The table to commit from a tuning sweep's rows: per (kind, dtype, m, n, k), the fastest config.

    Each row needs ``kind``, ``dtype``, ``m``, ``n``, ``k``, ``config`` (a dict), ``us`` (None or
    absent when the config failed); ``dim``, ``hidden`` and ``reference_us`` are kept when present.
    """
    best: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        if r.get("us") is None or r.get("kind") not in T.KINDS:
            continue
        key = (r["kind"], r["dtype"], r["m"], r["n"], r["k"])
        if key not in best or r["us"] < best[key]["us"]:
            best[key] = {
                k: r[k]
                for k in (
                    "kind",
                    "dtype",
                    "m",
                    "n",
                    "k",
                    "dim",
                    "hidden",
                    "config",
                    "us",
                    "reference_us",
                    "gemm_only_us",
                )
                if k in r
            }
    if "capability" not in provenance:
        raise ValueError("provenance must name the GPU's compute capability (helpers.measure.device.provenance does)")
    return {
        "schema": T.TABLE_SCHEMA,
        "device": provenance.get("device"),
        "capability": provenance["capability"],
        "sms": provenance.get("sms"),
        "provenance": dict(provenance),
        "entries": sorted(best.values(), key=lambda e: (e["kind"], e["k"], e["n"], e["m"])),
    }


# (dim, hidden): M values for the forward; M values for training (forward_gu and backward).
# The blog's shape first, then the model sizes of the benchmark's presets: a time budget cuts the last.
GPU_PROBLEMS: list[tuple[int, int, tuple[int, ...], tuple[int, ...]]] = [
    (768, 3072, (128, 512, 2048, 8192, 32768), (2048, 8192)),
    (4096, 14336, (128, 512, 4096, 16384), (4096,)),
    (2048, 16384, (128, 512, 4096, 16384), (4096,)),
    (2048, 8192, (128, 512, 4096), ()),
]
QUICK_PROBLEMS = [(48, 40, (37,), (37,))]
MAX_REL_ERR = 2e-2  # bf16 outputs: a correct kernel lands between 1e-3 and 1e-2


def _is_ws(cfg) -> bool:
    return bool(cfg.kwargs.get("WARP_SPECIALIZE"))


def _time(fn, device: torch.device) -> float:
    """Microseconds per call: CUDA graph replays on a GPU, median wall time in the interpreter."""
    if device.type == "cuda":
        return time_graphed(fn, torch.empty(0, device=device), iters=4, calls_per_graph=5)["graphed_us"]
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        fn(None)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


class Problem:
    """Inputs, references and reference timings of one (dim, hidden, M) on one device."""

    def __init__(self, dim: int, hidden: int, m: int, dtype: torch.dtype, device: torch.device) -> None:
        g = torch.Generator().manual_seed(dim * 7 + hidden + m)
        self.dim, self.hidden, self.m, self.dtype = dim, hidden, m, dtype

        def randn(*shape, scale=1.0):
            return (torch.randn(*shape, generator=g) * scale).to(device, dtype)

        self.x = randn(m, dim)
        wg, wu = randn(hidden, dim, scale=dim**-0.5), randn(hidden, dim, scale=dim**-0.5)
        self.w = pack_gate_up(wg, wu)
        self.w_cat = torch.cat([wg, wu])
        self.wg, self.wu = wg, wu
        self.wd = randn(dim, hidden, scale=hidden**-0.5)
        self.dy = randn(m, dim)
        xf = self.x.float()
        self.gu_ref = xf @ self.w.float().T
        g32, u32 = self.gu_ref[:, 0::2], self.gu_ref[:, 1::2]
        self.h_ref = F.gelu(g32, approximate="tanh") * u32
        self.gu = self.gu_ref.to(dtype)  # what the backward kernel reads (as the forward stores it)
        self._dgu_ref: torch.Tensor | None = None

    @property
    def dgu_ref(self) -> torch.Tensor:
        """The backward's reference, float32 from the stored gu (computed when first needed)."""
        if self._dgu_ref is None:
            gate = self.gu.float()[:, 0::2].requires_grad_(True)
            up = self.gu.float()[:, 1::2].requires_grad_(True)
            (F.gelu(gate, approximate="tanh") * up).backward(self.dy.float() @ self.wd.float())
            self._dgu_ref = torch.stack((gate.grad, up.grad), dim=-1).flatten(-2)
        return self._dgu_ref

    def references(self, device: torch.device) -> dict[str, float]:
        """The torch.compile way of each stage, and the GEMM alone, in us."""
        x, H = self.x, self.hidden
        gu_cat = F.linear(x, self.w_cat)
        return {
            "forward": _time(lambda _: geglu(F.linear(x, self.wg), F.linear(x, self.wu)), device),
            "forward_gemm_only": _time(lambda _: F.linear(x, self.w_cat), device),
            "backward": _time(lambda _: geglu_backward(self.dy @ self.wd, gu_cat[:, :H], gu_cat[:, H:])[0], device),
            "backward_gemm_only": _time(lambda _: self.dy @ self.wd, device),
        }

    def run(self, kind: str, cfg) -> tuple[float, float]:
        """(us, relative error) of one configuration."""
        if kind == "backward":

            def fn(_):
                return geglu_backward_gemm(self.dy, self.wd, self.gu, config=cfg)[0]

            err = relative_error(fn(None), self.dgu_ref)
        else:
            store = kind == "forward_gu"
            h, gu = gate_up_forward(self.x, self.w, store_gu=store, config=cfg)
            err = relative_error(h, self.h_ref)
            if store:
                err = max(err, relative_error(gu, self.gu_ref))

            def fn(_):
                return gate_up_forward(self.x, self.w, store_gu=store, config=cfg)[0]

        return _time(fn, self.x.device), err


def sweep(
    problems, kinds, device: torch.device, dtype: torch.dtype, quick: bool, results: dict, save, ws: bool, deadline
) -> None:
    """Time every candidate of each kind at each problem; append rows to ``results["rows"]``.

    Problems that would start after `deadline` (a ``time.perf_counter()`` value) are listed in
    ``results["skipped"]`` instead.
    """
    for dim, hidden, ms_fwd, ms_train in problems:
        for m in sorted(set(ms_fwd) | set(ms_train)):
            todo = [k for k in kinds if (m in ms_fwd if k == "forward" else m in ms_train)]
            if not todo:
                continue
            if time.perf_counter() > deadline:
                results.setdefault("skipped", []).append(
                    {"dim": dim, "hidden": hidden, "m": m, "kinds": todo, "ws": ws}
                )
                log(f"  {dim}x{hidden} M={m}: skipped (time budget)")
                continue
            t0 = time.perf_counter()
            p = Problem(dim, hidden, m, dtype, device)
            key = f"{dim}x{hidden} M={m}"
            refs = results["references"].setdefault(key, p.references(device))
            for kind in todo:
                cands = [T.INTERPRETER_CONFIG] if quick else [c for c in CANDIDATES[kind] if _is_ws(c) == ws]
                best = None
                for cfg in cands:
                    row = {
                        "kind": kind,
                        "dtype": str(dtype).removeprefix("torch."),
                        "dim": dim,
                        "hidden": hidden,
                        "m": m,
                        "n": 2 * hidden if kind != "backward" else hidden,
                        "k": dim,
                        "config": T.config_to_dict(cfg),
                        "label": config_label(cfg),
                        "reference_us": refs["backward" if kind == "backward" else "forward"],
                        "gemm_only_us": refs["backward_gemm_only" if kind == "backward" else "forward_gemm_only"],
                    }
                    try:
                        us, err = p.run(kind, cfg)
                        row.update(us=us if err <= MAX_REL_ERR else None, rel_err=err)
                        if err > MAX_REL_ERR:
                            row["error"] = f"wrong numbers: relative error {err:.2e}"
                    except Exception as exc:  # noqa: BLE001 - a config that cannot run here is a finding
                        row.update(us=None, error=f"{type(exc).__name__}: {str(exc)[:300]}")
                        if device.type == "cuda":
                            torch.cuda.synchronize()
                    results["rows"].append(row)
                    if row["us"] is not None and (best is None or row["us"] < best["us"]):
                        best = row
                if best is not None:
                    log(
                        f"  {key:22s} {kind:10s} best {best['label']:34s} {best['us']:9.1f} us  "
                        f"(torch.compile's way {best['reference_us']:9.1f}: {best['us'] / best['reference_us']:.2f}x; "
                        f"GEMM alone {best['gemm_only_us']:9.1f})"
                    )
                else:
                    log(f"  {key:22s} {kind:10s} no candidate ran")
            clear_plans()
            del p
            save(results)
            log(f"  ({time.perf_counter() - t0:.1f} s)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    ap.add_argument("--device", choices=["cuda", "cpu"], default=None)
    ap.add_argument("--quick", action="store_true", help="tiny problem, one configuration (CPU smoke run)")
    ap.add_argument("--out", type=Path, help="the sweep's results (JSON)")
    ap.add_argument("--table-out", type=Path, help="the table the launchers read (JSON)")
    ap.add_argument("--table-from", type=Path, help="rebuild --table-out from a saved --out file, measure nothing")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    ap.add_argument("--no-ws", action="store_true", help="skip the warp-specialised candidates")
    ap.add_argument(
        "--budget-s", type=float, default=270.0, help="start no problem after this many seconds (default 270)"
    )
    args = ap.parse_args(argv)
    if args.table_from is not None:
        if args.table_out is None:
            ap.error("--table-from needs --table-out")
        data = json.loads(args.table_from.read_text())
        table = make_table(data["rows"], data["provenance"])
        args.table_out.write_text(json.dumps(table, indent=1) + "\n")
        log(f"wrote {args.table_out}: {len(table['entries'])} entries")
        return 0
    if args.out is None:
        ap.error("--out is required (and --table-out to write the table)")
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        print("--device cuda: no CUDA GPU here", file=sys.stderr)
        return 2
    if device.type == "cpu" and not args.quick:
        print("on a CPU the kernels run in Triton's interpreter: only --quick makes sense", file=sys.stderr)
        return 2
    dtype = torch.float32 if device.type == "cpu" else getattr(torch, args.dtype)
    command = " ".join(shlex.quote(a) for a in ["python", "benchmarks/geglu_kernels.py", *(argv or sys.argv[1:])])
    prov = provenance(device, command)
    prov.setdefault("capability", device.type)  # a CPU table never matches a GPU's capability
    results: dict = {"schema": SCHEMA, "complete": False, "provenance": prov, "references": {}, "rows": []}

    def save(partial: dict) -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(partial, indent=1, default=str) + "\n")
        if args.table_out is not None:
            args.table_out.parent.mkdir(parents=True, exist_ok=True)
            args.table_out.write_text(json.dumps(make_table(partial["rows"], prov), indent=1) + "\n")

    log(f"{prov['device']}: torch {torch.__version__}, triton {prov['triton']}, {dtype}")
    problems = QUICK_PROBLEMS if args.quick else GPU_PROBLEMS
    kinds = list(T.KINDS)
    started = time.perf_counter()
    deadline = started + args.budget_s
    sweep(problems, kinds, device, dtype, args.quick, results, save, ws=False, deadline=deadline)
    if not args.quick and not args.no_ws:
        log("warp-specialised candidates (last: a compiler crash here leaves the table above)")
        sweep(problems, ["forward"], device, dtype, args.quick, results, save, ws=True, deadline=deadline)
    results["complete"] = True
    results["total_s"] = time.perf_counter() - started
    save(results)
    table = make_table(results["rows"], prov)
    print()
    print(
        f"{'problem':28s} {'kind':10s} {'best config':36s} {'us':>9s} {'compile way':>11s} {'ratio':>6s} {'GEMM alone':>10s}"
    )
    for e in table["entries"]:
        ratio = e["us"] / e["reference_us"] if e.get("reference_us") else float("nan")
        label = config_label(T.config_from_dict(e["config"]))
        print(
            f"{e['dim']}x{e['hidden']} M={e['m']:<14d} {e['kind']:10s} {label:36s} {e['us']:9.1f} "
            f"{e['reference_us']:11.1f} {ratio:6.2f} {e.get('gemm_only_us', float('nan')):10.1f}"
        )
    failed = [r for r in results["rows"] if r.get("us") is None]
    print(
        f"\n{len(results['rows'])} timings, {len(failed)} configurations failed or rejected; {results['total_s']:.0f} s"
    )
    log(f"wrote {args.out}" + (f" and {args.table_out}" if args.table_out else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
