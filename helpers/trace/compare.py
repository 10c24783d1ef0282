"""Put traces side by side: eager vs compiled vs hand-tuned, which do not share kernel names.

Work is grouped by what it is (kernel family, annotation, launching operator, or step), not by name.
Times are microseconds and, unless ``per_step=True``, means per profiler step, so traces of different
lengths compare fairly.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .categories import device_work_mask
from .model import Trace, check_trace
from .work import work_items

GROUPINGS = ("family", "source", "annotation", "op", "name", "step")
METRICS = ("kernels", "device_us", "launches", "launch_us", "cpu_us", "idle_us")


# --------------------------------------------------------------------------- per-step host and device time
def _step_windows(trace: Trace) -> pd.DataFrame:
    """step, host start/end (us) of each profiler step; one row (step -1) spanning the trace without steps."""
    ev = trace.events
    host = ev[~ev["on_device"]]
    is_step = host["name"].str.startswith("ProfilerStep#") & (host["step"] >= 0)
    steps = host[is_step]
    if len(steps):
        out = pd.DataFrame(
            {
                "step": steps["step"].to_numpy(),
                "start": steps["ts"].to_numpy(),
                "end": (steps["ts"] + steps["dur"]).to_numpy(),
            }
        )
        return out.groupby("step", as_index=False).agg(start=("start", "min"), end=("end", "max"))
    if host.empty:
        return pd.DataFrame({"step": [-1], "start": [np.nan], "end": [np.nan]})
    # No steps: the busiest host thread's span stands for the run
    lane = host["lane"].value_counts().index[0]
    main = host[host["lane"] == lane]
    return pd.DataFrame({"step": [-1], "start": [main["ts"].min()], "end": [(main["ts"] + main["dur"]).max()]})


def _idle_by_step(items: pd.DataFrame) -> pd.Series:
    """Per step: time between its first kernel start and last kernel end when no kernel runs.

    Union of busy intervals, vectorised: sorted by start within each step, a gap is where a kernel
    starts after every earlier kernel of the step has ended.
    """
    dev = items[items["unit"] == "device kernel"]
    if dev.empty:
        return pd.Series(dtype=float)
    df = pd.DataFrame(
        {
            "step": dev["step"].to_numpy(),
            "start": dev["start_us"].to_numpy(),
            "end": (dev["start_us"] + dev["duration_us"]).to_numpy(),
        }
    )
    df = df.sort_values(["step", "start"], kind="stable")
    reach = df.groupby("step")["end"].cummax()
    before = reach.groupby(df["step"]).shift(1)
    gap = (df["start"] - before).clip(lower=0).fillna(0.0)
    return gap.groupby(df["step"]).sum()


def launch_totals(items: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Launch calls and their host time per group of `keys`, each call counted once.

    A graph launch runs many kernels from one call: counting per kernel would multiply both the
    calls and their time (an sglang decode step shows 15 hipGraphLaunch calls for 558 kernels).
    A call whose kernels fall in several groups counts once in each of them.
    """
    called = items[items["launch_row"] >= 0].drop_duplicates([*keys, "launch_row"])
    out = called.groupby(keys, sort=False).agg(launches=("launch_row", "size"), launch_us=("launch_us", "sum"))
    out["launches"] = out["launches"].astype(float)
    return out


def _per_step(trace: Trace, items: pd.DataFrame) -> pd.DataFrame:
    """kernels, device_us, launches, launch_us, cpu_us, idle_us for every step of one trace."""
    windows = _step_windows(trace).set_index("step")
    has_steps = windows.index[0] != -1
    # without profiler steps the whole trace is one step (-1)
    items = items if has_steps else items.assign(step=-1)
    per = items.groupby("step").agg(kernels=("name", "size"), device_us=("duration_us", "sum"))
    per = per.join(launch_totals(items, ["step"]), how="left")
    out = per.reindex(windows.index).fillna(0)
    out["cpu_us"] = (windows["end"] - windows["start"]).astype(float)
    out["idle_us"] = _idle_by_step(items).reindex(windows.index)  # NaN: no device kernel in the step
    out["kernels"] = out["kernels"].astype(int)
    out["launches"] = out["launches"].astype(int)
    return out.reset_index()


def _in_steps(trace: Trace, items: pd.DataFrame) -> pd.DataFrame:
    """The work inside profiler steps (all of it when the trace has no steps): per-step numbers
    must not count kernels launched before the first or after the last step."""
    return items[items["step"] >= 0] if trace.steps else items


def _labels(traces: tuple[Trace, ...], labels: list[str] | None) -> list[str]:
    if labels is None:
        labels = [t.info.label for t in traces]
    elif len(labels) != len(traces):
        raise ValueError(f"got {len(labels)} labels for {len(traces)} traces: give one label per trace")
    out: list[str] = []
    for lab in map(str, labels):
        name, k = lab, 2
        while name in out:  # the same trace twice (or two traces with one label) stay apart
            name, k = f"{lab} ({k})", k + 1
        out.append(name)
    return out


