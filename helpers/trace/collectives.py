"""Collectives of a multi-rank trace and communication per step: NCCL kernels sized by their
``In/Out msg nelems`` args, gloo ranges by ``Input Dims``; an event belongs to the step it started in."""

from __future__ import annotations

import ast
from functools import lru_cache

import numpy as np
import pandas as pd

from .dtypes import lookup
from .files import FileStamp, read_document
from .kernel_names import decode_kernels
from .model import Trace, check_trace
from .overlap import device_work, intersection_length, length, union
from .ranks import MultiRankTrace, event_ranks

HOST_COLLECTIVE = "gloo:"  # gloo's ranges: gloo:all_reduce, gloo:all_gather, gloo:broadcast ...
# host operators that only hand a collective to the backend: not compute
ENQUEUE_PREFIXES = ("c10d::", "gloo:", "nccl:", "record_param_comms")
NCCL_COLLECTIVES = {
    "AllReduce": "all_reduce",
    "AllGather": "all_gather",
    "ReduceScatter": "reduce_scatter",
    "Broadcast": "broadcast",
    "Reduce": "reduce",
    "SendRecv": "send_recv",
    "AllToAll": "all_to_all",
}


def _t0(trace: Trace) -> float:
    return float(trace.events["ts"].min())  # the origin helpers.trace.overlap.device_work uses


def step_windows(trace: Trace) -> pd.DataFrame:
    """Every profiler step of every rank, times from the start of the trace; ValueError without steps."""
    check_trace(trace)
    ev = trace.events
    ranks, _ = event_ranks(trace)
    is_step = (~ev["on_device"]) & ev["name"].str.startswith("ProfilerStep#") & (ev["step"] >= 0)
    rows = np.flatnonzero(is_step.to_numpy())
    if not len(rows):
        raise ValueError(f"{trace.info.describe()} has no profiler steps: record with a schedule and prof.step()")
    t0 = _t0(trace)
    out = pd.DataFrame(
        {
            "rank": ranks[rows],
            "step": ev["step"].to_numpy()[rows],
            "start_us": ev["ts"].to_numpy()[rows] - t0,
            "end_us": (ev["ts"] + ev["dur"]).to_numpy()[rows] - t0,
            "lane": ev["lane"].to_numpy(dtype=object)[rows],
        }
    )
    out["step_us"] = out["end_us"] - out["start_us"]
    return out.sort_values(["rank", "step"], kind="stable").reset_index(drop=True)


def _step_of(ranks: np.ndarray, times: np.ndarray, windows: pd.DataFrame) -> np.ndarray:
    """The step of each (rank, time): the rank's profiler step whose window holds the time, else -1."""
    out = np.full(len(times), -1, dtype=np.int64)
    for rank, w in windows.groupby("rank"):
        mine = np.flatnonzero(ranks == rank)
        if not len(mine):
            continue
        starts, ends, steps = w["start_us"].to_numpy(), w["end_us"].to_numpy(), w["step"].to_numpy()
        j = np.searchsorted(starts, times[mine], side="right") - 1
        inside = (j >= 0) & (times[mine] < ends[np.maximum(j, 0)])
        out[mine[inside]] = steps[j[inside]]
    return out


def _host_tables(trace: Trace) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(collectives run by gloo threads, host operators that compute), with rank and times from the origin."""
    ev = trace.events
    ranks, _ = event_ranks(trace)
    host = ~ev["on_device"].to_numpy()
    names = ev["name"].astype(str)
    t0 = _t0(trace)

    def frame(mask: np.ndarray) -> pd.DataFrame:
        rows = np.flatnonzero(mask)
        return pd.DataFrame(
            {
                "rank": ranks[rows],
                "name": names.to_numpy(dtype=object)[rows],
                "lane": ev["lane"].to_numpy(dtype=object)[rows],
                "start_us": ev["ts"].to_numpy()[rows] - t0,
                "end_us": (ev["ts"] + ev["dur"].clip(lower=0)).to_numpy()[rows] - t0,
                "input_dims": ev["input_dims"].to_numpy(dtype=object)[rows],
                "input_types": ev["input_types"].to_numpy(dtype=object)[rows],
            }
        )

    comm = frame(host & names.str.startswith(HOST_COLLECTIVE).to_numpy())
    ops = frame(host & (ev["cat"] == "cpu_op").to_numpy() & ~names.str.startswith(ENQUEUE_PREFIXES).to_numpy())
    return comm, ops


def _parsed(text: object) -> object:
    """A recorded ``Input Dims`` / ``Input type`` text as a list ('[[32768]]' -> [[32768]]); None when unreadable."""
    try:
        return ast.literal_eval(text) if isinstance(text, str) and text else text
    except (ValueError, SyntaxError):
        return None


def _first_list(text: object) -> list:
    """The first entry of a recorded ``Input Dims`` text ('[[32768]]' -> [32768])."""
    value = _parsed(text)
    return list(value[0]) if isinstance(value, (list, tuple)) and value and isinstance(value[0], (list, tuple)) else []


def _host_bytes(dims: object, types: object, collective: str, world: int) -> float:
    """Bytes of the whole buffer a gloo collective works on (an all-gather's input is one rank's share)."""
    shape, kinds = _first_list(dims), _parsed(types)
    try:
        itemsize = lookup(str(kinds[0])).itemsize  # type: ignore[index]
    except (ValueError, TypeError, IndexError, KeyError):
        return float("nan")
    if not shape:
        return float("nan")
    n = float(np.prod(shape))
    return n * itemsize * (world if collective == "all_gather" else 1)


@lru_cache(maxsize=64)
def _nccl_kernel_args(path: str, stamp: FileStamp) -> tuple[tuple[object, ...], ...]:
    """(correlation, in nelems, out nelems, dtype) of each NCCL kernel in one file. Cached by the file's stamp:
    the loaded trace keeps no kernel arguments, and parsing a rank's whole file again costs seconds per call."""
    rows = []
    for e in read_document(path).get("traceEvents") or []:
        args = e.get("args") if isinstance(e, dict) else None
        if e.get("cat") == "kernel" and isinstance(args, dict) and "In msg nelems" in args:
            rows.append(
                (args.get("correlation"), args.get("In msg nelems"), args.get("Out msg nelems"), args.get("dtype"))
            )
    return tuple(rows)


