"""The MLP benchmark's stored tables as notebooks 04 and 06 show them; nothing here derives a number."""

from __future__ import annotations

import time

import plotly.graph_objects as go

from ..measure.ceilings import Ceilings, ceilings_from_dict
from ..measure.roofline import roofline_figure
from ..mlp.variants import VARIANT_NAMES
from ..paths import LOCAL_TRACES_DIR
from ..programs import run_program
from .results import Results, load_results, reference_ceilings

# The variants the live run of notebook 06 leaves out, and why: its tables say so under them.
LIVE_LEFT_OUT = {"compile-max-autotune": "its compile takes minutes"}
# The live run of notebook 06: the blog's shape, every variant but those above, no sweep.
LIVE_BENCHMARK = (
    "--shapes", "blog", "--sweep-m", "", "--budget-s", "240",
    "--variants", ",".join(n for n in VARIANT_NAMES if n not in LIVE_LEFT_OUT),
)  # fmt: skip
_METRIC_WORDS = {
    "kernel_us": "kernel time per forward",
    "e2e_nosync_us": "wall time per forward (back to back)",
    "e2e_sync_us": "wall time per forward (synchronised)",
    "graphed_us": "time per forward (CUDA graph replay)",
}


def run_mlp_benchmark(timeout_s: float = 420.0, quiet: bool = True) -> Results:
    """A short run of ``python -m benchmarks mlp`` on this GPU, as a program; its results file read back, labelled
    as measured live. ``quiet`` keeps its progress off screen: it prints answers the lesson asks to guess first."""
    out = LOCAL_TRACES_DIR / "mlp_benchmark.json"
    start = time.perf_counter()
    run_program(["-m", "benchmarks", "mlp", *LIVE_BENCHMARK, "--out", str(out)], timeout_s=timeout_s,
                progress=not quiet)  # fmt: skip
    if quiet:
        print(f"python -m benchmarks mlp ran in {time.perf_counter() - start:.0f} s; its tables are read below.")
    results = load_results(out)
    results.data["live"] = True  # read back from this run, not from benchmarks/results/
    return results


def mlp_ceilings(results: Results) -> Ceilings:
    """The ceilings a run's tables divide by (as ``benchmarks/mlp/results.py`` judged them): the course's one
    recorded set for a run on an H200, else the ceilings the run measured itself."""
    own = ceilings_from_dict(results.data["ceilings"])
    if own.device_type == "cuda" and "H200" in str(results.table("setup")["device"].iloc[0]):
        return reference_ceilings()
    return own


def mlp_roofline(results: Results) -> go.Figure:
    """The stored ``roofline`` table drawn against the ceilings it was judged with."""
    fig = roofline_figure(results.table("roofline"), mlp_ceilings(results))
    return fig.update_layout(title=f"MLP forward, one point per variant: {results.label}")


def sweep_figure(results: Results, metric: str = "kernel_us", relative_to: str | None = None) -> go.Figure:
    """Time per forward against M from the stored ``sweep`` table, one line per variant (or relative to one),
    the floor dashed."""
    if metric not in _METRIC_WORDS:
        raise ValueError(f"metric must be one of {sorted(_METRIC_WORDS)}, got {metric!r}")
    df = results.table("sweep")
    df = df[(df["status"] == "ok") & df[metric].notna()]
    if df.empty:
        raise ValueError(f"{results.label} stored no sweep with {metric}")
    base = None
    if relative_to is not None:
        if relative_to not in set(df["variant"]):
            raise ValueError(f"{relative_to!r} is not in the sweep; variants: {sorted(set(df['variant']))}")
        base = df[df["variant"] == relative_to].set_index("m")[metric]
    what = _METRIC_WORDS[metric]
    fig = go.Figure()
    for name, g in df.groupby("variant", sort=False):
        g = g.sort_values("m")
        y = g[metric].to_numpy() if base is None else g[metric].to_numpy() / base.reindex(g["m"]).to_numpy()
        fig.add_trace(go.Scatter(x=g["m"], y=y, mode="lines+markers", name=name))
    if base is None:
        floor = df.groupby("m")["floor_us"].first().sort_index()
        fig.add_trace(go.Scatter(x=floor.index, y=floor.to_numpy(), mode="lines", name="floor",
                                 line={"color": "black", "dash": "dash"}))  # fmt: skip
        fig.update_yaxes(type="log", title=f"{what} (us)")
    else:
        fig.add_hline(y=1.0, line={"color": "gray", "dash": "dot"})
        fig.update_yaxes(title=f"{what} / {relative_to}'s")
    fig.update_xaxes(type="log", title="M = batch x seq (tokens)")
    return fig.update_layout(title=f"Sweep over M, {what}: {results.label}", template="plotly_white")
