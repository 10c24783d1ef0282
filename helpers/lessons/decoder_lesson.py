"""Used by notebook 08: the whole model's views and checks (reference traces, figures, the transfer exercise).

- :func:`reference_view`: an H200 reference trace of one of the decoder's GPU views, or None.
- :func:`breakdown_figure`: a bar per model part (and the idle time) of :func:`helpers.part_breakdown`.
- :func:`gemm_layouts`: the GEMM kernels of a training step by phase (forward / backward) and layout letters.
- :func:`check_variant`: the transfer exercise's three answers (bottleneck part, fix, predicted
  speedup) against the variant's trace and its measured fix.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from ..decoder.breakdown import IDLE_ROWS, OUTSIDE_OPS, kernel_parts, part_breakdown
from ..paths import reference_trace_path
from ..trace.kernel_names import decode_kernels
from ..trace.model import Trace, check_trace, load_trace
from .exercises import Feedback, check

# The fixes the transfer exercise offers, and what each changes.
FIXES = {
    "cuda graphs": "replay the step's launches from a CUDA graph (removes CPU-bound idle time)",
    "compile": "torch.compile: fuse the pointwise kernels around the GEMMs",
    "fused mlp": "the course's fused gate+up GeGLU kernel",
    "sdpa": "scaled_dot_product_attention instead of hand-written attention",
    "last logits": "compute the LM head on the last position only (generation reads nothing else)",
    "recompute": "recompute the MLP in the backward (less memory, a little more time)",
}
VARIANT_FIX = "last logits"
_IDLE = [*IDLE_ROWS.values(), OUTSIDE_OPS]


def decoder_fixes() -> pd.DataFrame:
    """Used by notebook 08: the fixes the transfer exercise offers (``fix``: the name to answer with, ``what``)."""
    return pd.DataFrame({"fix": list(FIXES), "what": list(FIXES.values())})


def reference_view(name: str) -> Trace | None:
    """Used by notebook 08: the H200 reference trace ``traces/h200_<name>.json.gz``, or None when not recorded yet."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a view name such as 'decoder_decode', got {name!r}")
    try:
        return load_trace(reference_trace_path(f"h200_{name}"))
    except FileNotFoundError:
        return None


def breakdown_figure(breakdown: pd.DataFrame, title: str | None = None) -> go.Figure:
    """Used by notebook 08: horizontal bars, one per part, of a :func:`helpers.part_breakdown` table (idle in grey)."""
    if not isinstance(breakdown, pd.DataFrame) or not {"part", "time_us", "share"} <= set(breakdown.columns):
        raise TypeError("pass the DataFrame of helpers.part_breakdown(trace)")
    df = breakdown.iloc[::-1]
    colors = ["#bbbbbb" if p in _IDLE else "#4c78a8" for p in df["part"]]
    fig = go.Figure(
        go.Bar(
            x=df["time_us"],
            y=df["part"],
            orientation="h",
            marker_color=colors,
            text=[f"{s:.0%}" for s in df["share"]],
            textposition="outside",
            hovertemplate="%{y}: %{x:.1f} us per step<extra></extra>",
        )
    )
    basis = breakdown.attrs.get("basis", "time")
    fig.update_layout(
        title=title or breakdown.attrs.get("trace", "time by part"),
        xaxis_title=f"{basis} per step (us)",
        template="plotly_white",
        height=80 + 28 * len(df),
        margin={"l": 10, "r": 40, "t": 50, "b": 40},
    )
    return fig


def gemm_layouts(trace: Trace) -> pd.DataFrame:
    """Used by notebook 08: GEMM kernels of a training-step trace by phase and layout (the first two letters).

    Columns: ``phase`` ("forward" for the model's parts, "backward"), ``layout`` (e.g. ``TN``; None
    when the name does not say), ``kernels`` (per step), ``time_us`` (per step), ``example`` (one name).
    """
    k = kernel_parts(check_trace(trace))
    if k.empty:
        raise ValueError(f"{trace.info.describe()} has no GPU kernels: GEMM layouts are read from kernel names")
    decoded = decode_kernels(list(k["name"].unique())).set_index("name")
    k = k.join(decoded[["family", "layout"]], on="name")
    gemms = k[(k["family"] == "gemm") & k["part"].ne("optimizer")].copy()
    gemms["phase"] = gemms["part"].map(lambda p: "backward" if p == "backward" else "forward")
    gemms["layout"] = gemms["layout"].map(lambda s: s[:2].upper() if isinstance(s, str) else None)
    steps = max(k["step"].nunique(), 1)
    out = (
        gemms.groupby(["phase", "layout"], dropna=False)
        .agg(kernels=("name", "size"), time_us=("duration_us", "sum"), example=("name", "first"))
        .reset_index()
    )
    out["kernels"] /= steps
    out["time_us"] /= steps
    return out.sort_values(["phase", "time_us"], ascending=[False, False]).reset_index(drop=True)


def bottleneck(breakdown: pd.DataFrame) -> str:
    """Used by notebook 08: the model part with the most time in a breakdown (idle rows excluded)."""
    parts = breakdown[~breakdown["part"].isin(_IDLE)]
    if parts.empty:
        raise ValueError("the breakdown has no model part")
    return str(parts.loc[parts["time_us"].idxmax(), "part"])


def check_variant(
    trace: Trace, part: str | None, fix: str | None, speedup: float | None, measured_speedup: float | None
) -> list[Feedback]:
    """Used by notebook 08: the transfer exercise, checked against the variant's trace and its measured fix.

    `part`: the bottleneck (a model part, as :func:`helpers.part_breakdown` names them); `fix`: one of
    :func:`decoder_fixes`; `speedup`: the prefill's predicted speedup with the fix (within 25% of
    `measured_speedup`, measured without a profiler; no speedup check when it is None).
    """
    if fix is not None and fix not in FIXES:
        raise ValueError(f"fix must be one of {sorted(FIXES)}, got {fix!r}")
    b = part_breakdown(check_trace(trace))
    top = bottleneck(b)
    share = float(b.set_index("part").loc[top, "share"])
    out = [
        check(
            "variant X: the bottleneck",
            part,
            top,
            explain=f"{top} takes {share:.0%} of the step in this trace.",
            hint="helpers.part_breakdown(variant_trace)",
        ),
        check(
            "variant X: the fix",
            fix,
            VARIANT_FIX,
            explain="The LM head multiplies every position by a [vocab, hidden] matrix; generation reads only "
            "the last position's logits, so a prefill needs the head on one position per prompt.",
            hint="what does generation read from the prefill's logits?",
        ),
    ]
    if measured_speedup is not None:
        out.append(
            check(
                "variant X: the fix's speedup",
                speedup,
                round(float(measured_speedup), 2),
                rel_tol=0.25,
                explain="Measured without the profiler, the prefill with every position's logits against the last one's.",
                hint="step time / (step time - the part's time), from the breakdown",
            )
        )
    return out