def compare(
    *traces: Trace, by: str = "family", per_step: bool = False, labels: list[str] | None = None
) -> pd.DataFrame:
    """Traces side by side: one column block per trace, one row per group of work, then a total.

    - `by`: "family" (gemm, elementwise, fused, memset ... from the kernel names), "source" (the
      library: cublas-nvjet, cudnn, nccl, aten, triton-inductor ...), "annotation"
      (the innermost ``record_function`` around the launch), "op" (the cpu_op that launched the
      kernel), "name" (kernel name), or "step" (one row per profiler step).
    - `per_step`: one row per (step, group) instead of means per step.
    - `labels`: column names for the traces (default: each trace's label).

    Columns: a MultiIndex (trace label, metric) with metrics
    ``kernels`` (count), ``device_us`` (time inside those kernels: device time, or host time for
    the host work of a CPU-only trace), ``launches`` (host launch calls, cudaLaunchKernel or
    cuLaunchKernelEx ...; a graph launch is one call however many kernels it runs, and a call whose
    kernels fall in several groups counts in each), ``launch_us`` (host time inside those calls),
    and on the "total" rows
    (and every row of ``by="step"``) ``cpu_us`` (host wall time of the step, ``ProfilerStep#N``)
    and ``idle_us`` (device time between the step's first kernel start and last kernel end with
    no kernel running). A group a trace does not have shows 0 kernels. In a trace with profiler
    steps, work outside every step (warm-up, synchronisation after the last step) is left out.
    """
    if not traces:
        raise ValueError("compare() needs at least one trace: compare(eager, compiled, ...)")
    for i, t in enumerate(traces):
        check_trace(t, f"argument {i + 1}")
    if by not in GROUPINGS:
        raise ValueError(f"by must be one of {GROUPINGS}, got {by!r}")
    names = _labels(traces, labels)
    blocks = []
    for label, trace in zip(names, traces):
        items = _in_steps(trace, work_items(trace))
        steps = _per_step(trace, items)
        n_steps = max(len(steps), 1)
        if by == "step":
            table = steps.set_index("step")[list(METRICS)]
            table.loc["mean"] = table.mean(numeric_only=True)
        else:
            key = by
            items = items.assign(group=items[key].replace("", f"(no {by})"))
            group_keys = ["step", "group"] if per_step else ["group"]
            table = items.groupby(group_keys, sort=False).agg(
                kernels=("name", "size"), device_us=("duration_us", "sum")
            )
            table = table.join(launch_totals(items, group_keys), how="left").fillna({"launches": 0, "launch_us": 0.0})
            if per_step:
                totals = steps.set_index("step")[list(METRICS)]
                totals.index = pd.MultiIndex.from_arrays(
                    [totals.index, ["total"] * len(totals)], names=["step", "group"]
                )
            else:
                table = table / n_steps
                totals = steps[list(METRICS)].mean(numeric_only=True).to_frame("total").T
            table["cpu_us"] = np.nan
            table["idle_us"] = np.nan
            table = pd.concat([table[list(METRICS)], totals[list(METRICS)]])
        table.columns = pd.MultiIndex.from_product([[label], table.columns])
        blocks.append(table)
    out = pd.concat(blocks, axis=1, sort=False)
    # groups a trace does not have: no kernels, no time (but cpu/idle stay undefined there)
    for label in names:
        for m in ("kernels", "device_us", "launches", "launch_us"):
            out[(label, m)] = out[(label, m)].fillna(0.0)
    out = _order_rows(out, names, by, per_step)
    out.index.name = by if not per_step or by == "step" else out.index.name
    return out


def _order_rows(out: pd.DataFrame, names: list[str], by: str, per_step: bool) -> pd.DataFrame:
    """Groups by total device time, largest first; the total row last (per step when per_step)."""
    if by == "step":
        steps = [s for s in out.index if s != "mean"]
        return out.loc[sorted(steps, key=lambda s: int(s)) + ["mean"]]
    weight = sum(out[(label, "device_us")] for label in names)
    if per_step:
        keys = pd.DataFrame(
            {
                "step": out.index.get_level_values(0).astype(int),
                "total": out.index.get_level_values(1) == "total",
                "weight": -weight.to_numpy(),
                "group": out.index.get_level_values(1).astype(str),
            }
        )
        return out.iloc[keys.sort_values(["step", "total", "weight", "group"], kind="stable").index.to_numpy()]
    groups = [g for g in out.index if g != "total"]
    groups.sort(key=lambda g: (-weight[g], str(g)))
    return out.loc[groups + ["total"]]


# --------------------------------------------------------------------------- what changed, what stayed
# graph_<N>_ before an Inductor C++ kernel's name: N depends on what compiled before, not on the kernel
_GRAPH_PREFIX = r"^graph_\d+_(?=cpp_)"


