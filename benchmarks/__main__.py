"""``python -m benchmarks NAME [options]``: run one of the course's benchmarks (``--help`` after NAME for its options)."""

from __future__ import annotations

import importlib
import sys

# name -> (module with a main(argv) function, what it measures)
COMMANDS: dict[str, tuple[str, str]] = {
    "ceilings": ("benchmarks.ceilings", "the memory roof and matmul rate every % of floor divides by"),
    "mlp": ("benchmarks.mlp", "every GeGLU MLP variant of notebooks 04-06: shapes, training, a sweep over M"),
    "decoder": ("benchmarks.decoder", "the whole decoder in every configuration of notebook 08's final table"),
    "attention": ("benchmarks.attention", "every attention implementation side by side: time, TFLOP/s, memory, error"),
    "ddp": ("benchmarks.ddp", "notebook 09's data-parallel runs on two GPUs: DDP buckets, FSDP2, a straggler"),
    "timing-methods": (
        "benchmarks.timing_methods",
        "the MLP timed end to end by every method, to show what each hides",
    ),
    "decode-floor": ("benchmarks.decode_floor", "batch-1 decode against the weight-read floor, cause by cause"),
    "decode-gemv": ("benchmarks.decode_gemv", "the course's batch-1 GEMV against cuBLAS at the decode shapes: GB/s"),
    "decode-attention": (
        "benchmarks.decode_attention",
        "the decode step's attention: SDPA over the masked cache against the course's split-KV kernel",
    ),
    "fp8-gate-up": ("benchmarks.fp8_gate_up", "the FP8 gate+up path against the bf16 fused kernel: rate and error"),
    "diagnose-planted": (
        "benchmarks.diagnose_planted",
        "planted training loops recorded with plain torch.profiler: is each problem in diagnose's top 3?",
    ),
    "rejudge": ("benchmarks.rejudge", "rewrite the stored tables of recorded results (after the ceilings change)"),
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help") or args[0] not in COMMANDS:
        lines = ["usage: python -m benchmarks NAME [options]", "", "benchmarks:"]
        lines += [f"  {name:16s} {about}" for name, (_, about) in COMMANDS.items()]
        print("\n".join(lines), file=sys.stderr if args and args[0] not in ("-h", "--help") else sys.stdout)
        return 0 if args and args[0] in ("-h", "--help") else 2
    module = importlib.import_module(COMMANDS[args[0]][0])
    return int(module.main(args[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
