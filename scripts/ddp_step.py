"""One data-parallel training run of the course's decoder, on every rank, profiled (notebook 09).

    torchrun --standalone --nproc_per_node=2 scripts/ddp_step.py --name ddp_small --mode ddp --bucket-cap-mb 0.05
    torchrun --standalone --nproc_per_node=2 scripts/ddp_step.py --name fsdp --mode fsdp --prefetch none
    torchrun --standalone --nproc_per_node=2 scripts/ddp_step.py --name slow --straggler-rank 1 --straggler-ms 50

Every rank: joins the process group (NCCL with one GPU per rank when there are enough GPUs, else
gloo on CPUs; ``--device cpu`` forces it); builds the decoder (same seed everywhere) under DDP or
FSDP2; trains on its own random batch: warm-up steps, steps timed without the profiler, then steps
under ``torch.profiler``, written to ``rank<r>.json.gz`` with the run's provenance. Rank 0 writes
``summary.json`` (step times per rank, peak memory, bytes of state per rank, DDP's buckets). The
folder is ``traces/local/<name>/`` unless ``--out``; the options (``--help``) are the fields of
``helpers.distributed.options.RunOptions``. A straggler (``--straggler-rank``) sleeps or runs extra
matmuls at the start of every step. Progress lines start with ``[ddp_step]``. From a notebook:
``helpers.nb09.launch_run(...)``.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import helpers  # noqa: E402, F401  (sets Triton's mode: its interpreter on a CPU-only machine)
from helpers.decoder.config import get_config  # noqa: E402
from helpers.decoder.model import build_model  # noqa: E402
from helpers.decoder.training import TrainingStep  # noqa: E402
from helpers.distributed.options import SUMMARY, RunOptions, parse_argv  # noqa: E402
from helpers.measure.device import device_name, provenance, synchronize  # noqa: E402
from helpers.paths import LOCAL_TRACES_DIR  # noqa: E402
from helpers.trace.files import read_document  # noqa: E402
from helpers.trace.json_text import dump_document  # noqa: E402
from helpers.trace.saving import PROVENANCE_KEY, write_gzip_atomic  # noqa: E402

TRACE_ARGS_TRIMMED = ("Input Strides", "Concrete Inputs")


def say(msg: str) -> None:
    """A progress line the launcher shows (flushed: the output is a pipe)."""
    print(f"[ddp_step] {msg}", flush=True)


def join_process_group(options: RunOptions) -> tuple[torch.device, str]:
    """Join the job's process group: NCCL and this rank's GPU, or gloo on the CPU."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = options.device == "cuda" or (
        options.device == "auto" and torch.cuda.is_available() and torch.cuda.device_count() >= world
    )
    if use_cuda:
        if torch.cuda.device_count() <= local_rank:
            raise RuntimeError(f"rank with LOCAL_RANK {local_rank} has no GPU ({torch.cuda.device_count()} here)")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
        return device, "nccl"
    # one thread per rank: the ranks share the machine's cores (torchrun sets OMP_NUM_THREADS=1 too)
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    return torch.device("cpu"), "gloo"


def wrap_model(model: torch.nn.Module, options: RunOptions, device: torch.device) -> torch.nn.Module:
    """The model under DDP (gradient buckets of ``bucket_cap_mb``) or FSDP2 (one unit per block, then the root)."""
    if options.mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        ids = [device.index] if device.type == "cuda" else None
        return DDP(model, device_ids=ids, bucket_cap_mb=options.bucket_cap_mb)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    blocks = list(model.layers)
    for block in blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)  # the root: embedding (tied LM head) and final norm
    if options.prefetch == "none":
        # a unit told to prefetch only itself prefetches nothing: each block all-gathers its
        # weights when its own backward starts (the forward's all-gathers are issued as the CPU
        # reaches each block, on FSDP's own stream, whatever this says)
        for unit in (*blocks, model):
            unit.set_modules_to_backward_prefetch([unit])
    elif options.prefetch == "explicit":
        for i, block in enumerate(blocks):
            block.set_modules_to_forward_prefetch(blocks[i + 1 : i + 3])
            block.set_modules_to_backward_prefetch(blocks[max(i - 2, 0) : i][::-1])
        model.set_modules_to_forward_prefetch(blocks[:1])
        model.set_modules_to_backward_prefetch(blocks[-1:])
    return model


