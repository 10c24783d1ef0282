"""Lesson 06: the sweep over M read with the same consistency rules as the main table (which readings something
else on the machine disturbed, and which sizes therefore name no wall-time winner)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from .nb06_readings import TIE_SHARE
from .nb06_times import disturbed_times

WALL_METRICS = ("e2e_nosync_us", "e2e_sync_us")


def _measured(sweep: pd.DataFrame) -> pd.DataFrame:
    """The rows the benchmark measured (a sweep may also hold rows of sizes it skipped or could not run)."""
    return sweep[sweep["status"] == "ok"] if "status" in sweep.columns else sweep


def sweep_disturbed(sweep: pd.DataFrame, main: pd.DataFrame | None = None, main_m: int | None = None) -> pd.DataFrame:
    """The sweep's rows whose wall times are disturbed, one row per (m, variant) with why: the contradictions of
    :func:`disturbed_times` within one size; a back-to-back time beyond the tie share of its kernel time plus the
    variant's smallest back-to-back time at a smaller size (its host work per call, which no size can exceed); and,
    given the main table ``main`` measured at ``main_m``, a wall time there beyond the tie share of the main
    table's (two readings of one call: a disturbance only ever adds time)."""
    if not {"m", "variant", "kernel_us", "e2e_nosync_us", "e2e_sync_us"} <= set(sweep.columns):
        raise ValueError("sweep needs the columns m, variant, kernel_us, e2e_nosync_us and e2e_sync_us")
    ok = _measured(sweep)
    found: dict[tuple[int, str], str] = {}
    for m, g in ok.groupby("m"):
        for v, why in disturbed_times(g).items():
            found[(int(m), v)] = "; ".join(why)
    # a call issues the same launches at every size: back to back, its host work is at most its smallest time
    for v, g in ok.sort_values("m").groupby("variant", sort=False):
        least = float("inf")
        for r in g.itertuples():
            b2b, kernels = float(r.e2e_nosync_us), float(r.kernel_us)
            if (int(r.m), v) not in found and b2b > (1 + TIE_SHARE) * (kernels + least):
                found[(int(r.m), v)] = (
                    f"{b2b:.0f} us back to back against {kernels:.0f} us of kernels plus at most {least:.0f} us of "
                    "host work (its back to back at a smaller M)"
                )
            least = min(least, b2b)
    if main is not None and main_m is not None:
        ref = main.set_index("variant")
        for r in ok[ok["m"] == main_m].itertuples():
            if (int(r.m), r.variant) in found or r.variant not in ref.index:
                continue
            why = [
                f"{float(getattr(r, c)):.0f} us {words} against {float(ref.loc[r.variant, c]):.0f} us in the main table"
                for c, words in (("e2e_nosync_us", "back to back"), ("e2e_sync_us", "synchronised"))
                if float(getattr(r, c)) > (1 + TIE_SHARE) * float(ref.loc[r.variant, c])
            ]
            if why:
                found[(int(r.m), str(r.variant))] = "; ".join(why)
    rows = [{"m": m, "variant": v, "why": why} for (m, v), why in found.items()]
    return pd.DataFrame(rows, columns=["m", "variant", "why"]).sort_values(["m", "variant"], ignore_index=True)


def sweep_winners_read(
    sweep: pd.DataFrame, main: pd.DataFrame | None = None, main_m: int | None = None
) -> tuple[pd.DataFrame, str]:
    """Per M, the fastest variant by kernel time and by each wall time with its margin over the runner-up in
    percent; a wall time names no winner at a size where any reading was disturbed (:func:`sweep_disturbed`): that
    size's readings were moved by something else on the machine. Also one sentence that counts what was left out."""
    ok = _measured(sweep)
    disturbed = sweep_disturbed(sweep, main, main_m)
    bad_m = set(disturbed["m"])
    out = {}
    for metric in ("kernel_us", *WALL_METRICS):
        for m, g in ok.dropna(subset=[metric]).groupby("m"):
            g = g.sort_values(metric)
            if metric in WALL_METRICS and int(m) in bad_m:
                out[(int(m), metric)] = ("not declared (disturbed)", float("nan"))
                continue
            margin = 100 * (g[metric].iloc[1] / g[metric].iloc[0] - 1) if len(g) > 1 else float("nan")
            out[(int(m), metric)] = (str(g["variant"].iloc[0]), round(margin, 1))
    table = pd.DataFrame(
        [{"m": m, "metric": k, "fastest": f, "margin_pct": p} for (m, k), (f, p) in out.items()]
    ).pivot(index="m", columns="metric", values=["fastest", "margin_pct"])
    if disturbed.empty:
        return table, ""
    sizes = sorted(bad_m)
    named = "; ".join(
        f"M = {m}: {', '.join(disturbed.loc[disturbed['m'] == m, 'variant'])}" for m in sorted(set(disturbed["m"]))
    )
    text = (
        f"{len(disturbed)} rows of the sweep have wall times disturbed by something else on the machine (other "
        f"work, or its clocks): they contradict each other or the main table, as section 5 explains ({named}; the "
        "table below says why). At "
        f"{'that size' if len(sizes) == 1 else f'those {len(sizes)} sizes'} the winners table names no wall-time "
        f"winner: {2 * len(sizes)} of {2 * ok['m'].nunique()} wall-time cells left out. The kernel times, which the "
        "profiler reads on the GPU, still rank; the figures mark the disturbed readings with a red cross."
    )
    return table, text


def mark_disturbed(
    fig: go.Figure,
    sweep: pd.DataFrame,
    metric: str,
    relative_to: str | None = None,
    main: pd.DataFrame | None = None,
    main_m: int | None = None,
) -> go.Figure:
    """Add a cross over each disturbed wall-time reading of a sweep figure (drawn as :func:`sweep_figure` draws
    it); a kernel-time figure is returned unchanged."""
    if metric not in WALL_METRICS:
        return fig
    ok = _measured(sweep)
    keys = set(map(tuple, sweep_disturbed(sweep, main, main_m)[["m", "variant"]].itertuples(index=False)))
    if not keys:
        return fig
    pts = ok[[(int(m), v) in keys for m, v in zip(ok["m"], ok["variant"])]]
    y = pts[metric].to_numpy()
    if relative_to is not None:
        base = ok[ok["variant"] == relative_to].set_index("m")[metric]
        y = y / base.reindex(pts["m"]).to_numpy()
    return fig.add_trace(
        go.Scatter(
            x=pts["m"],
            y=y,
            mode="markers",
            name="disturbed (other work or clocks)",
            text=pts["variant"],
            marker={"symbol": "x-thin-open", "size": 16, "color": "red", "line": {"width": 2}},
        )
    )
