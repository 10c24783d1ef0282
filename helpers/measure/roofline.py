"""Bytes, FLOPs, floors and achieved rates: how close a kernel gets to what the device can do (TB/s, TFLOP/s)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from ..checks import non_negative_int, positive_int, positive_number
from ..trace.dtypes import lookup
from .ceilings import Ceilings


def dtype_size(dtype: torch.dtype | str) -> int:
    """Bytes per element of a torch dtype or a name such as "bf16", "float32"."""
    if isinstance(dtype, torch.dtype):
        return dtype.itemsize
    if isinstance(dtype, str):
        return lookup(dtype).itemsize
    raise TypeError(f"dtype must be a torch.dtype or str, got {type(dtype).__name__}: {dtype!r}")


def gemm_flops(m: int, n: int, k: int) -> int:
    """FLOPs of an [m, k] x [k, n] matrix product: one multiply and one add per term, 2*m*n*k."""
    return 2 * positive_int("m", m) * positive_int("n", n) * positive_int("k", k)


def gemm_bytes(m: int, n: int, k: int, dtype: torch.dtype | str) -> int:
    """Minimum bytes of a GEMM: A and B read once, C written once (what an ideal kernel moves from DRAM)."""
    m, n, k = positive_int("m", m), positive_int("n", n), positive_int("k", k)
    return (m * k + k * n + m * n) * dtype_size(dtype)


def elementwise_bytes(numel: int, dtype: torch.dtype | str, reads: int, writes: int) -> int:
    """Bytes an elementwise kernel moves: `reads` input tensors and `writes` outputs of `numel`."""
    numel = positive_int("numel", numel)
    reads, writes = non_negative_int("reads", reads), non_negative_int("writes", writes)
    if reads + writes == 0:
        raise ValueError("an elementwise kernel reads or writes at least one tensor (reads + writes > 0)")
    return numel * dtype_size(dtype) * (reads + writes)


ACHIEVED_KEYS: tuple[str, ...] = (
    "duration_us", "bytes_moved", "flops", "arithmetic_intensity", "achieved_tbps", "achieved_tflops",
    "pct_of_bandwidth", "pct_of_peak_flops", "memory_floor_us", "compute_floor_us", "floor_us", "pct_of_floor",
    "bound_by"
)  # fmt: skip


def achieved(
    duration_us: float,
    bytes_moved: float | None = None,
    flops: float | None = None,
    *,
    ceilings: Ceilings,
) -> dict[str, Any]:
    """A measured duration against the ceilings (the keys of `ACHIEVED_KEYS`) from the bytes and/or FLOPs;
    `ceilings` is keyword-only and required: another machine's ceilings give nonsense."""
    if not isinstance(ceilings, Ceilings):
        raise TypeError(
            f"ceilings must be a Ceilings (from measure_ceilings() or reference_ceilings()), got {type(ceilings).__name__}"
        )
    duration_us = positive_number("duration_us", duration_us)
    if bytes_moved is None and flops is None:
        raise ValueError("give bytes_moved, flops, or both")
    nbytes = positive_number("bytes_moved", bytes_moved) if bytes_moved is not None else None
    nflops = positive_number("flops", flops) if flops is not None else None
    seconds = duration_us * 1e-6
    out: dict[str, Any] = dict.fromkeys(ACHIEVED_KEYS)
    out.update(duration_us=duration_us, bytes_moved=bytes_moved, flops=flops)
    if nbytes is not None:
        out["achieved_tbps"] = nbytes / seconds / 1e12
        out["pct_of_bandwidth"] = 100.0 * nbytes / seconds / ceilings.bandwidth_bytes_per_s
        out["memory_floor_us"] = nbytes / ceilings.bandwidth_bytes_per_s * 1e6
    if nflops is not None:
        out["achieved_tflops"] = nflops / seconds / 1e12
        out["pct_of_peak_flops"] = 100.0 * nflops / seconds / ceilings.matmul_flop_per_s
        out["compute_floor_us"] = nflops / ceilings.matmul_flop_per_s * 1e6
    if nbytes is not None and nflops is not None:
        out["arithmetic_intensity"] = nflops / nbytes
    mem, comp = out["memory_floor_us"], out["compute_floor_us"]
    if comp is None or (mem is not None and mem >= comp):
        out["floor_us"], out["bound_by"] = mem, "memory"
    else:
        out["floor_us"], out["bound_by"] = comp, "compute"
    out["pct_of_floor"] = 100.0 * out["floor_us"] / duration_us
    return out


def _row_values(row: Any, i: int) -> tuple[str, Any, Any, Any]:
    if isinstance(row, Mapping):
        try:
            name, duration = row["name"], row["duration_us"]
        except KeyError as err:
            raise ValueError(f"row {i}: a dict row needs 'name' and 'duration_us', missing {err}") from None
        nbytes = row.get("bytes_moved", row.get("bytes"))
        return name, duration, nbytes, row.get("flops")
    if isinstance(row, (tuple, list)) and len(row) == 4:
        return tuple(row)  # type: ignore[return-value]
    raise ValueError(f"row {i}: expected (name, duration_us, bytes, flops) or a dict, got {row!r}")