def pick_straggler(options: RunOptions) -> int:
    """The straggler's rank (-1: none); a random one is drawn on rank 0 and sent to all."""
    if options.straggler_rank != -2:
        if options.straggler_rank >= dist.get_world_size():
            raise ValueError(f"straggler_rank {options.straggler_rank} >= world size {dist.get_world_size()}")
        return options.straggler_rank
    chosen = [random.SystemRandom().randrange(dist.get_world_size()) if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(chosen, src=0)
    return int(chosen[0])


def make_straggler(options: RunOptions, straggler: int, device: torch.device) -> Callable[[], None]:
    """What this rank does at the start of each step: nothing, or `straggler_ms` of sleep or extra work."""
    if dist.get_rank() != straggler:
        return lambda: None
    seconds = options.straggler_ms / 1e3
    if options.straggler_kind == "sleep":
        return lambda: time.sleep(seconds)
    # extra work: square matmuls, as many as take straggler_ms here (measured once)
    n = 2048 if device.type == "cuda" else 256
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16 if device.type == "cuda" else torch.float32)
    for _ in range(3):
        a @ a
    synchronize(device)
    start = time.perf_counter()
    for _ in range(10):
        a @ a
    synchronize(device)
    repeats = max(1, round(seconds / ((time.perf_counter() - start) / 10)))

    def work() -> None:
        for _ in range(repeats):
            a @ a

    return work


def local_bytes(tensors) -> int:
    """Bytes of the tensors as this rank holds them (a DTensor's local shard)."""
    total = 0
    for t in tensors:
        if isinstance(t, torch.Tensor):
            t = t.to_local() if hasattr(t, "to_local") else t
            total += t.numel() * t.element_size()
    return total


def state_bytes(step: TrainingStep) -> dict[str, int]:
    """Parameters, gradients and optimizer state held by this rank, in bytes (read from the tensors).

    The optimizer's state is AdamW's two moments per weight; its step counters (one number per
    weight) are left out.
    """
    params = list(step.model.parameters())
    state = [
        v for s in step.optimizer.state.values() for v in s.values() if isinstance(v, torch.Tensor) and v.dim() > 0
    ]
    out = {
        "parameters": local_bytes(params),
        "gradients": local_bytes(p.grad for p in params if p.grad is not None),
        "optimizer": local_bytes(state),
    }
    out["total"] = sum(out.values())
    return out


def time_steps(step: TrainingStep, straggle: Callable[[], None], n: int, device: torch.device) -> list[float]:
    """`n` steps timed one by one (ms), each synchronised: no profiler running."""
    times = []
    for _ in range(n):
        synchronize(device)
        start = time.perf_counter()
        straggle()
        step()
        synchronize(device)
        times.append((time.perf_counter() - start) * 1e3)
    return times


def store_barrier(tag: str, timeout_s: float = 120.0) -> None:
    """Wait until every rank got here, through the job's key-value store: no collective, so nothing in the traces."""
    from torch.distributed.distributed_c10d import _get_default_store

    store = _get_default_store()
    store.add(tag, 1)
    deadline = time.monotonic() + timeout_s
    while int(store.add(tag, 0)) < dist.get_world_size():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not every rank reached {tag!r} within {timeout_s:g} s")
        time.sleep(0.001)