def compare_kernels(a: Trace, b: Trace, labels: tuple[str, str] | None = None) -> pd.DataFrame:
    """Which kernels two traces share and which are only in one of them (by exact kernel name).

    One row per distinct name: ``name``, ``family``, ``status`` ("both", "only a", "only b"),
    ``calls_a``/``calls_b`` (per step), ``us_per_step_a``/``us_per_step_b`` (time per step),
    ``mean_us_a``/``mean_us_b`` (per call), ``change_us`` (b - a per step). Rows: shared kernels
    first (what stayed), then those only in a (what went), then only in b (what came), each by time.
    ``df.attrs["labels"]`` holds {"a": ..., "b": ...}. For eager vs compiled MLP on a GPU: the
    three GEMMs are "both", the gelu and mul kernels "only a", ``triton_poi_fused_..._gelu_mul``
    "only b"; on a CPU the same holds for ``aten::mm``, ``aten::gelu``/``aten::mul`` and
    ``cpp_fused_..._gelu_mul_0``. Inductor's ``graph_<N>_`` prefix of generated C++ kernels counts the
    graphs compiled earlier in the process (and its on-disk cache keeps whatever number compiled
    first), so it is left out of the name two traces are matched by.
    """
    check_trace(a, "a")
    check_trace(b, "b")
    la, lb = _labels((a, b), list(labels) if labels is not None else None)
    sides = []
    for suffix, trace in (("a", a), ("b", b)):
        items = _in_steps(trace, work_items(trace))
        items = items.assign(name=items["name"].str.replace(_GRAPH_PREFIX, "", regex=True))
        n_steps = max(len(trace.steps), 1)
        g = items.groupby("name", sort=False).agg(
            family=("family", "first"), calls=("name", "size"), total=("duration_us", "sum")
        )
        sides.append(
            pd.DataFrame(
                {
                    "family": g["family"],
                    f"calls_{suffix}": g["calls"] / n_steps,
                    f"us_per_step_{suffix}": g["total"] / n_steps,
                    f"mean_us_{suffix}": g["total"] / g["calls"],
                }
            )
        )
    left, right = sides
    out = left.join(right.drop(columns="family"), how="outer")
    out["family"] = out["family"].fillna(right["family"].reindex(out.index))
    in_a, in_b = out["calls_a"].notna(), out["calls_b"].notna()
    out["status"] = np.select([in_a & in_b, in_a], ["both", "only a"], default="only b")
    for col in ("calls_a", "calls_b", "us_per_step_a", "us_per_step_b"):
        out[col] = out[col].fillna(0.0)
    out["change_us"] = out["us_per_step_b"] - out["us_per_step_a"]
    out = out.reset_index().rename(columns={"index": "name"})
    rank = out["status"].map({"both": 0, "only a": 1, "only b": 2})
    out = out.assign(_rank=rank, _w=-(out["us_per_step_a"] + out["us_per_step_b"]))
    out = out.sort_values(["_rank", "_w", "name"], kind="stable").drop(columns=["_rank", "_w"])
    cols = [
        "name",
        "family",
        "status",
        "calls_a",
        "calls_b",
        "us_per_step_a",
        "us_per_step_b",
        "mean_us_a",
        "mean_us_b",
        "change_us",
    ]
    out = out[cols].reset_index(drop=True)
    out.attrs["labels"] = {"a": la, "b": lb}
    return out


def kernel_breakdown(trace: Trace) -> pd.DataFrame:
    """Device time by kernel family and the library that provides it, as HTA's kernel breakdown.

    One row per (family, source), or per (rank, family, source) on a run of several ranks:
    ``kernels`` (count), ``device_us`` (sum of durations), ``pct`` (share of the rank's device time),
    ``mean_us``, ``example`` (the name with the most time). Largest first. Covers all device work
    of the trace (not only inside profiler steps).
    """
    check_trace(trace)
    items = work_items(trace)
    keys = ["family", "source"]
    if "rank" in trace.events.columns:
        items = items.assign(rank=trace.events["rank"].to_numpy()[np.flatnonzero(device_work_mask(trace.events))])
        keys = ["rank", *keys]
    if items.empty:
        return pd.DataFrame(columns=[*keys, "kernels", "device_us", "pct", "mean_us", "example"])
    top = items.groupby([*keys, "name"], sort=False)["duration_us"].sum().reset_index()
    example = top.sort_values("duration_us", ascending=False, kind="stable").drop_duplicates(keys)
    out = items.groupby(keys, sort=False).agg(kernels=("name", "size"), device_us=("duration_us", "sum")).reset_index()
    if keys[0] == "rank":
        total = out.groupby("rank")["device_us"].transform("sum")
    else:
        total = out["device_us"].sum()
    out["pct"] = 100.0 * out["device_us"] / total
    out["mean_us"] = out["device_us"] / out["kernels"]
    out = out.merge(example[[*keys, "name"]].rename(columns={"name": "example"}), on=keys, how="left")
    order = ["rank", "device_us"] if keys[0] == "rank" else ["device_us"]
    asc = [True, False] if keys[0] == "rank" else [False]
    return out.sort_values(order, ascending=asc, kind="stable").reset_index(drop=True)
