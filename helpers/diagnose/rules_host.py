"""Rules about the host: a GPU waiting for the CPU, synchronisation, copies and the data loader,
recompilations and graph breaks, the allocator and the memory peak. Each takes a :class:`~.findings.Context` and returns
a list of findings (empty when the trace shows nothing wrong)."""

from __future__ import annotations

import re

import numpy as np

from helpers.trace.categories import RECORDER_WAIT
from helpers.trace.memory_view import BEFORE_TRACE, NO_OP, peak_memory_by_op
from helpers.trace.overlap import idle_gaps
from helpers.trace.ranks import event_ranks

from .critical_path import SYNC_CALLS
from .findings import Context
from .host_work import DOMINANT_SHARE, LONG_WAIT_US, NO_OPERATOR, host_work_fix, host_work_in_waits

# Operators that force a synchronisation when their tensors live on a GPU.
SYNCING_OPS = {"aten::item", "aten::_local_scalar_dense", "aten::nonzero", "aten::is_nonzero", "aten::masked_select"}
ALLOCATOR_CALLS = {"cudaMalloc", "cudaFree", "hipMalloc", "hipFree", "cudaMallocHost", "cudaFreeHost", "cuMemAlloc_v2"}
DATA_LOADER = ("enumerate(DataLoader)",)
COMPILED_REGION = re.compile(r"^Torch-Compiled Region: (\d+)/(\d+)")
PEAK_SHARE = 0.5  # one operator's outputs hold at least this share of the peak: it dominates
OPTIMIZER_OP = re.compile(r"optim|adam|sgd|lamb|lion|_foreach_|multi_tensor", re.IGNORECASE)
MEMORY_FIX = {
    "activations": "Recompute instead of storing: activation checkpointing (torch.utils.checkpoint) around the "
    "blocks that hold them; a smaller micro-batch with gradient accumulation; fused kernels that save less "
    "(SDPA instead of a materialised attention matrix)",
    "outputs": "Run inference under torch.no_grad() or torch.inference_mode() so nothing is kept for a backward; "
    "drop references to intermediates (del, reuse buffers, in-place ops) or use a smaller batch",
    "optimizer state": "Keep optimizer state in lower precision (bf16 or 8-bit Adam), use a fused optimizer, or "
    "shard the state across ranks (ZeroRedundancyOptimizer, FSDP)",
    "gradients": "Free gradients early (zero_grad(set_to_none=True), optimizer-in-backward), or shard them (FSDP); "
    "activation checkpointing also lowers what the backward holds",
}


def _gaps(ctx: Context):
    if not len(ctx.work):
        return None
    gaps = idle_gaps(ctx.trace)
    return gaps[gaps["start_us"] + ctx.t0 >= ctx.steps["start"].min()]


def _after(gaps, ends) -> np.ndarray:
    """Per GPU gap: it spans the moment one of the synchronisations ending at `ends` (trace-relative us)
    returns, starting at most a microsecond after it: the queue ran dry because of that wait."""
    after = np.zeros(len(gaps), dtype=bool)
    s, e = gaps["start_us"].to_numpy(), gaps["end_us"].to_numpy()
    for t in ends:
        after |= (s <= t + 1.0) & (e >= t)
    return after


def _recorder_waits(ctx: Context) -> np.ndarray:
    """The rows of helpers.profile's own waits at the steps' ends (the recorder's, not the program's); when there
    are any, the notes say they are not counted."""
    waits = ctx.host_rows({RECORDER_WAIT})
    if len(waits) and not any(RECORDER_WAIT in n for n in ctx.notes):
        ctx.notes.append(
            f"'{RECORDER_WAIT}': helpers.profile waits for the GPU at the end of each step so that the trace is "
            "complete; that wait is the profiler's, not your program's, and is not counted"
        )
    return waits