def _nccl_args(trace: Trace) -> pd.DataFrame:
    """The communication arguments of NCCL kernels, read from each rank's file: rank, correlation, nelems, dtype."""
    traces = trace.rank_traces if isinstance(trace, MultiRankTrace) else [trace]
    rows = []
    for i, t in enumerate(traces):
        if not t.info.path:
            continue
        info_rank = t.distributed_info.get("rank") if isinstance(t.distributed_info, dict) else None
        rank = info_rank if isinstance(info_rank, int) and not isinstance(info_rank, bool) else i
        path = str(t.info.path)
        rows.extend((rank, *args) for args in _nccl_kernel_args(path, FileStamp.of(path)))
    return pd.DataFrame(rows, columns=["rank", "correlation", "in_nelems", "out_nelems", "dtype_arg"])


def _device_collectives(trace: Trace, work: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    comm = work[work["work"] == "communication"].copy()
    decoded = decode_kernels(list(comm["name"].unique())).set_index("name") if len(comm) else pd.DataFrame()
    for col in ("collective", "dtype", "algorithm", "protocol"):
        comm[col] = comm["name"].map(decoded[col]) if col in decoded else None
    comm["collective"] = comm["collective"].map(lambda c: NCCL_COLLECTIVES.get(c, c) if isinstance(c, str) else c)
    # message sizes: join the kernel's own arguments through its correlation id
    ev = trace.events
    ranks, _ = event_ranks(trace)
    kernels = np.flatnonzero(ev["on_device"].to_numpy())
    ids = pd.DataFrame(
        {
            "rank": ranks[kernels],
            "name": ev["name"].to_numpy(dtype=object)[kernels],
            "start_us": ev["ts"].to_numpy()[kernels] - _t0(trace),
            "correlation": pd.to_numeric(ev["correlation"].to_numpy()[kernels], errors="coerce"),
        }
    )
    comm = comm.merge(ids, on=["rank", "name", "start_us"], how="left")
    args = _nccl_args(trace)
    comm["bytes"] = np.nan
    if len(args):
        args["correlation"] = pd.to_numeric(args["correlation"], errors="coerce")
        comm = comm.merge(args.drop_duplicates(["rank", "correlation"]), on=["rank", "correlation"], how="left")
        nelems = np.fmax(
            pd.to_numeric(comm["in_nelems"], errors="coerce"), pd.to_numeric(comm["out_nelems"], errors="coerce")
        )
        size = comm["dtype_arg"].map(lambda d: _itemsize(d))
        comm["bytes"] = nelems * size
    comm["where"] = "GPU kernel"
    comm["launch_us"] = comm["launch_start"]
    when = comm["launch_start"].fillna(comm["start_us"]).to_numpy()
    comm["step"] = _step_of(comm["rank"].to_numpy(), when, windows)
    return comm


def _itemsize(name: object) -> float:
    try:
        return float(lookup(str(name)).itemsize)
    except (ValueError, TypeError):
        return float("nan")


def compute_spans(trace: Trace) -> tuple[pd.DataFrame, bool]:
    """(compute intervals with rank and step, on_gpu): GPU compute kernels, or host operators on a CPU run."""
    windows = step_windows(trace)
    work = device_work(trace)
    if len(work) and (work["work"] == "communication").any():
        compute = work[work["work"] == "compute"].copy()
        when = compute["launch_start"].fillna(compute["start_us"]).to_numpy()
        compute["step"] = _step_of(compute["rank"].to_numpy(), when, windows)
        return compute, True
    _, ops = _host_tables(trace)
    ops["step"] = _step_of(ops["rank"].to_numpy(), ops["start_us"].to_numpy(), windows)
    return ops, False


def collectives(trace: Trace) -> pd.DataFrame:
    """Every collective of every rank in time order: its step, kind, bytes (NaN when the trace does not say),
    and how much of it compute on the same rank overlapped; ValueError when the trace holds none."""
    check_trace(trace)
    windows = step_windows(trace)
    work = device_work(trace)
    if len(work) and (work["work"] == "communication").any():
        table = _device_collectives(trace, work, windows)
        compute = work[work["work"] == "compute"]
        group = ["rank", "gpu"]
    else:
        table, compute = _host_tables(trace)
        if table.empty:
            raise ValueError(
                f"{trace.info.describe()} holds no collective: no NCCL kernel and no gloo range. "
                "Was it recorded from a torch.distributed run, with the profiler on during the step?"
            )
        world = len(pd.unique(table["rank"]))
        table["collective"] = table["name"].str.removeprefix(HOST_COLLECTIVE)
        table["bytes"] = [
            _host_bytes(d, t, c, world)
            for d, t, c in zip(table["input_dims"], table["input_types"], table["collective"])
        ]
        table["where"] = "gloo thread"
        table["launch_us"] = np.nan
        table["step"] = _step_of(table["rank"].to_numpy(), table["start_us"].to_numpy(), windows)
        table["gpu"] = ""
        compute = compute.assign(gpu="")
        group = ["rank", "gpu"]
    table["duration_us"] = table["end_us"] - table["start_us"]
    overlapped = np.zeros(len(table))
    for key, rows in table.groupby(group).groups.items():
        mine = compute[(compute["rank"] == key[0]) & (compute["gpu"] == key[1])]
        spans = union(mine["start_us"].to_numpy(), mine["end_us"].to_numpy())
        for i in rows:
            at = table.index.get_loc(i)
            one = (np.array([table.at[i, "start_us"]]), np.array([table.at[i, "end_us"]]))
            overlapped[at] = intersection_length(one, spans)
    table["overlapped_us"] = overlapped
    table["overlap_pct"] = 100.0 * overlapped / table["duration_us"].where(table["duration_us"] > 0)
    cols = ["rank", "step", "collective", "where", "name", "start_us", "duration_us", "bytes", "overlapped_us"]
    cols += ["overlap_pct", "launch_us"]
    cols += [c for c in ("dtype", "algorithm", "protocol") if c in table]
    return table.sort_values(["start_us", "rank"], kind="stable")[cols].reset_index(drop=True)


def communication_per_step(trace: Trace) -> pd.DataFrame:
    """Per rank and step: step time, compute and communication (unions of intervals), their overlap, what
    communication was exposed, and host idle time (``start_idle_us``: a step started late, as behind a slow loader)."""
    windows = step_windows(trace)
    comm = collectives(trace)
    compute, on_gpu = compute_spans(trace)
    _, host_ops = _host_tables(trace)
    rows = []
    for w in windows.itertuples():
        c = comm[(comm["rank"] == w.rank) & (comm["step"] == w.step)]
        k = compute[(compute["rank"] == w.rank) & (compute["step"] == w.step)]
        cu = union(c["start_us"].to_numpy(), (c["start_us"] + c["duration_us"]).to_numpy())
        ku = union(k["start_us"].to_numpy(), k["end_us"].to_numpy())
        h = host_ops[
            (host_ops["rank"] == w.rank) & (host_ops["end_us"] > w.start_us) & (host_ops["start_us"] < w.end_us)
        ]
        starts = np.clip(h["start_us"].to_numpy(), w.start_us, w.end_us)
        hu = union(starts, np.clip(h["end_us"].to_numpy(), w.start_us, w.end_us))
        comm_us, both = length(*cu), intersection_length(cu, ku)
        rows.append(
            {
                "rank": w.rank,
                "step": w.step,
                "step_us": w.step_us,
                "collectives": len(c),
                "communication_us": comm_us,
                "compute_us": length(*ku),
                "overlap_us": both,
                "exposed_communication_us": comm_us - both,
                "overlap_pct": 100.0 * both / comm_us if comm_us > 0 else np.nan,
                "host_idle_us": w.step_us - length(*hu),
                "start_idle_us": (starts.min() if len(starts) else w.end_us) - w.start_us,
                "on": "GPU" if on_gpu else "CPU",
            }
        )
    return pd.DataFrame(rows)


def rank_table(trace: Trace) -> pd.DataFrame:
    """One row per rank: its median step and how often its step was the longest. The slowest rank waits least in
    its collectives; on GPUs a profiled rank's collectives also wait on its own host, which overstates the others'."""
    per_step = communication_per_step(trace)
    steps = per_step[per_step["step"] >= 0]
    if steps.empty:
        raise ValueError(f"{trace.info.describe()} has no profiler step with a rank")
    longest = steps.loc[steps.groupby("step")["step_us"].idxmax(), "rank"].value_counts()
    cols = ["step_us", "collectives", "communication_us", "exposed_communication_us", "compute_us", "host_idle_us"]
    cols += ["start_idle_us"]
    out = steps.groupby("rank")[cols].median()
    out["overlap_pct"] = 100.0 * (
        1 - out["exposed_communication_us"] / out["communication_us"].where(out["communication_us"] > 0)
    )
    out["longest_step_in"] = [int(longest.get(r, 0)) for r in out.index]
    return out.reset_index()
