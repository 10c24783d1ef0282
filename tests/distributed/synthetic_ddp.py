"""A hand-built two-rank DDP step on GPUs, with known answers, in the Kineto format torch writes.

Per rank and step (us from the step's start; rank r shifted by 7 us * r):

* forward: 4 kernels of 50 us from the main thread, on stream 7: [20, 220);
* backward: 6 kernels of 60 us launched from the autograd engine's thread: [230, 590);
* three DDP buckets, all-reduces on stream 20 (bf16), each launched right after a backward kernel's
  launch, so ready when that kernel ends: 1 MiB ready at 350, 25 MiB at 470, 25 MiB at 590; an
  all-reduce takes ``10 us + bytes / (200 bytes per ns)``: [350, 365.24), [470, 611.07), [611.07, 752.14);
* the optimizer's kernel after the last all-reduce: [755, 785).

The first host operator of a step (the first forward ``aten::mm``) starts 3 us into it.

So per step: communication 296.38 us, of which 15.24 + 120 hidden behind compute, 161.14 exposed
(the tail after the backward's last kernel at 590).
"""

from __future__ import annotations

import gzip
import json

from support import _x

LATENCY_US, BYTES_PER_US = 10.0, 200e3
MIB = 1024 * 1024
BUCKETS = ((1 * MIB, 2), (25 * MIB, 4), (25 * MIB, 6))  # (bytes, launched after backward kernel number)
STEP_US = 1000.0
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"


def allreduce_us(nbytes: float) -> float:
    return LATENCY_US + nbytes / BYTES_PER_US


def _kernel(name, pid, stream, ts, dur, corr, launch_ts, launch_tid, op=None, **args):
    out = [
        _x("cudaLaunchKernel", "cuda_runtime", launch_ts, 4, (pid, launch_tid), correlation=corr),
        _x(name, "kernel", ts, dur, (0, stream), correlation=corr, device=0, stream=stream, **args),
    ]
    if op:
        out.append(_x(op, "cpu_op", launch_ts - 2, 8, (pid, launch_tid), **{"External id": corr}))
    return out


def rank_events(rank: int, steps: int = 2, late_us: float = 0.0) -> list[dict]:
    """`late_us`: the rank starts each step's work that much after its ProfilerStep begins (a sleep)."""
    pid, events, corr = 100 + rank, [], 1000 * (rank + 1)
    for s in range(steps):
        step_start = 5000.0 * s + 7.0 * rank
        events.append(_x(f"ProfilerStep#{s + 1}", "user_annotation", step_start, STEP_US + late_us, (pid, 1)))
        t0 = step_start + late_us
        for i in range(4):  # forward
            corr += 1
            events += _kernel("gemm_fwd", pid, 7, t0 + 20 + 50 * i, 50, corr, t0 + 5 + 3 * i, 1, op="aten::mm")
        launch = {}
        for i in range(6):  # backward, from the engine's thread
            corr += 1
            launch[i + 1] = t0 + 225 + 5 * i
            events += _kernel("gemm_bwd", pid, 7, t0 + 230 + 60 * i, 60, corr, launch[i + 1], 2, op="aten::mm")
        free = 0.0
        for nbytes, after in BUCKETS:
            corr += 1
            ready = t0 + 230 + 60 * after
            start = max(ready, free)
            free = start + allreduce_us(nbytes)
            n = nbytes // 2
            events += _kernel(
                NCCL,
                pid,
                20,
                start,
                allreduce_us(nbytes),
                corr,
                launch[after] + 1,
                2,
                op="record_param_comms",
                **{
                    "Collective name": "allreduce",
                    "In msg nelems": n,
                    "Out msg nelems": n,
                    "dtype": "BFloat16",
                    "Group size": 2,
                },
            )
        corr += 1
        events += _kernel(
            "multi_tensor_apply_kernel", pid, 7, t0 + 755, 30, corr, t0 + 600, 1, op="aten::_fused_adamw_"
        )
    return events


def write_run(folder, ranks: int = 2, steps: int = 2, late_us: dict[int, float] | None = None):
    """rank<r>.json.gz for each rank in `folder`; returns the list of files. `late_us`: rank -> delay."""
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for r in range(ranks):
        doc = {
            "traceEvents": rank_events(r, steps, (late_us or {}).get(r, 0.0)),
            "distributedInfo": {"backend": "nccl", "rank": r, "world_size": ranks},
            "baseTimeNanoseconds": 1_700_000_000_000_000_000,
            "course_provenance": {"label": f"synthetic rank {r}", "device": "synthetic GPU", "torch": "test"},
        }
        path = folder / f"rank{r}.json.gz"
        path.write_bytes(gzip.compress(json.dumps(doc).encode()))
        files.append(path)
    return files