def gpu_idle_cpu_bound(ctx: Context) -> list[dict]:
    """The GPU sat idle because the CPU had not yet launched the next kernel: launch-bound (tiny kernels), or the
    host busy with other work (one operator, or Python between operators), which the finding names."""
    gaps = _gaps(ctx)
    if gaps is None or gaps.empty:
        return []
    cpu = gaps[gaps["cause"] == "cpu-bound"]
    waits = _recorder_waits(ctx)
    if len(waits):
        # without the recorder's wait the host would have reached the next launch that much sooner: that much of
        # the gap after it (at most all of it) is the recorder's, the rest the program's
        ev = ctx.ev
        cpu = cpu.copy()
        for t, d in zip((ev["ts"] + ev["dur"]).to_numpy()[waits] - ctx.t0, ev["dur"].to_numpy()[waits]):
            hit = _after(cpu, [t])
            cut = np.minimum(cpu["idle_us"].to_numpy(), d) * hit
            cpu["idle_us"] -= cut
            cpu["start_us"] += cut
        cpu = cpu[cpu["idle_us"] > 0]
    # the critical path is one rank's: its GPUs' gaps are where the path can spend host time
    on_path = cpu if ctx.path_rank is None else cpu[cpu["rank"] == ctx.path_rank]
    per_gpu = cpu.groupby(["rank", "gpu"], sort=True)["idle_us"].sum()
    # each GPU waits on its own: the most idle one is the finding, not their sum
    rank, gpu = per_gpu.idxmax() if len(per_gpu) else (None, None)
    cpu = cpu[(cpu["rank"] == rank) & (cpu["gpu"] == gpu)] if len(per_gpu) > 1 else cpu
    said = [f"the most idle of {len(per_gpu)} GPUs"] if len(per_gpu) > 1 else []
    if ctx.path_rank is not None and rank is not None and rank != ctx.path_rank:
        said.append(f"the saving is read on rank {ctx.path_rank}, whose critical path this is")
    label = str(gpu) if str(gpu).startswith("rank") else f"rank {rank}, {gpu}"  # a run's lanes name their rank
    where = f" ({label}: {'; '.join(said)})" if said else ""
    idle = float(cpu["idle_us"].sum()) / ctx.steps_per_rank  # one GPU's waits
    if idle <= 0.05 * ctx.step_us:
        return []
    kernels = ctx.work[ctx.work["kind"] == "kernel"]
    small = int((kernels["dur"] < 10).sum())
    # what the path spends on the host while its GPUs wait for it (none: no such wait on the path's rank), at most
    # what the most idle GPU waits
    saving = ctx.path_time_in(
        on_path["start_us"].to_numpy(), on_path["end_us"].to_numpy(), ("cpu", "cpu gap", "launch delay")
    )
    saving = min(saving, idle)
    w = ctx.work
    rows = w.loc[np.isin(np.round(w["start"] - ctx.t0, 3), np.round(cpu["end_us"].to_numpy(), 3)), "row"].to_numpy()
    detail = (
        f"{len(cpu):,} GPU gaps where the next launch came late{where}; {small:,} of {len(kernels):,} kernels "
        f"run under 10 us; median kernel {kernels['dur'].median():.1f} us"
    )
    work = host_work_in_waits(
        ctx.ev, ctx.t0, cpu["start_us"].to_numpy(), cpu["end_us"].to_numpy(), cpu["launch_row"].to_numpy(),
        frozenset(ALLOCATOR_CALLS),
    )  # fmt: skip
    if work.long_share >= DOMINANT_SHARE and (work.name is not None or work.fillers):
        if work.name is None:
            held = f"mostly in {' and '.join(work.fillers)}, none for half of them"
        elif work.name == NO_OPERATOR:
            held = f"in no profiled operator for {work.share:.0%} of them"
        else:
            held = f"in {work.name} for {work.share:.0%} of them"
        detail += f"; {work.long_share:.0%} of the wait is in gaps of {LONG_WAIT_US:.0f} us or more, the host {held}"
    finding, fix = host_work_fix(work)
    f = ctx.finding(
        "gpu_idle_cpu_bound", finding, rows, idle, saving, "high" if idle > 0.2 * ctx.step_us else "medium", "08",
        fix, detail, example_rows=work.rows,  # the host work, when named, is what to look at
    )  # fmt: skip
    return [f]


