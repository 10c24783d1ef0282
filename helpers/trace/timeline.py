"""An inline plotly timeline, one lane per CPU thread and GPU stream. A cell must stay responsive: at most
`max_events` bars (whole steps from the first; the title says what was left out), WebGL above 2,000 bars."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .timeline_window import select_events

# Above this many bars, plotly's SVG bars get slow in a browser: switch to WebGL line segments.
WEBGL_THRESHOLD = 2000
# Default cap on drawn bars, so a cell's figure JSON stays small (hover text is most of it).
DEFAULT_MAX_EVENTS = 10_000
# Shaded step bands are layout shapes (drawn as SVG even in WebGL figures): keep them few.
MAX_STEP_BANDS = 60
HOVER_NAME_CHARS = 90
# Launch -> kernel lines: drawn visible up to this many, else hidden until clicked in the legend.
MAX_VISIBLE_LINKS = 400
LINK_NAME = "launch -> kernel"
RANK_SEPARATOR = " · "  # as helpers.trace.ranks names the lanes of a run of several ranks
HOVER_SHAPE_CHARS = 80
CATEGORY_COLORS = {
    "cpu_op": "#4C78A8",
    "user_annotation": "#9D755D",
    "cuda_runtime": "#F58518",
    "cuda_driver": "#E45756",
    "kernel": "#54A24B",
    "gpu_memset": "#B279A2",
    "gpu_memcpy": "#FF9DA6",
    "python_function": "#BAB0AC",
}


def _short(name: str) -> str:
    return name if len(name) <= HOVER_NAME_CHARS else name[:HOVER_NAME_CHARS] + "..."


def _hover(ev: pd.DataFrame, all_events: pd.DataFrame, origin: float) -> np.ndarray:
    """Hover text per bar; a kernel names its launch call and op, a launch call names its kernels."""
    all_names = all_events["name"].to_numpy(dtype=object)
    all_ts = all_events["ts"].to_numpy()
    all_end = all_ts + all_events["dur"].to_numpy()
    launched_by = ev["launched_by"].to_numpy()
    launch = ev["launch"].to_numpy()
    # launch call -> the first kernel it launched and how many (a graph launch runs many)
    dev = all_events["on_device"].to_numpy() & (all_events["launch"].to_numpy() >= 0)
    targets = pd.Series(np.flatnonzero(dev), index=all_events["launch"].to_numpy()[dev])
    first_target = targets.groupby(level=0).first() if len(targets) else pd.Series(dtype=np.int64)
    n_targets = targets.groupby(level=0).size() if len(targets) else pd.Series(dtype=np.int64)
    texts = []
    for row, name, d, dims, lb, li, cat, lane, start in zip(
        ev.index.to_numpy(),
        ev["name"],
        ev["dur"].to_numpy(),
        ev["input_dims"],
        launched_by,
        launch,
        ev["cat"],
        ev["lane"],
        ev["ts"].to_numpy(),
    ):
        text = f"<b>{_short(name)}</b><br>{cat} on {lane}<br>{d:,.1f} us at {start - origin:,.1f} us"
        if dims:
            text += f"<br>shapes {dims[:HOVER_SHAPE_CHARS]}"
        if li >= 0:
            text += (
                f"<br>launch call {all_names[li]} at {all_ts[li] - origin:,.1f} us; started "
                f"{start - all_end[li]:,.1f} us after the call returned"
            )
        if lb >= 0:
            text += f"<br>launched by {all_names[lb]}"
        if row in first_target.index:
            k = int(first_target[row])
            more = int(n_targets[row]) - 1
            text += f"<br>launches {_short(all_names[k])} at {all_ts[k] - origin:,.1f} us" + (
                f" and {more:,} more (a graph launch)" if more else ""
            )
        texts.append(text)
    return np.array(texts, dtype=object)


def _lane_key(lane: str, host: bool) -> tuple[str, int, str]:
    """Lanes grouped by rank ('rank 1 · ...'), host threads before device streams, then by name."""
    prefix, sep, rest = lane.partition(RANK_SEPARATOR)
    return (prefix, 0 if host else 1, rest) if sep else ("", 0 if host else 1, lane)


def timeline_figure(
    trace,
    steps: int | list[int] | None = None,
    max_events: int = DEFAULT_MAX_EVENTS,
    max_depth: int = 6,
    webgl: bool | None = None,
    height: int | None = None,
    time_range_us: tuple[float, float] | None = None,
) -> go.Figure:
    """A plotly timeline of `trace` (`steps`, `time_range_us` and `max_depth` choose what is drawn);
    ``fig.layout.meta`` says what was drawn and left out."""
    if isinstance(max_events, bool) or not isinstance(max_events, int) or max_events < 1:
        raise ValueError(f"max_events must be a positive integer, got {max_events!r}")
    if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 0:
        raise ValueError(f"max_depth must be an integer >= 0, got {max_depth!r}")
    ev, drawn_steps, note = select_events(trace, steps, max_events, max_depth, time_range_us)
    t0, origin_text = _origin(trace, drawn_steps if time_range_us is None else [])
    host_lanes = set(ev.loc[~ev["on_device"], "lane"].unique())
    lanes = sorted(set(ev["lane"].unique()), key=lambda lane: _lane_key(lane, lane in host_lanes))
    # Each lane gets a band of height 1; host events nest downwards inside it by depth.
    depth_span = ev.groupby("lane")["depth"].max().add(1).to_dict()
    lane_top = {lane: k * 1.25 for k, lane in enumerate(lanes)}
    start = ev["ts"].to_numpy() - t0
    dur = ev["dur"].to_numpy()
    lane_col = ev["lane"].to_numpy(dtype=object)
    row_h = np.array([1.0 / depth_span[lane] for lane in lane_col]) if len(ev) else np.zeros(0)
    center = (
        np.array([lane_top[lane] for lane in lane_col]) + (ev["depth"].to_numpy() + 0.5) * row_h
        if len(ev)
        else np.zeros(0)
    )
    hover = _hover(ev, trace.events, t0)

    use_webgl = len(ev) > WEBGL_THRESHOLD if webgl is None else bool(webgl)
    fig = go.Figure()
    cats = ev["cat"].to_numpy(dtype=object)
    for cat in sorted(set(cats)):
        idx = np.flatnonzero(cats == cat)
        color = CATEGORY_COLORS.get(cat, "#72B7B2")
        if use_webgl:
            # float32 halves the figure's number payload; sub-ns precision is lost, which no one sees
            xs = np.column_stack([start[idx], start[idx] + dur[idx], np.full(len(idx), np.nan)]).ravel()
            ys = np.repeat(center[idx], 3)
            fig.add_trace(
                go.Scattergl(
                    x=xs.astype(np.float32),
                    y=ys.astype(np.float32),
                    mode="lines",
                    line=dict(color=color, width=8),
                    name=cat,
                    legendgroup=cat,
                    hoverinfo="skip",
                )
            )
            fig.add_trace(
                go.Scattergl(
                    x=(start[idx] + dur[idx] / 2).astype(np.float32),
                    y=center[idx].astype(np.float32),
                    mode="markers",
                    marker=dict(color=color, size=4),
                    name=cat,
                    legendgroup=cat,
                    showlegend=False,
                    hovertext=hover[idx],
                    hoverinfo="text",
                )
            )
        else:
            fig.add_trace(
                go.Bar(
                    base=start[idx],
                    x=np.maximum(dur[idx], 1e-3),
                    y=center[idx],
                    width=row_h[idx] * 0.9,
                    orientation="h",
                    marker_color=color,
                    name=cat,
                    hovertext=hover[idx],
                    hoverinfo="text",
                )
            )
    _add_launch_links(fig, ev, t0, center, use_webgl)
    ev_all = trace.events
    step_rows = ev_all[
        (~ev_all["on_device"])
        & ev_all["name"].str.startswith("ProfilerStep#")
        & ev_all["step"].isin(drawn_steps[:MAX_STEP_BANDS])
    ]
    # One layout update for all bands: add_vrect re-validates every shape already there (quadratic).
    shapes = [
        dict(
            type="rect",
            xref="x",
            yref="paper",
            x0=r.ts - t0,
            x1=r.ts - t0 + r.dur,
            y0=0,
            y1=1,
            fillcolor="#999",
            opacity=0.08,
            line_width=0,
            layer="below",
        )
        for r in step_rows.itertuples(index=False)
    ]
    labels = [
        dict(
            xref="x",
            yref="paper",
            x=r.ts - t0,
            y=1,
            text=f"step {r.step}",
            showarrow=False,
            xanchor="left",
            yanchor="top",
        )
        for r in step_rows.itertuples(index=False)
    ]
    fig.update_layout(shapes=shapes, annotations=labels)
    if len(drawn_steps) > MAX_STEP_BANDS:
        note = "; ".join(filter(None, [note, f"step bands shown for the first {MAX_STEP_BANDS} steps"]))
    title = f"{trace.info.describe()}"
    if note:
        title += f"<br><sup>{note}</sup>"
    fig.update_layout(
        title=title,
        barmode="overlay",
        bargap=0,
        height=height or int(160 + 90 * max(len(lanes), 1)),
        xaxis_title=f"time since {origin_text} (us)",
        legend_title="category",
        hovermode="closest",
        yaxis=dict(
            tickmode="array",
            tickvals=[lane_top[lane] + 0.5 for lane in lanes],
            ticktext=lanes,
            autorange="reversed",
            zeroline=False,
        ),
        margin=dict(l=10, r=10, t=70, b=40),
    )
    fig.layout.meta = {
        "lanes": lanes,
        "drawn_events": int(len(ev)),
        "total_events": int(len(trace.events)),
        "steps": [int(s) for s in drawn_steps],
        "note": note,
        "webgl": bool(use_webgl),
        "time_origin": origin_text,
        "origin_us": t0 - float(trace.events["ts"].min()),
        "launch_links": int(sum(len(t.x) // 3 for t in fig.data if t.name == LINK_NAME)),
    }
    return fig


def _origin(trace, steps: list[int]) -> tuple[float, str]:
    """Time zero of the axis: the start of the first drawn profiler step, else of the trace."""
    ev = trace.events
    if steps:
        first = ev[(~ev["on_device"]) & (ev["name"] == f"ProfilerStep#{steps[0]}")]
        if len(first):
            return float(first["ts"].min()), f"the start of step {steps[0]}"
    return float(ev["ts"].min()), "trace start"


def _add_launch_links(fig: go.Figure, ev: pd.DataFrame, t0: float, center: np.ndarray, webgl: bool) -> None:
    """A line from each drawn launch call to each drawn kernel it launched (one legend entry)."""
    launch = ev["launch"].to_numpy()
    position = pd.Series(np.arange(len(ev)), index=ev.index)
    dev = np.flatnonzero(ev["on_device"].to_numpy() & (launch >= 0) & np.isin(launch, ev.index.to_numpy()))
    if not len(dev):
        return
    src = position.loc[launch[dev]].to_numpy()
    ts = ev["ts"].to_numpy()
    x0 = ts[src] + ev["dur"].to_numpy()[src] - t0  # the call's end ...
    x1 = ts[dev] - t0  # ... to the kernel's start
    xs = np.column_stack([x0, x1, np.full(len(dev), np.nan)]).ravel()
    ys = np.column_stack([center[src], center[dev], np.full(len(dev), np.nan)]).ravel()
    kind = go.Scattergl if webgl else go.Scatter
    fig.add_trace(
        kind(
            x=xs.astype(np.float32) if webgl else xs,
            y=ys.astype(np.float32) if webgl else ys,
            mode="lines",
            line=dict(color="rgba(120,120,120,0.45)", width=1),
            name=LINK_NAME,
            hoverinfo="skip",
            # shown by default on small figures; one click in the legend on big ones
            visible=True if len(dev) <= MAX_VISIBLE_LINKS else "legendonly",
        )
    )
