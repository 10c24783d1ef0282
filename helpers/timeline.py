"""An inline timeline of a trace: one lane per CPU thread and per GPU stream, drawn with plotly.

Replaces uploading a trace to an external viewer for the course's purposes: bars for host events
(nested calls stacked inside their thread's lane) and device kernels, profiler steps shaded,
and a hover that shows name, duration, shapes and, for a kernel, the op that launched it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

# Above this many bars, plotly's SVG bars get slow in a browser: switch to WebGL line segments.
WEBGL_THRESHOLD = 2000
CATEGORY_COLORS = {
    "cpu_op": "#4C78A8", "user_annotation": "#9D755D", "cuda_runtime": "#F58518", "cuda_driver": "#E45756",
    "kernel": "#54A24B", "gpu_memset": "#B279A2", "gpu_memcpy": "#FF9DA6", "python_function": "#BAB0AC",
}


def _select(trace, steps, max_events: int, max_depth: int) -> tuple[pd.DataFrame, str]:
    ev = trace.events
    ev = ev[(ev["cat"] != "python_function") & (ev["cat"] != "gpu_user_annotation")]
    ev = ev[ev["on_device"] | (ev["depth"] <= max_depth)]
    notes = []
    if steps is not None:
        wanted = [steps] if isinstance(steps, int) else list(steps)
        unknown = sorted(set(wanted) - set(trace.steps))
        if unknown:
            raise ValueError(f"steps {unknown} are not in this trace; it has steps {trace.steps}")
        ev = ev[ev["step"].isin(wanted)]
        notes.append(f"steps {wanted}")
    if len(ev) > max_events:
        # Keep the earliest events: a contiguous window reads better than a random sample.
        dropped = len(ev) - max_events
        ev = ev.iloc[:max_events]
        notes.append(f"first {max_events:,} events drawn, {dropped:,} later ones left out (pass steps= or max_events=)")
    return ev, "; ".join(notes)


def timeline_figure(trace, steps: int | list[int] | None = None, max_events: int = 20_000,
                    max_depth: int = 6, webgl: bool | None = None, height: int | None = None) -> go.Figure:
    """A plotly timeline of `trace`. Returns the figure (call ``.show()`` yourself).

    - `steps`: a profiler step number or list of them to draw (default: all).
    - `max_events`: cap on drawn bars; what is left out is said in the title.
    - `max_depth`: deepest host nesting level drawn (0 = outermost calls only).
    - `webgl`: draw with WebGL line segments (default: when there are more than 2,000 bars).
    """
    if isinstance(max_events, bool) or not isinstance(max_events, int) or max_events < 1:
        raise ValueError(f"max_events must be a positive integer, got {max_events!r}")
    ev, note = _select(trace, steps, max_events, max_depth)
    t0 = float(trace.events["ts"].min())
    lanes = sorted(ev.loc[~ev["on_device"], "lane"].unique()) + sorted(ev.loc[ev["on_device"], "lane"].unique())
    # Each lane gets a band of height 1; host events nest downwards inside it by depth.
    depth_span = {lane: int(ev.loc[ev["lane"] == lane, "depth"].max()) + 1 for lane in lanes}
    lane_top = {}
    y = 0.0
    for lane in lanes:
        lane_top[lane] = y
        y += 1.0 + 0.25
    start = ev["ts"].to_numpy() - t0
    dur = ev["dur"].to_numpy()
    row_h = np.array([1.0 / depth_span[l] for l in ev["lane"]]) if len(ev) else np.array([])
    center = np.array([lane_top[l] for l in ev["lane"]]) + (ev["depth"].to_numpy() + 0.5) * row_h if len(ev) else np.array([])

    names = trace.events["name"].to_numpy()
    launched_by = ev["launched_by"].to_numpy()
    hover = []
    for name, d, dims, lb, cat, lane in zip(ev["name"], dur, ev["input_dims"], launched_by, ev["cat"], ev["lane"]):
        text = f"<b>{name[:120]}</b><br>{cat} on {lane}<br>{d:,.1f} us"
        if dims:
            text += f"<br>shapes {dims[:120]}"
        if lb >= 0:
            text += f"<br>launched by {names[lb]}"
        hover.append(text)

    use_webgl = len(ev) > WEBGL_THRESHOLD if webgl is None else webgl
    fig = go.Figure()
    for cat, group in ev.groupby("cat", sort=True):
        idx = ev.index.get_indexer(group.index)
        color = CATEGORY_COLORS.get(cat, "#72B7B2")
        if use_webgl:
            xs = np.column_stack([start[idx], start[idx] + dur[idx], np.full(len(idx), np.nan)]).ravel()
            ys = np.repeat(center[idx], 3)
            hv = np.repeat(np.array(hover, dtype=object)[idx], 3)
            fig.add_trace(go.Scattergl(x=xs, y=ys, mode="lines", line=dict(color=color, width=8), name=cat,
                                       hovertext=hv, hoverinfo="text"))
        else:
            fig.add_trace(go.Bar(base=start[idx], x=np.maximum(dur[idx], 1e-3), y=center[idx], width=row_h[idx] * 0.9,
                                 orientation="h", marker_color=color, name=cat,
                                 hovertext=np.array(hover, dtype=object)[idx], hoverinfo="text"))
    for s in trace.steps if steps is None else ([steps] if isinstance(steps, int) else steps):
        rows = trace.events[(trace.events["name"] == f"ProfilerStep#{s}")]
        for _, r in rows.iterrows():
            fig.add_vrect(x0=r["ts"] - t0, x1=r["ts"] - t0 + r["dur"], fillcolor="#999", opacity=0.08, line_width=0,
                          annotation_text=f"step {s}", annotation_position="top left")
    title = f"{trace.info.describe()}"
    if note:
        title += f"<br><sup>{note}</sup>"
    fig.update_layout(
        title=title, barmode="overlay", bargap=0, height=height or int(160 + 90 * max(len(lanes), 1)),
        xaxis_title="time since trace start (us)", legend_title="category", hovermode="closest",
        yaxis=dict(tickmode="array", tickvals=[lane_top[l] + 0.5 for l in lanes], ticktext=lanes,
                   autorange="reversed", zeroline=False),
        margin=dict(l=10, r=10, t=70, b=40),
    )
    fig.layout.meta = {"lanes": lanes, "drawn_events": int(len(ev)), "note": note, "webgl": bool(use_webgl)}
    return fig
