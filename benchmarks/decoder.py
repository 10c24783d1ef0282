"""The whole decoder, every configuration of notebook 08's final table, measured in one process.

    python benchmarks/decoder.py                                        # on an H200: writes benchmarks/results/h200_decoder.json (<= 4 min)
    python benchmarks/decoder.py --resume                               # a second run: measures what the first one skipped
    python benchmarks/decoder.py --device cpu --quick --out /tmp/decoder_cpu.json   # CI smoke run, < 1 min

The 1B model (16 layers, hidden 2048, bf16) in each configuration of
helpers/decoder/configurations.py: eager; decode steps replayed from a CUDA graph; compiled blocks
(with and without graphs); the course's layers (one QKV GEMM, the fused gate+up GeGLU MLP kernel,
its flash-attention kernel), alone and inside compiled blocks; MLP recomputation in training; SDPA
backends forced one at a time. Measured: prefill (4 x 1024 prompt tokens) tokens/s; decode at
batch 1 (time per token, % of the weight-read floor = weight bytes / copy bandwidth measured in the
same run); training step (16 x 1024 tokens, fused AdamW) time and peak memory. Before the graphed
decode is measured, the eager decode step is profiled and the graph's step time predicted from its
trace. Then the transfer exercise's variant and its fix. Everything runs in priority order inside
``--budget-s`` (default 225 s; a compiled configuration's measurement starts only with 45 s
left); what does not fit, or fails, is recorded with the reason, and the JSON is rewritten after
each measurement (``"complete": false`` until the end). ``--resume`` keeps the successful
measurements of the existing file and measures only the rest (a second run fills what the first
one skipped).
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

import torch  # noqa: E402
from common import device_and_out, fmt, log  # noqa: E402

from helpers.decoder import bench  # noqa: E402
from helpers.decoder.results import RESULTS_PATH, DecoderResults  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    ap.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda when available, else cpu")
    ap.add_argument("--quick", action="store_true", help="tiny model, no compiled or graphed configurations (CI)")
    ap.add_argument(
        "--out", type=Path, default=None, help=f"JSON to write (default on an H200: {RESULTS_PATH.relative_to(ROOT)})"
    )
    ap.add_argument("--config", default=None, help="decoder preset (default: 1b on a GPU, small on a CPU)")
    ap.add_argument("--configurations", default=None, help=f"comma-separated subset of {','.join(bench.ORDER)}")
    ap.add_argument("--budget-s", type=float, default=225.0, help="stop starting measurements after this (default 225)")
    ap.add_argument(
        "--resume",
        action="store_true",
        help="keep the successful measurements of the existing --out file; measure only what it lacks",
    )
    return ap.parse_args(argv)


def table(result: dict) -> str:
    """The summary printed at the end: the final table, then the targets."""
    r = DecoderResults(result, source="live")
    lines = [
        r.label,
        f"{result['config']['name']}: {result['weight_bytes'] / 1e9:.2f} GB of weights, decode floor "
        f"{result['decode_floor_us']:.0f} us/token at a memory roof of {r.ceilings.bandwidth_tbps:.2f} TB/s",
        f"{'configuration':22s} {'prefill tok/s':>13s} {'decode us':>10s} {'%floor':>7s} {'train ms':>9s} {'peak GB':>8s}",
    ]
    for _, row in r.table().iterrows():
        lines.append(
            f"{row['configuration']:22s} {fmt(row['prefill_tokens_per_s'], '13,.0f'):>13s} "
            f"{fmt(row['decode_us'], '10.1f'):>10s} {fmt(row['pct_of_floor'], '7.1f'):>7s} "
            f"{fmt(row['train_step_ms'], '9.1f'):>9s} {fmt(row['train_peak_gb'], '8.1f'):>8s}"
        )
    failures = r.failures()
    if not failures.empty:
        lines.append("")
        lines.extend(f"{f.configuration} {f.use}: {f.status} ({str(f.reason)[:100]})" for f in failures.itertuples())
    lines.append("")
    for t in result.get("targets") or []:
        mark = {True: "met", False: "NOT met", None: "not measured"}[t["met"]]
        lines.append(f"[{mark}] {t['target']}: {t['value']} ({t['detail']})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    chosen = device_and_out(args.device, args.out, RESULTS_PATH)
    if chosen is None:
        return 2
    device, out = chosen
    threads = torch.get_num_threads()
    if device == "cpu":
        # One thread: on a small shared machine, parallel regions of tiny ops wait for descheduled
        # threads and a smoke run takes minutes instead of seconds.
        torch.set_num_threads(1)
    names = [n.strip() for n in args.configurations.split(",") if n.strip()] if args.configurations else None
    command = " ".join(
        shlex.quote(a) for a in ["python", "benchmarks/decoder.py", *(sys.argv[1:] if argv is None else argv)]
    )

    def save(partial: dict) -> None:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(partial, indent=1, default=str) + "\n")
        tmp.replace(out)  # a reader never sees half a file

    previous = json.loads(out.read_text()) if args.resume and out.is_file() else None
    try:
        result = bench.run(
            device,
            config=args.config,
            configurations=names,
            quick=args.quick,
            budget_s=args.budget_s,
            log=log,
            on_stage=save,
            command=command,
            previous=previous,
        )
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    finally:
        torch.set_num_threads(threads)
    save(result)
    print(f"\n{table(result)}")
    log(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