def host_sync(ctx: Context) -> list[dict]:
    """Synchronisation inside the step: the CPU stops until the GPU drains, then the GPU waits for new launches."""
    if not len(ctx.work):
        return []  # on a CPU-only run .item() and friends synchronise nothing
    calls = ctx.host_rows(SYNC_CALLS)
    calls = calls[~ctx.under(_recorder_waits(ctx))[calls]]
    ops = ctx.host_rows(SYNCING_OPS)
    if not len(calls) and not len(ops):
        return []
    ev = ctx.ev
    dur = ev["dur"].to_numpy()
    time = float(dur[calls].sum()) / ctx.per_step
    gaps = _gaps(ctx)
    ends = (ev["ts"].to_numpy()[calls] + dur[calls]) - ctx.t0
    drained = 0.0
    if gaps is not None and len(gaps) and len(ends):
        drained = float(gaps.loc[_after(gaps, ends), "idle_us"].sum()) / ctx.per_step
    # what the wait costs is what the step loses to it: not the wait itself when the GPU's queued work must
    # finish before the next synchronising point anyway, more when host work after it could have overlapped
    saving = _moved_wait_bound(ctx, calls)
    callers = ev["name"].to_numpy(dtype=object)[ops]
    named = sorted(set(callers.tolist()))
    detail = (
        f"{len(calls):,} synchronising calls per trace ({len(calls) / ctx.per_step:.1f} per step)"
        + (f", under {', '.join(named)}" if named else "")
        + f"; the GPU then sat idle {drained:,.1f} us per step"
        + f"; without them the host would run ahead until the next synchronising point (a later sync, a pageable "
        f"copy), where the GPU's queued work must still finish: at most {saving:,.1f} us per step saved"
    )
    return [
        ctx.finding(
            "host_sync",
            "The step synchronises the CPU with the GPU (.item(), .cpu(), nonzero, an explicit synchronize)",
            np.concatenate([calls, ops]),
            time,
            saving,
            "high" if len(calls) else "medium",
            "10",
            "Keep values on the GPU (no .item()/.cpu()/print inside the step; torch.nonzero -> masks), log every N "
            "steps, or move the read after the next step's launches (non_blocking copies and events)",
            detail,
        )  # fmt: skip
    ]


def _moved_wait_bound(ctx: Context, calls: np.ndarray) -> float:
    """Per step, the most that removing the synchronising `calls` saves: a removed wait moves to the next point
    that synchronises anyway (a pageable copy; the other calls go with the fix). Per call, with B its wait, W the
    host's time until that point, G the GPU time launched meanwhile and d the GPU idle in between, the window
    takes B + max(W, d + G) with the call and max(W, B + G) without it. Each rank of a run on its own; the
    rank that would save most is the bound (its peers wait for it in their collectives)."""
    ev, w = ctx.ev, ctx.work
    if not len(calls) or not len(w):
        return 0.0
    ts, dur = ev["ts"].to_numpy() - ctx.t0, ev["dur"].to_numpy()
    rank = event_ranks(ctx.trace)[0]  # as the GPU idle gaps are ranked
    rows_w = w["row"].to_numpy()
    launch = ev["launch"].to_numpy()[rows_w]
    start, length = w["start"].to_numpy() - ctx.t0, w["dur"].to_numpy()
    # when a kernel is issued: its launch call, else (no runtime events recorded) its own start
    issued = np.where(launch >= 0, ts[np.maximum(launch, 0)], start)
    pageable = w["name"].str.contains("Pageable", regex=False).to_numpy() & (launch >= 0)
    gaps = _gaps(ctx)
    best = 0.0
    for r in np.unique(rank[calls]):
        mine = rank[rows_w] == r
        if not mine.any():
            continue
        # the end of a step synchronises nothing (a wait removed there moves into the next step); past the last
        # point, the GPU's last work ends the window
        last = float((start[mine] + length[mine]).max())
        points = np.sort(np.append(issued[pageable & mine], last))
        rows = calls[rank[calls] == r]
        ends = ts[rows] + dur[rows]
        nxt = np.maximum(points[np.minimum(np.searchsorted(points, ends), len(points) - 1)], ends)
        order = np.argsort(issued[mine])
        at, cum = issued[mine][order], np.concatenate([[0.0], np.cumsum(length[mine][order])])
        gpu = cum[np.searchsorted(at, nxt)] - cum[np.searchsorted(at, ends)]
        idle = np.zeros(len(rows))
        if gaps is not None and len(gaps):
            g = gaps[gaps["rank"].to_numpy() == r].sort_values("start_us")
            idle = _covered(g["start_us"].to_numpy(), g["end_us"].to_numpy(), nxt) - _covered(
                g["start_us"].to_numpy(), g["end_us"].to_numpy(), ends
            )
        host, wait = nxt - ends, dur[rows]
        saving = np.clip(wait + np.maximum(host, idle + gpu) - np.maximum(host, wait + gpu), 0, None)
        best = max(best, float(saving.sum()) / ctx.steps_per_rank)  # this rank's calls
    return best