def roofline_frame(rows: Iterable[Any], ceilings: Ceilings) -> pd.DataFrame:
    """One row per variant from (name, duration_us, bytes, flops) tuples or dicts: the keys of `achieved()`."""
    records = []
    for i, row in enumerate(rows):
        name, duration, nbytes, nflops = _row_values(row, i)
        if not isinstance(name, str) or not name:
            raise ValueError(f"row {i}: name must be a non-empty str, got {name!r}")
        try:
            records.append({"name": name, **achieved(duration, nbytes, nflops, ceilings=ceilings)})
        except (TypeError, ValueError) as err:
            raise type(err)(f"row {i} ({name}): {err}") from None
    frame = pd.DataFrame(records, columns=["name", *ACHIEVED_KEYS])
    frame.attrs["ceilings"] = ceilings.label
    return frame


def roofline_figure(df: pd.DataFrame, ceilings: Ceilings) -> go.Figure:
    """Roofline plot of a `roofline_frame` (log FLOP/byte against log TFLOP/s); rows without both bytes and
    FLOPs are listed under it."""
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"df must be a DataFrame from roofline_frame, got {type(df).__name__}")
    if not isinstance(ceilings, Ceilings):
        raise TypeError(f"ceilings must be a Ceilings, got {type(ceilings).__name__}")
    needed = {
        "name", "arithmetic_intensity", "achieved_tflops", "duration_us", "achieved_tbps", "pct_of_floor", "bound_by"
    }  # fmt: skip
    missing = sorted(needed - set(df.columns))
    if missing:
        raise ValueError(f"df lacks columns {missing}: build it with roofline_frame")
    plotted = df[df["arithmetic_intensity"].notna() & df["achieved_tflops"].notna()]
    skipped = [str(n) for n in df.loc[~df.index.isin(plotted.index), "name"]]

    ridge = ceilings.ridge_flop_per_byte
    xs = [ridge] + [float(v) for v in plotted["arithmetic_intensity"]]
    x_lo, x_hi = min(xs) / 10, max(xs) * 10
    peak = ceilings.matmul_tflops
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[x_lo, ridge],
            y=[ceilings.bandwidth_tbps * x_lo, peak],
            mode="lines",
            name=f"memory roof ({ceilings.bandwidth_tbps:.3g} TB/s)",
            line={"color": "gray", "dash": "dash"},
            hovertemplate="memory roof: %{y:.3g} TFLOP/s at %{x:.3g} FLOP/byte<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[ridge, x_hi],
            y=[peak, peak],
            mode="lines",
            name=f"compute roof ({peak:.3g} TFLOP/s)",
            line={"color": "black"},
            hovertemplate="compute roof: %{y:.3g} TFLOP/s<extra></extra>",
        )
    )
    for _, row in plotted.iterrows():
        hover = (
            f"<b>{row['name']}</b><br>{row['duration_us']:.1f} us, "
            f"{row['achieved_tflops']:.3g} TFLOP/s, {row['achieved_tbps']:.3g} TB/s<br>"
            f"{row['arithmetic_intensity']:.3g} FLOP/byte, {row['bound_by']} bound, "
            f"{row['pct_of_floor']:.0f}% of floor<extra></extra>"
        )
        fig.add_trace(
            go.Scatter(
                x=[row["arithmetic_intensity"]],
                y=[row["achieved_tflops"]],
                mode="markers",
                name=str(row["name"]),
                marker={"size": 11},
                hovertemplate=hover,
            )
        )
    fig.update_xaxes(type="log", title="arithmetic intensity (FLOP/byte)")
    fig.update_yaxes(type="log", title="achieved TFLOP/s")
    fig.update_layout(title=f"Roofline: {ceilings.label}", template="plotly_white", legend={"title": "variant"})
    if skipped:
        fig.add_annotation(
            text="not drawn (need bytes and FLOPs): " + ", ".join(skipped),
            xref="paper",
            yref="paper",
            x=0,
            y=-0.18,
            showarrow=False,
            align="left",
        )
    return fig


def tile_waves(problems: Mapping[str, tuple[int, int]], tiles: Iterable[str], sms: int) -> pd.DataFrame:
    """How tile sizes split each GEMM output into tiles and the tiles into waves over `sms` multiprocessors, and
    how busy the last wave keeps them."""
    if isinstance(sms, bool) or not isinstance(sms, (int, np.integer)) or sms < 1:
        raise ValueError(f"sms must be a positive integer, got {sms!r}")
    if not isinstance(problems, Mapping) or not problems:
        raise TypeError("problems must be a non-empty dict {name: (rows, cols)}")
    tiles = list(tiles)
    if not tiles:
        raise ValueError("tiles must name at least one tile such as '256x128'")
    rows = []
    for name, dims in problems.items():
        if len(dims) != 2 or any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1 for d in dims):
            raise ValueError(f"{name}: output must be (rows, cols) positive integers, got {dims!r}")
        r, c = (int(d) for d in dims)
        for tile in tiles:
            parts = str(tile).split("x")
            if len(parts) < 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
                raise ValueError(f"tile {tile!r} is not of the form '256x128' or '256x128x64'")
            tr, tc = int(parts[0]), int(parts[1])
            count = -(-r // tr) * -(-c // tc)
            rows.append(
                {
                    "gemm": name,
                    "output": f"{r}x{c}",
                    "tile": f"{tr}x{tc}",
                    "tiles": count,
                    "waves": count / sms,
                    "last_wave_busy": (count % sms or sms) / sms,
                }
            )
    return pd.DataFrame(rows)