def profile_steps(
    step: TrainingStep, straggle: Callable[[], None], n: int, device: torch.device, raw_path: Path
) -> None:
    """`n` steps under torch.profiler (after one profiler warm-up step), exported as a Chrome trace to `raw_path`."""
    from torch.profiler import ProfilerActivity, profile, schedule

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(
        activities=activities,
        schedule=schedule(wait=0, warmup=1, active=n, repeat=1),
        on_trace_ready=lambda prof: prof.export_chrome_trace(str(raw_path)),
        record_shapes=True,  # message sizes of gloo collectives, shapes of every operator
    ) as prof:
        for i in range(n + 1):
            straggle()
            step()
            synchronize(device)
            if i == n:
                # every rank ends its last step before any stops the profiler and writes its trace
                # (writing takes CPU time the other ranks, still in their step, would lose)
                store_barrier("ddp_step.profiled")
            prof.step()


def _trim_flows_and_strides(events: list) -> str:
    for e in events:
        args = e.get("args") if isinstance(e, dict) else None
        if isinstance(args, dict):
            for key in TRACE_ARGS_TRIMMED:
                args.pop(key, None)
    events[:] = [e for e in events if not (isinstance(e, dict) and e.get("cat") == "fwdbwd")]
    return "flow arrows between forward and backward operators (fwdbwd), Input Strides, Concrete Inputs"


def _trim_shapes(events: list) -> str:
    for e in events:
        args = e.get("args") if isinstance(e, dict) else None
        name = str(e.get("name", "")) if isinstance(e, dict) else ""
        if isinstance(args, dict) and not name.startswith(COMMUNICATION_OPS):
            args.pop("Input Dims", None)
            args.pop("Input type", None)
    return "input shapes and types of operators other than collectives"


def _trim_first_step(events: list) -> str:
    steps = sorted(
        e["ts"]
        for e in events
        if isinstance(e, dict) and str(e.get("name", "")).startswith("ProfilerStep#") and "ts" in e
    )
    if len(steps) < 2:
        return "nothing (a single profiled step)"
    cut = steps[1]
    events[:] = [e for e in events if not isinstance(e, dict) or e.get("ph") == "M" or e.get("ts", cut) >= cut]
    return "everything before the second profiled step"


# what the course does not read in notebook 09, dropped in this order while a trace is too large
TRIMS = (_trim_flows_and_strides, _trim_shapes, _trim_first_step)
COMMUNICATION_OPS = ("gloo:", "nccl:", "c10d::", "record_param_comms")


def write_trace(raw_path: Path, target: Path, course: dict[str, Any], max_mb: float) -> dict[str, Any]:
    """`raw_path` gzipped to `target` with `course` as its provenance; trimmed (:data:`TRIMS`) while over `max_mb` (> 0)."""
    doc = read_document(raw_path)
    doc.pop("traceName", None)  # a temporary path
    doc[PROVENANCE_KEY] = course
    write_gzip_atomic(dump_document(doc), target)
    trimmed: list[str] = []
    for trim in TRIMS:
        if not max_mb > 0 or target.stat().st_size <= max_mb * 1e6:
            break
        events = doc.get("traceEvents")
        if not isinstance(events, list):
            break
        trimmed.append(trim(events))
        doc[PROVENANCE_KEY] = {**course, "trimmed": trimmed}
        write_gzip_atomic(dump_document(doc), target)
    raw_path.unlink(missing_ok=True)
    return {"trace": target.name, "trace_bytes": target.stat().st_size, "trimmed": trimmed}


