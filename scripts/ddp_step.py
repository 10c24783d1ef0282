"""One data-parallel training step of the course's decoder, on every rank, profiled (notebook 09).

    torchrun --standalone --nproc_per_node=2 scripts/ddp_step.py --name ddp_small --mode ddp --bucket-cap-mb 0.05
    torchrun --standalone --nproc_per_node=2 scripts/ddp_step.py --name fsdp --mode fsdp --prefetch none
    torchrun --standalone --nproc_per_node=2 scripts/ddp_step.py --name slow --straggler-rank 1 --straggler-ms 50

NCCL with one GPU per rank when there are enough GPUs, else gloo on CPUs (``--device cpu`` forces
it). Writes ``traces/local/<run>/rank<r>.json.gz`` (one trace per rank, with provenance) and
``summary.json`` (step times per rank measured without the profiler, peak memory, bytes of state
per rank, DDP's buckets); ``--out`` picks another folder. Every option: ``--help`` (they are the
fields of helpers.distributed.options.RunOptions). From a notebook: ``helpers.launch_run(...)``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import helpers  # noqa: E402, F401  (first: on a CPU-only machine it switches on Triton's interpreter)
from helpers.distributed.worker import main  # noqa: E402

if __name__ == "__main__":
    code = main()
    # Everything is written (atomically) by now. Leave without the interpreter's teardown: with
    # gloo's and the profiler's threads still around, it can abort a finished rank
    # ("terminate called without an active exception").
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
