"""Read a benchmark result of :mod:`helpers.mlp.bench` back: the tables and figures of notebook 06.

:func:`load_results` reads a saved result (by default the H200 run committed in
``benchmarks/results/``); :func:`from_run` wraps one measured in this process. Both give a
:class:`BenchResults`, labelled with where and when it was recorded.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from ..measure.ceilings import Ceilings, ceilings_from_dict
from ..measure.roofline import roofline_figure, roofline_frame
from ..paths import REPO_ROOT
from .bench import RESULTS_ENV, RESULTS_PATH, SCHEMA
from .model import MLPShape
from .plans import POINTWISE_ROLES


class BenchResults:
    """A benchmark result (from :func:`run` or a saved file) with the notebook's tables and figures."""

    @classmethod
    def from_run(cls, result: Mapping[str, Any]) -> BenchResults:
        """Wrap the dict :func:`helpers.mlp.bench.run` returned in this process."""
        return cls(result, source="live")

    def __init__(self, data: Mapping[str, Any], source: str, path: str | None = None) -> None:
        if not isinstance(data, Mapping) or data.get("schema") != SCHEMA:
            raise ValueError(
                f"not a {SCHEMA} result (schema {data.get('schema') if isinstance(data, Mapping) else None!r}); "
                "write one with benchmarks/mlp_variants.py"
            )
        missing = [k for k in ("provenance", "config", "ceilings", "variants", "sweep") if k not in data]
        if missing:
            raise ValueError(f"results lack {missing}: the file is incomplete or from another tool")
        self.data = dict(data)
        self.source = source  # "live" or "file"
        self.path = path

    # ------------------------------------------------------------------ what it is
    @property
    def provenance(self) -> dict[str, Any]:
        return dict(self.data["provenance"])

    @property
    def label(self) -> str:
        """e.g. "NVIDIA H200, torch 2.11.0+cu130, triton 3.6.0, 2026-11-29 (recorded results)"."""
        p = self.provenance
        kind = "measured live" if self.source == "live" else "recorded results"
        return f"{p['device']}, torch {p['torch']}, triton {p['triton']}, {str(p['date'])[:10]} ({kind})"

    @property
    def on_gpu(self) -> bool:
        """True when the numbers were measured on a CUDA GPU (kernel times exist)."""
        return self.data["config"]["device"] == "cuda"

    @property
    def complete(self) -> bool:
        return bool(self.data.get("complete"))

    @property
    def shape(self) -> MLPShape:
        s = self.data["config"]["shape"]
        return MLPShape(batch=s["batch"], seq=s["seq"], dim=s["dim"], hidden=s["hidden"])

    @property
    def dtype(self) -> torch.dtype:
        return getattr(torch, self.data["config"]["dtype"])

    @property
    def ceilings(self) -> Ceilings:
        """The ceilings measured in that run; marked as a recorded reference when read from a file."""
        c = dict(self.data["ceilings"])
        if self.source != "live":
            c["source"] = "reference"
            c["method"] = f"measured in the benchmark run on {self.provenance['device']}: {c.get('method', '')}"
            c["recorded"] = str(self.provenance["date"])[:10]
        return ceilings_from_dict(c)

    def card(self) -> pd.DataFrame:
        """Provenance as a two-column table (item, value)."""
        p = self.provenance
        rows = [
            ("results", self.label),
            ("file", self.path or "(live run, not saved)"),
            ("complete", str(self.complete)),
        ]
        rows += [(k, str(v)) for k, v in p.items() if v is not None]
        c = self.ceilings
        rows += [
            ("copy bandwidth", f"{c.copy_tbps:.3g} TB/s"),
            ("matmul rate", f"{c.matmul_tflops:.3g} TFLOP/s"),
            (
                "shape",
                f"batch {self.shape.batch} x seq {self.shape.seq} (M={self.shape.tokens}), "
                f"dim {self.shape.dim}, hidden {self.shape.hidden}, {self.data['config']['dtype']}",
            ),
        ]
        return pd.DataFrame(rows, columns=["item", "value"])

    def __repr__(self) -> str:
        ok = sum(1 for v in self.data["variants"].values() if v.get("status") == "ok")
        return f"<BenchResults {self.label}: {ok} variants measured, {len(self.data['sweep']['m'])} sweep sizes>"

    # ------------------------------------------------------------------ tables
    def variant(self, name: str) -> dict[str, Any]:
        """The entry of one variant; KeyError naming those present."""
        if name not in self.data["variants"]:
            raise KeyError(f"variant {name!r} is not in these results; present: {list(self.data['variants'])}")
        return dict(self.data["variants"][name])

    def measured(self) -> list[str]:
        """Names of the variants measured successfully, in run order."""
        return [n for n, v in self.data["variants"].items() if v.get("status") == "ok"]

    def table(self) -> pd.DataFrame:
        """One row per variant: kernels, times, rates, floors, error (unavailable ones with their reason)."""
        cols = [
            "variant",
            "label",
            "status",
            "kernels_per_forward",
            "device_events_per_forward",
            "kernel_us",
            "e2e_nosync_us",
            "e2e_sync_us",
            "achieved_tflops",
            "mlp_floor_us",
            "pct_of_mlp_floor",
            "plan",
            "plan_floor_us",
            "pct_of_plan_floor",
            "pointwise_us",
            "rel_err",
            "first_call_s",
            "reason",
        ]
        rows = [{c: v.get(c) for c in cols} for v in self.data["variants"].values()]
        out = pd.DataFrame(rows, columns=cols)
        out.attrs["results"] = self.label
        return out

    def kernels(self, name: str) -> pd.DataFrame:
        """The kernels one variant launches per forward: name, kind, role, calls and us per forward."""
        v = self.variant(name)
        if v.get("status") != "ok":
            raise ValueError(f"variant {name!r} was not measured: {v.get('reason')}")
        out = pd.DataFrame(
            v["kernels"], columns=["name", "kind", "role", "calls_per_forward", "us_per_forward", "us_per_call"]
        )
        out.attrs["results"] = f"{name}: {self.label}"
        return out

    def pointwise(self) -> pd.DataFrame:
        """The GeGLU pointwise work of each variant that has any: its kernels, time per forward and
        % of the memory floor (gate and up read, h written once, at the copy bandwidth of the run)."""
        rows = []
        for n in self.measured():
            v = self.variant(n)
            if v.get("pointwise_us") is None:
                continue
            names = [k["name"] for k in v["kernels"] if k["role"] in POINTWISE_ROLES]
            rows.append(
                {
                    "variant": n,
                    "pointwise_kernels": len(names),
                    "us_per_forward": v["pointwise_us"],
                    "floor_us": v["pointwise_floor_us"],
                    "pct_of_floor": 100 * v["pointwise_floor_us"] / v["pointwise_us"],
                    "kernel_names": "; ".join(_short(k) for k in names),
                }
            )
        out = pd.DataFrame(
            rows, columns=["variant", "pointwise_kernels", "us_per_forward", "floor_us", "pct_of_floor", "kernel_names"]
        )
        out.attrs["results"] = self.label
        return out

    def time_us(self, name: str) -> float:
        """The time a variant's rates use: kernel time on a GPU, back-to-back wall time on a CPU."""
        v = self.variant(name)
        if v.get("status") != "ok":
            raise ValueError(f"variant {name!r} was not measured: {v.get('reason')}")
        return float(v[v["rate_basis"]])

    def roofline_frame(self) -> pd.DataFrame:
        """``helpers.roofline_frame`` of the measured variants (whole forward: plan bytes, MLP FLOPs)."""
        rows = [
            {
                "name": self.variant(n)["label"],
                "duration_us": self.time_us(n),
                "bytes": self.variant(n).get("bytes"),
                "flops": self.variant(n)["flops"],
            }
            for n in self.measured()
        ]
        return roofline_frame(rows, self.ceilings)

    def roofline_figure(self):
        """Roofline with every measured variant placed on it, titled with where the numbers come from."""
        fig = roofline_figure(self.roofline_frame(), self.ceilings)
        basis = (
            "kernel time" if all(self.variant(n)["rate_basis"] == "kernel_us" for n in self.measured()) else "wall time"
        )
        fig.update_layout(title=f"MLP forward, {basis} per call: {self.label}")
        return fig

    def sweep(self) -> pd.DataFrame:
        """One row per (variant, M) of the sweep: kernels, kernel time, back-to-back wall time, floor."""
        rows = self.data["sweep"]["rows"]
        cols = ["variant", "m", "kernels_per_forward", "kernel_us", "e2e_nosync_us", "floor_us", "status"]
        out = pd.DataFrame([{c: r.get(c) for c in cols} for r in rows], columns=cols)
        out.attrs["results"] = self.label
        return out

    def sweep_winners(self) -> pd.DataFrame:
        """Per sweep size: the fastest variant by kernel time, its time, and the runner-up."""
        df = self.sweep()
        df = df[df["status"] == "ok"].copy()
        if df.empty:
            raise ValueError(f"no sweep in {self.label}: run benchmarks/mlp_variants.py with a sweep")
        metric = "kernel_us" if df["kernel_us"].notna().all() else "e2e_nosync_us"
        rows = []
        for m, g in df.groupby("m"):
            g = g.sort_values(metric)
            first, second = g.iloc[0], (g.iloc[1] if len(g) > 1 else None)
            rows.append(
                {
                    "m": int(m),
                    "fastest": first["variant"],
                    f"fastest_{metric}": first[metric],
                    "runner_up": None if second is None else second["variant"],
                    "margin_pct": None if second is None else 100 * (second[metric] / first[metric] - 1),
                    "pct_of_floor": 100 * first["floor_us"] / first[metric],
                }
            )
        return pd.DataFrame(rows)

    def sweep_figure(self, relative_to: str | None = None):
        """Kernel time per forward against M, one line per variant, the floor dashed (log-log).

        `relative_to`: a variant name; then each line is that variant's time divided by this one's
        (below 1: faster than it).
        """
        import plotly.graph_objects as go

        df = self.sweep()
        df = df[df["status"] == "ok"]
        if df.empty:
            raise ValueError(f"no sweep in {self.label}")
        metric = "kernel_us" if df["kernel_us"].notna().all() else "e2e_nosync_us"
        what = "kernel time per forward" if metric == "kernel_us" else "wall time per forward (back to back)"
        fig = go.Figure()
        base = None
        if relative_to is not None:
            if relative_to not in set(df["variant"]):
                raise ValueError(f"{relative_to!r} is not in the sweep; variants: {sorted(set(df['variant']))}")
            base = df[df["variant"] == relative_to].set_index("m")[metric]
        labels = {n: v.get("label", n) for n, v in self.data["variants"].items()}
        for name, g in df.groupby("variant", sort=False):
            g = g.sort_values("m")
            y = g[metric].to_numpy() if base is None else (g[metric].to_numpy() / base.reindex(g["m"]).to_numpy())
            fig.add_trace(
                go.Scatter(
                    x=g["m"],
                    y=y,
                    mode="lines+markers",
                    name=labels.get(name, name),
                    hovertemplate=f"{labels.get(name, name)}<br>M=%{{x}}<br>%{{y:.3g}}<extra></extra>",
                )
            )
        if base is None:
            floor = df.groupby("m")["floor_us"].first().sort_index()
            fig.add_trace(
                go.Scatter(
                    x=floor.index,
                    y=floor.to_numpy(),
                    mode="lines",
                    name="floor (ceilings of this run)",
                    line={"color": "black", "dash": "dash"},
                )
            )
            fig.update_yaxes(type="log", title=f"{what} (us)")
        else:
            fig.add_hline(y=1.0, line={"color": "gray", "dash": "dot"})
            fig.update_yaxes(title=f"{what} / {labels.get(relative_to, relative_to)}'s")
        fig.update_xaxes(type="log", title="M = batch x seq (tokens)")
        fig.update_layout(title=f"Sweep over M: {self.label}", template="plotly_white")
        return fig


def _short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."


def load_results(path: str | os.PathLike | None = None) -> BenchResults:
    """Read a saved result (default: ``benchmarks/results/h200_mlp_variants.json``, the committed H200 run).

    The environment variable ``COURSE_MLP_RESULTS`` points the default elsewhere (for developing
    the notebook); the result's own provenance is always what the tables show. A missing file
    raises FileNotFoundError that says how to record it.
    """
    if path is None:
        path = os.environ.get(RESULTS_ENV) or RESULTS_PATH
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(
            f"no benchmark results at {p}. They are recorded on a GPU (about 4 minutes on an H200) with\n"
            f"    python benchmarks/mlp_variants.py --out {RESULTS_PATH.relative_to(REPO_ROOT)}\n"
            "and committed; notebook 06 reads them on machines without a GPU."
        )
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{p} is not valid JSON ({err}); was the benchmark interrupted while writing?") from None
    return BenchResults(data, source="file", path=str(p))