def _covered(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For each time in `t`: how much of the intervals (sorted, not overlapping) lies before it."""
    if not len(starts):
        return np.zeros(len(t))
    cum = np.concatenate([[0.0], np.cumsum(ends - starts)])
    i = np.searchsorted(starts, t, side="right")  # intervals begun by t
    inside = np.clip(t - starts[np.maximum(i - 1, 0)], 0, (ends - starts)[np.maximum(i - 1, 0)])
    return np.where(i > 0, cum[np.maximum(i - 1, 0)] + inside, 0.0)


def copies(ctx: Context) -> list[dict]:
    """Host-device copies from pageable memory, copies that run alone, and data loader waits."""
    out = []
    w = ctx.work
    if len(w):
        mem = w[w["kind"] == "memcpy"]
        pageable = mem[mem["name"].str.contains("Pageable", regex=False)]
        if len(pageable):
            t = float(pageable["dur"].sum()) / ctx.per_step
            launches = ctx.ev["launch"].to_numpy()[pageable["row"].to_numpy()]
            saving = ctx.path_time(pageable["row"], ("memcpy",)) + ctx.path_time(launches[launches >= 0], ("cpu",))
            out.append(ctx.finding(
                "pageable_copies", "Copies between host and device use pageable memory (synchronous, slower)",
                pageable["row"].to_numpy(), t, saving, "high", "10",
                "Pin host memory (DataLoader(pin_memory=True) or tensor.pin_memory()) and copy with "
                "non_blocking=True so the copy overlaps compute",
                f"{len(pageable):,} pageable copies of {len(mem):,} copies",
            ))  # fmt: skip
        alone = mem[~mem.index.isin(pageable.index)]
        if len(alone):
            on_path = ctx.path_time(alone["row"], ("memcpy",))
            if on_path > 0.05 * ctx.step_us:
                out.append(ctx.finding(
                    "copies_on_path", "Copies sit on the critical path: nothing overlaps them",
                    alone["row"].to_numpy(), float(alone["dur"].sum()) / ctx.per_step, on_path, "medium", "10",
                    "Issue copies early on a side stream with pinned memory and non_blocking=True, or keep the "
                    "data on the device",
                ))  # fmt: skip
    loader = ctx.host_rows(prefix=DATA_LOADER)
    if len(loader):
        t = float(ctx.ev["dur"].to_numpy()[loader].sum()) / ctx.per_step
        saving = ctx.path_time(loader)
        kids = np.flatnonzero(np.isin(ctx.ev["parent"].to_numpy(), loader))
        saving += ctx.path_time(kids)
        if t > 0.02 * ctx.step_us:
            out.append(ctx.finding(
                "data_loader", "The step waits for the data loader", loader, t, saving,
                "high" if t > 0.1 * ctx.step_us else "medium", "10",
                "Use DataLoader(num_workers>0, pin_memory=True, persistent_workers=True, prefetch_factor), move "
                "decoding/augmentation off the main process, or preload the data",
            ))  # fmt: skip
    return out


def compile_events(ctx: Context) -> list[dict]:
    """Recompilations (``Torch-Compiled Region: N/M`` with M > 0) and graph breaks (several frames per step)."""
    rows = ctx.host_rows(prefix=("Torch-Compiled Region:",))
    if not len(rows):
        return []
    names = ctx.ev["name"].to_numpy(dtype=object)[rows]
    parsed = [COMPILED_REGION.match(n) for n in names]
    frames = {int(m.group(1)) for m in parsed if m}
    recompiled = [r for r, m in zip(rows, parsed) if m and int(m.group(2)) > 0]
    dur = ctx.ev["dur"].to_numpy()
    out = []
    if recompiled:
        versions = sorted({n for n in names if COMPILED_REGION.match(n) and int(COMPILED_REGION.match(n).group(2)) > 0})
        out.append(ctx.finding(
            "recompilation", "torch.compile recompiled: the step runs a second version of a graph",
            recompiled, float(dur[recompiled].sum()) / ctx.per_step, 0.0, "medium", "04",
            "Find the guard that failed (TORCH_LOGS=recompiles); mark dynamic dimensions "
            "(torch._dynamo.mark_dynamic) or pad shapes; a recompile itself runs outside the profiled step",
            f"versions seen: {', '.join(versions[:4])}",
        ))  # fmt: skip
    per_step = len(rows) / ctx.per_step
    if len(frames) > 1 or per_step > 1.5:
        lookups = ctx.host_rows({"TorchDynamo Cache Lookup"})
        # eager code between compiled graphs: the host time of the path outside compiled regions
        outside = ctx.path[
            (ctx.path["kind"].isin(["cpu", "cpu gap"])) & ~ctx.path["op"].str.startswith("Torch-Compiled")
        ]
        saving = min(float(outside["duration_us"].sum()) / max(ctx.path_steps, 1), ctx.step_us) * 0.5
        saving += ctx.path_time(lookups)
        out.append(ctx.finding(
            "graph_breaks", f"Graph breaks: {per_step:.1f} compiled regions run per step ({len(frames)} frames)",
            rows, float(dur[rows].sum()) / ctx.per_step, saving, "low", "04",
            "Find the breaks with torch._dynamo.explain(model)(inputs) or TORCH_LOGS=graph_breaks and remove them "
            "(data-dependent Python, .item(), unsupported calls); fullgraph=True turns them into errors",
        ))  # fmt: skip
    return out


def allocator(ctx: Context) -> list[dict]:
    """cudaMalloc / cudaFree inside the step: the caching allocator is churning or was emptied."""
    rows = ctx.host_rows(ALLOCATOR_CALLS)
    if not len(rows):
        return []
    t = float(ctx.ev["dur"].to_numpy()[rows].sum()) / ctx.per_step
    if t < 0.01 * ctx.step_us:
        return []
    return [
        ctx.finding(
            "allocator",
            "The step calls cudaMalloc/cudaFree: memory is allocated from the driver, not the cache",
            rows,
            t,
            ctx.path_time(rows),
            "high" if t > 0.05 * ctx.step_us else "medium",
            "08",
            "Warm up before profiling, avoid torch.cuda.empty_cache() in the loop, keep shapes stable (or set "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True), preallocate buffers",
            f"{len(rows) / ctx.per_step:.1f} calls per step",
        )  # fmt: skip
    ]


def _memory_category(op: str, training: bool) -> str:
    """What an operator's allocations live at the peak are, from its name and whether the step has a backward."""
    if OPTIMIZER_OP.search(op):
        return "optimizer state"
    if "Backward" in op or op.startswith("autograd::"):
        return "gradients"
    return "activations" if training else "outputs"


def peak_memory(ctx: Context) -> list[dict]:
    """The memory peak is dominated by one operator's outputs; saves no time, ``saving_bytes`` is what it holds then."""
    memory = ctx.trace._tables.memory  # the loader's '[memory]' table; None without profile_memory=True
    if memory is None or memory.empty:
        return []
    by_op = peak_memory_by_op(ctx.trace)
    peak_mb = float(by_op.attrs["peak_mb"])
    named = by_op[~by_op["op"].isin([BEFORE_TRACE, NO_OP])]
    if peak_mb <= 0 or named.empty or float(named["share_of_peak"].iloc[0]) < PEAK_SHARE:
        return []
    top = named.iloc[0]
    op, share = str(top["op"]), float(top["share_of_peak"])
    names = ctx.ev["name"].to_numpy(dtype=object)
    training = bool(np.any(ctx.ev["name"].str.contains("Backward", regex=False).to_numpy()))
    category = _memory_category(op, training)
    # the operator's calls that ran before the peak: those made the memory still held at it
    peak_ts = ctx.t0 + float(by_op.attrs["peak_time_ms"]) * 1e3
    host = ~ctx.ev["on_device"].to_numpy()
    rows = np.flatnonzero(host & (names == op) & (ctx.ev["ts"].to_numpy() <= peak_ts + 1e-3))
    detail = (
        f"{100 * share:.0f} % of the {peak_mb:,.1f} MB peak on {by_op.attrs['device']} is held by {op}'s outputs "
        f"at the peak ({top['live_mb']:,.1f} MB in {int(top['allocations']):,} allocations, {category}); peak at "
        f"{float(by_op.attrs['peak_time_ms']):,.2f} ms"
    )
    return [
        ctx.finding(
            "peak_memory",
            f"One operator dominates the memory peak: {op} ({category}) holds {100 * share:.0f} % of it",
            rows,
            0.0,
            0.0,
            "medium",
            "08",
            MEMORY_FIX[category],
            detail,
            saving_bytes=float(top["live_mb"]) * 1e6,
        )
    ]


RULES = [gpu_idle_cpu_bound, host_sync, copies, compile_events, allocator, peak_memory]
