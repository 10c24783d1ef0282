"""Every attention implementation side by side on one GPU: time, TFLOP/s, % of the matmul ceiling, memory.

    python benchmarks/attention.py                                  # on an H200: writes benchmarks/results/h200_attention.json (~4 min)
    python benchmarks/attention.py --device cpu --quick --out /tmp/attention_cpu.json   # CI smoke run, < 1 min

Causal attention, bf16, head dim 128 and 64, sequence 1024 to 16384 (batch x seq = 16384 tokens,
heads x head_dim = 2048), for: every SDPA backend (flash, cuDNN, memory-efficient, math), the
course's Triton kernel (TMA path and pointer path), FlexAttention (compiled, causal BlockMask) and
the hand-written attention (eager and compiled). Per row: median time per call (CUDA events),
kernel time per call (profiler), achieved TFLOP/s and % of the bf16 matmul ceiling measured in the
same run, peak memory of one call, relative error against a float32 reference. Details in
helpers/attention/bench.py. The JSON is rewritten after each pass (fused kernels, score-matrix
versions, compiled versions), so an interrupted run keeps what it measured (``"complete": false``);
``--budget-s`` skips what is left once the time is used (recorded as skipped).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from common import device_and_out, fmt, iter_sizes, log  # noqa: E402

from helpers.attention import bench  # noqa: E402

RESULTS_PATH = ROOT / "benchmarks" / "results" / "h200_attention.json"
QUICK = {"tokens": 64, "hidden": 32, "head_dims": [16], "seqs": [32, 64], "repeats": 2}
QUICK_VARIANTS = ["sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "course", "sdpa-math", "manual-eager", "course-pointer"]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    ap.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda when available, else cpu")
    ap.add_argument("--quick", action="store_true", help="tiny shapes, no compiled variants (CI smoke run)")
    ap.add_argument(
        "--out", type=Path, default=None, help=f"JSON to write (default on an H200: {RESULTS_PATH.relative_to(ROOT)})"
    )
    ap.add_argument("--variants", default=None, help=f"comma-separated subset of {','.join(bench.VARIANTS)}")
    ap.add_argument("--seqs", default=None, help="comma-separated sequence lengths (default 1024,...,16384)")
    ap.add_argument("--head-dims", default=None, help="comma-separated head dims (default 128,64)")
    ap.add_argument(
        "--budget-s", type=float, default=215.0, help="skip what is left after this many seconds (default 215)"
    )
    return ap.parse_args(argv)


def table(result: dict) -> str:
    """The summary printed at the end: time per variant and shape, then the course kernel's targets."""
    c = result["ceilings"]
    lines = [
        f"{result['provenance']['device']}, torch {result['provenance']['torch']}, triton {result['provenance']['triton']}",
        f"ceilings: matmul {c['matmul_flop_per_s'] / 1e12:.0f} TFLOP/s, copy {c['copy_bytes_per_s'] / 1e12:.2f} TB/s",
        f"{'variant':16s} {'d':>4s} {'seq':>6s} {'kernel us':>10s} {'call us':>10s} {'TFLOP/s':>8s} {'%mm':>6s} {'peak MB':>9s} {'rel err':>8s}",
    ]
    for r in result["rows"]:
        if r.get("status") != "ok":
            lines.append(
                f"{r['variant']:16s} {r['head_dim']:4d} {r['seq']:6d} {r['status']}: {str(r.get('reason'))[:80]}"
            )
            continue
        lines.append(
            f"{r['variant']:16s} {r['head_dim']:4d} {r['seq']:6d} {fmt(r.get('kernel_us'), '10.1f'):>10s} "
            f"{r['time_us']:10.1f} {r['tflops']:8.1f} {r['pct_of_matmul']:6.1f} {r['peak_mb']:9.1f} {r['rel_err']:8.1e}"
        )
    lines.append("")
    lines.append("course kernel: time / flash, time / fastest other (target <= 1.0 at seq >= 2048, <= 1.2)")
    for t in result.get("targets") or bench.targets(result):
        lines.append(
            f"  d={t['head_dim']:4d} seq={t['seq']:6d} course {t['course_us']:9.1f} us  vs flash {fmt(t['vs_flash'], '5.2f')}"
            f"  vs fastest ({t['fastest_other']}) {fmt(t['vs_fastest_other'], '5.2f')}  err {t['course_rel_err']:.1e}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    chosen = device_and_out(args.device, args.out, RESULTS_PATH)
    if chosen is None:
        return 2
    device, out = chosen
    kwargs: dict = {}
    if args.quick:
        kwargs.update(QUICK)
        kwargs["variants"] = QUICK_VARIANTS
    if args.variants:
        kwargs["variants"] = [v.strip() for v in args.variants.split(",") if v.strip()]
    if args.seqs:
        kwargs["seqs"] = iter_sizes(args.seqs)
    if args.head_dims:
        kwargs["head_dims"] = iter_sizes(args.head_dims)
    command = " ".join(
        shlex.quote(a) for a in ["python", "benchmarks/attention.py", *(sys.argv[1:] if argv is None else argv)]
    )

    def save(partial: dict) -> None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(partial, indent=1, default=str) + "\n")

    try:
        result = bench.run(device, budget_s=args.budget_s, log=log, on_stage=save, command=command, **kwargs)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    save(result)
    print(f"\n{table(result)}")
    log(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