def bucket_info(model: torch.nn.Module) -> dict[str, Any] | None:
    """DDP's own record of its gradient buckets (after the rebuild that follows the first step)."""
    getter = getattr(model, "_get_ddp_logging_data", None)
    if getter is None:
        return None
    data = getter()
    sizes = str(data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes") or "")
    bucket_bytes = [int(s) for s in sizes.replace(",", " ").split() if s.strip().isdigit()]
    return {"bucket_bytes": bucket_bytes, "num_buckets": len(bucket_bytes), "cap_bytes": data.get("bucket_cap_bytes")}


def run(options: RunOptions, name: str, out: Path) -> dict[str, Any] | None:
    """One rank's whole run (see the module docstring); rank 0 returns the summary it wrote."""
    started = time.perf_counter()
    device, backend = join_process_group(options)
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        cfg = get_config(options.config)
        if rank == 0:
            say(f"{name}: {options.mode} on {world} ranks ({backend}, {device.type}), {cfg.describe()}")
        model = wrap_model(build_model(cfg, device, seed=options.seed), options, device)
        straggler = pick_straggler(options)
        straggle = make_straggler(options, straggler, device)
        optimizer = options.optimizer
        step = TrainingStep(model, options.batch, options.seq, optimizer=optimizer, seed=options.seed + 1 + rank)
        for _ in range(options.warmup):
            step()
        synchronize(device)
        if rank == 0:
            say(f"{name}: {options.warmup} warm-up steps done; timing {options.timed_steps}")
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        resident = torch.cuda.memory_allocated(device) if device.type == "cuda" else None
        times = time_steps(step, straggle, options.timed_steps, device)
        peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
        mine = {
            "rank": rank,
            "device": device_name(device),
            "step_ms": times,
            "median_step_ms": statistics.median(times),
            "peak_memory_bytes": peak,
            "resident_bytes": resident,
            "state_bytes": state_bytes(step),
        }
        if rank == 0:
            say(f"{name}: timed {options.timed_steps} steps; profiling {options.profile_steps}")
        out.mkdir(parents=True, exist_ok=True)
        raw = out / f".rank{rank}.raw.json"
        profile_steps(step, straggle, options.profile_steps, device, raw)
        prov = provenance(device, command=" ".join(["torchrun", "scripts/ddp_step.py", *sys.argv[1:]]))
        course = {
            **prov,
            "label": f"{name} rank {rank}",
            "device": prov["device"],
            "torch": prov["torch"],
            "recorded_on": prov["date"][:10],
            "run": name,
            "rank": rank,
            "world_size": world,
            "backend": backend,
            "options": options.as_dict(),
            "model": cfg.describe(),
        }
        mine.update(write_trace(raw, out / f"rank{rank}.json.gz", course, options.max_trace_mb))
        gathered: list[Any] = [None] * world
        dist.all_gather_object(gathered, mine)
        if rank != 0:
            return None
        per_step = [max(r["step_ms"][i] for r in gathered) for i in range(options.timed_steps)]
        summary = {
            "run": name,
            "options": options.as_dict(),
            "world_size": world,
            "backend": backend,
            "device": prov["device"],
            "provenance": prov,
            "model": {"name": cfg.name, "describe": cfg.describe(), "parameters": cfg.num_parameters()},
            "dtype": str(next(model.parameters()).dtype).removeprefix("torch."),
            "optimizer": optimizer,
            "straggler": {
                "rank": straggler if straggler >= 0 else None,
                "ms": options.straggler_ms,
                "kind": options.straggler_kind,
            },
            "ddp": bucket_info(model) if options.mode == "ddp" else None,
            "step_ms": statistics.median(per_step),
            "ranks": gathered,
            "seconds": time.perf_counter() - started,
        }
        tmp = out / f".{SUMMARY}.tmp"
        tmp.write_text(json.dumps(summary, indent=1) + "\n")
        tmp.replace(out / SUMMARY)
        say(f"{name}: wrote {world} traces and {SUMMARY} to {out}")
        return summary
    finally:
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    """One rank's run from the command line (under torchrun: one call per rank)."""
    options, name, out = parse_argv(argv)
    run(options, name, Path(out) if out else LOCAL_TRACES_DIR / name)
    return 0


if __name__ == "__main__":
    code = main()
    # Everything is written (atomically) by now. Leave without the interpreter's teardown: with
    # gloo's and the profiler's threads still around, it can abort a finished rank
    # ("terminate called without an active exception").
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
