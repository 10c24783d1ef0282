"""The MLP benchmark's raw measurements turned into the tables notebooks 04 and 06 show (``tables.py`` stores them).

:class:`BenchResults` wraps one run (a saved file, or one measured in this process) and derives
each table from the raw rows, judged against the course's ceilings. Lessons never use it: they read
the stored tables with ``helpers.load_results``. Results of the first schema (one shape, no graphed
or training times) are read too: what they lack shows as missing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pandas as pd
import torch

from helpers.lessons.results import reference_ceilings
from helpers.measure.ceilings import Ceilings, ceilings_from_dict
from helpers.measure.roofline import roofline_figure, roofline_frame
from helpers.mlp.model import MLPShape
from helpers.mlp.plans import POINTWISE_ROLES, kernel_role, mlp_floor_us

from .measure import derive_rates
from .run import SCHEMA

OLD_SCHEMA = "course-mlp-variants/1"
# The four times of an inference call, in the order the notebook explains them.
TIME_COLUMNS = ["kernel_us", "graphed_us", "e2e_nosync_us", "e2e_sync_us", "host_overhead_us", "enqueue_us"]
TRAINING_COLUMNS = ["variant", "status", "step_us", "step_wall_us", "peak_mb", "saved_mb", "dx_rel_err", "reason"]


def _upgrade(data: Mapping[str, Any]) -> dict[str, Any]:
    """A schema-1 result in the schema-2 layout (one shape, "blog"; nothing it did not measure)."""
    data = json.loads(json.dumps(data, default=str))
    cfg = data["config"]
    variants = data.pop("variants")
    for v in variants.values():
        if v.get("kernel_us") is not None and v.get("e2e_sync_us") is not None:
            v["host_overhead_us"] = v["e2e_sync_us"] - v["kernel_us"]
    data["shapes"] = {
        "blog": {"name": "blog", "why": "the blog post's shape", "dtype": cfg["dtype"], "shape": cfg["shape"]}
        | {"variants": variants, "training": {}}
    }
    cfg["main"] = "blog"
    data["upgraded_from"] = OLD_SCHEMA
    return data


class BenchResults:
    """A benchmark result (from :func:`benchmarks.mlp.run.run` or a saved file) with the notebook's tables."""

    @classmethod
    def from_run(cls, result: Mapping[str, Any]) -> BenchResults:
        """Wrap the dict :func:`benchmarks.mlp.run.run` returned in this process."""
        return cls(result, source="live")

    def __init__(self, data: Mapping[str, Any], source: str, path: str | None = None) -> None:
        schema = data.get("schema") if isinstance(data, Mapping) else None
        if schema not in (SCHEMA, OLD_SCHEMA):
            raise ValueError(f"not a {SCHEMA} result (schema {schema!r}); write one with python -m benchmarks mlp")
        need = ("provenance", "config", "ceilings", "sweep") + (("shapes",) if schema == SCHEMA else ("variants",))
        missing = [k for k in need if k not in data]
        if missing:
            raise ValueError(f"results lack {missing}: the file is incomplete or from another tool")
        self.data = dict(data) if schema == SCHEMA else _upgrade(data)
        self.source = source  # "live" or "file"
        self.path = path
        if source != "live":
            self._reread_kernel_names()

    def _reread_kernel_names(self) -> None:
        """Read recorded kernel names again with today's decoder (roles, and plans read from names).

        The times are the recording's; what a name means is knowledge that improves (a template
        name can read as a GeGLU fused into a GEMM while the trace shows a separate pointwise
        kernel computing it), so names are read with the decoder of the day.
        """
        ceilings = self.ceilings
        for name in self.shape_names():
            s = self.data["shapes"][name]
            dtype = getattr(torch, s["dtype"])
            for v in s["variants"].values():
                if v.get("status") != "ok" or "kernels" not in v:
                    continue
                for k in v["kernels"]:
                    k["role"] = kernel_role(k["name"])
                # rates again against today's ceilings (one set across the course); a plan given by
                # design stays, a plan read from kernel names is read again
                by_design = v.get("plan") if v.get("plan_source") == "by design" else None
                v.update(derive_rates(v, by_design, self.mlp_shape(name), dtype, ceilings))
        # the sweep's floors too: the recording stored its own session's
        sweep = self.data.get("sweep") or {}
        if sweep.get("rows"):
            config = self.data["config"]
            main, seq = config["shape"], config.get("sweep_seq") or config["shape"]["seq"]
            for row in sweep["rows"]:
                shape = MLPShape(batch=row["m"] // seq, seq=seq, dim=main["dim"], hidden=main["hidden"])
                row["floor_us"] = mlp_floor_us(shape, config["dtype"], ceilings)

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
    def main(self) -> str:
        """The name of the main shape (the one the sweep and the first tables use)."""
        return str(self.data["config"].get("main", next(iter(self.data["shapes"]))))

    def shape_names(self) -> list[str]:
        """The shape presets measured, main first."""
        return list(self.data["shapes"])

    def _shape(self, shape: str | None) -> dict[str, Any]:
        name = self.main if shape is None else shape
        if name not in self.data["shapes"]:
            raise KeyError(f"shape {name!r} is not in these results; present: {self.shape_names()}")
        return self.data["shapes"][name]

    def mlp_shape(self, shape: str | None = None) -> MLPShape:
        """The :class:`helpers.MLPShape` of a measured shape (default: the main one)."""
        s = self._shape(shape)["shape"]
        return MLPShape(batch=s["batch"], seq=s["seq"], dim=s["dim"], hidden=s["hidden"])

    @property
    def shape(self) -> MLPShape:
        return self.mlp_shape()

    @property
    def dtype(self) -> torch.dtype:
        return getattr(torch, self._shape(None)["dtype"])

    @property
    def ceilings(self) -> Ceilings:
        """The ceilings these numbers are judged against: a live run's own; a recorded H200 run's are the course's
        one reference set (``helpers.reference_ceilings()``), so every lesson divides by the same numbers; any
        other recorded run's are those it measured in its own session."""
        own = ceilings_from_dict(self.data["ceilings"])
        if self.source != "live" and own.device_type == "cuda" and "H200" in str(self.provenance.get("device", "")):
            return reference_ceilings()
        return own

    @property
    def session_ceilings(self) -> Ceilings:
        """The ceilings the benchmark measured in its own session (kept in the file beside its times)."""
        return ceilings_from_dict(self.data["ceilings"])

    def card(self) -> pd.DataFrame:
        """Provenance as a two-column table (item, value)."""
        rows = [
            ("results", self.label),
            ("file", self.path or "(live run, not saved)"),
            ("complete", str(self.complete)),
            ("schema", OLD_SCHEMA if "upgraded_from" in self.data else SCHEMA),
        ]
        rows += [(k, str(v)) for k, v in self.provenance.items() if v is not None]
        c, own = self.ceilings, self.session_ceilings
        rows += [
            ("ceilings used", c.label),
            ("memory roof", f"{c.bandwidth_tbps:.3g} TB/s"),
            ("matmul rate", f"{c.matmul_tflops:.3g} TFLOP/s"),
            ("measured in this run", f"copy {own.copy_tbps:.3g} TB/s, matmul {own.matmul_tflops:.3g} TFLOP/s"),
        ]
        for name in self.shape_names():
            s = self._shape(name)
            d = s["shape"]
            rows.append(
                (
                    f"shape {name}",
                    f"M={d['tokens']} (batch {d['batch']} x seq {d['seq']}), dim {d['dim']}, hidden {d['hidden']}, {s['dtype']}",
                )
            )
        table = self.data["config"].get("gate_up_table")
        rows.append(
            (
                "gate+up tile table",
                "none: default tiles"
                if not table
                else f"tuned on {table.get('device')}, {str(table.get('date'))[:10]}",
            )
        )
        return pd.DataFrame(rows, columns=["item", "value"])

    def __repr__(self) -> str:
        ok = sum(len(self.measured(n)) for n in self.shape_names())
        return f"<BenchResults {self.label}: {len(self.shape_names())} shapes, {ok} variant measurements, {len(self.data['sweep']['m'])} sweep sizes>"

    # ------------------------------------------------------------------ one shape
    def variant(self, name: str, shape: str | None = None) -> dict[str, Any]:
        """The inference entry of one variant; KeyError naming those present."""
        variants = self._shape(shape)["variants"]
        if name not in variants:
            raise KeyError(f"variant {name!r} is not in these results; present: {list(variants)}")
        return dict(variants[name])

    def measured(self, shape: str | None = None) -> list[str]:
        """Names of the variants measured successfully at a shape, in run order."""
        return [n for n, v in self._shape(shape)["variants"].items() if v.get("status") == "ok"]

    def table(self, shape: str | None = None) -> pd.DataFrame:
        """One row per variant: kernels, the four times, rates, floors, error (unavailable ones with their reason)."""
        cols = [
            "variant", "label", "status", "kernels_per_forward", "device_events_per_forward", *TIME_COLUMNS,
            "achieved_tflops", "mlp_floor_us", "pct_of_mlp_floor", "plan", "plan_floor_us", "pct_of_plan_floor",
            "pointwise_us", "rel_err", "first_call_s", "reason",
        ]  # fmt: skip
        rows = [{c: v.get(c) for c in cols} for v in self._shape(shape)["variants"].values()]
        out = pd.DataFrame(rows, columns=cols)
        out.attrs["results"] = self.label
        return out

    def times(self, shape: str | None = None, relative_to: str = "compile") -> pd.DataFrame:
        """The four times per call of each measured variant side by side, and each over `relative_to`'s.

        ``kernel_us`` (the GPU's work), ``graphed_us`` (replayed from a CUDA graph), ``e2e_nosync_us``
        (back-to-back calls), ``e2e_sync_us`` (one call and wait), ``host_overhead_us`` (sync minus
        kernel), ``enqueue_us`` (host time per call); ``*_vs_<relative_to>`` columns are ratios (below
        1: faster).
        """
        t = self.table(shape)
        t = t[t["status"] == "ok"].set_index("variant")[TIME_COLUMNS].astype(float)
        if relative_to in t.index:
            for c in ("kernel_us", "graphed_us", "e2e_nosync_us", "e2e_sync_us"):
                t[f"{c.removesuffix('_us')}_vs_{relative_to}"] = t[c] / t.loc[relative_to, c]
        t.attrs["results"] = self.label
        return t.reset_index()

    def training(self, shape: str | None = None) -> pd.DataFrame:
        """One row per training variant: step time (device, wall), peak memory, saved bytes, dx error."""
        rows = [{c: v.get(c) for c in TRAINING_COLUMNS} for v in self._shape(shape).get("training", {}).values()]
        out = pd.DataFrame(rows, columns=TRAINING_COLUMNS)
        out.attrs["results"] = self.label
        return out

    def kernels(self, name: str, shape: str | None = None) -> pd.DataFrame:
        """The kernels one variant launches per forward: name, kind, role, calls and us per forward."""
        v = self.variant(name, shape)
        if v.get("status") != "ok":
            raise ValueError(f"variant {name!r} was not measured: {v.get('reason')}")
        out = pd.DataFrame(
            v["kernels"], columns=["name", "kind", "role", "calls_per_forward", "us_per_forward", "us_per_call"]
        )
        out.attrs["results"] = f"{name}: {self.label}"
        return out

    def pointwise(self) -> pd.DataFrame:
        """The GeGLU pointwise work of each variant that has any (main shape): its kernels, time per
        forward and % of the memory floor (gate and up read, h written once, at the memory roof of :attr:`ceilings`)."""
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
        cols = ["variant", "pointwise_kernels", "us_per_forward", "floor_us", "pct_of_floor", "kernel_names"]
        out = pd.DataFrame(rows, columns=cols)
        out.attrs["results"] = self.label
        return out

    def time_us(self, name: str, shape: str | None = None) -> float:
        """The time a variant's rates use: kernel time on a GPU, back-to-back wall time on a CPU."""
        v = self.variant(name, shape)
        if v.get("status") != "ok":
            raise ValueError(f"variant {name!r} was not measured: {v.get('reason')}")
        return float(v[v["rate_basis"]])

    def roofline_frame(self) -> pd.DataFrame:
        """``helpers.roofline_frame`` of the measured variants (main shape: plan bytes, MLP FLOPs)."""
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

    # ------------------------------------------------------------------ all shapes
    def shapes_table(self, variants: tuple[str, ...] = ("eager", "compile", "liger", "course-fused")) -> pd.DataFrame:
        """One row per (shape, variant): M, dims, dtype, kernel / graphed / sync times and ratios to compile."""
        rows = []
        for name in self.shape_names():
            s = self._shape(name)
            d = s["shape"]
            measured = s["variants"]
            comp = measured.get("compile", {})
            for v in variants:
                e = measured.get(v)
                if not e or e.get("status") != "ok":
                    continue
                row = {
                    "shape": name,
                    "m": d["tokens"],
                    "dim": d["dim"],
                    "hidden": d["hidden"],
                    "dtype": s["dtype"],
                    "variant": v,
                }
                row.update({c: e.get(c) for c in ("kernel_us", "graphed_us", "e2e_nosync_us", "e2e_sync_us")})
                for c in ("kernel_us", "e2e_sync_us"):
                    base = comp.get(c) if comp.get("status") == "ok" else None
                    row[f"{c.removesuffix('_us')}_vs_compile"] = e.get(c) / base if base and e.get(c) else None
                rows.append(row)
        return pd.DataFrame(rows)

    # ------------------------------------------------------------------ the sweep
    def sweep(self) -> pd.DataFrame:
        """One row per (variant, M) of the sweep: kernels, kernel time, wall times, graphed time, floor."""
        rows = self.data["sweep"]["rows"]
        cols = [
            "variant",
            "m",
            "kernels_per_forward",
            "kernel_us",
            "graphed_us",
            "e2e_nosync_us",
            "e2e_sync_us",
            "floor_us",
            "status",
        ]
        out = pd.DataFrame([{c: r.get(c) for c in cols} for r in rows], columns=cols)
        out.attrs["results"] = self.label
        return out

    def _sweep_metric(self, metric: str | None) -> tuple[pd.DataFrame, str]:
        df = self.sweep()
        df = df[df["status"] == "ok"].copy()
        if df.empty:
            raise ValueError(f"no sweep in {self.label}: run python -m benchmarks mlp with a sweep")
        if metric is None:
            metric = "kernel_us" if df["kernel_us"].notna().all() else "e2e_nosync_us"
        if metric not in df.columns:
            raise ValueError(f"metric must be one of {[c for c in df.columns if c.endswith('_us')]}, got {metric!r}")
        if df[metric].isna().all():
            raise ValueError(f"the sweep in {self.label} has no {metric} (an older run, or a CPU run)")
        return df[df[metric].notna()], metric

    def sweep_winners(self, metric: str | None = None) -> pd.DataFrame:
        """Per sweep size: the fastest variant by `metric` (default kernel time; also ``e2e_nosync_us``,
        ``e2e_sync_us``, ``graphed_us``), its time, the runner-up and the margin."""
        df, metric = self._sweep_metric(metric)
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
        out = pd.DataFrame(rows)
        out.attrs["metric"] = metric
        return out

    def sweep_figure(self, relative_to: str | None = None, metric: str | None = None):
        """Time per forward against M, one line per variant, the floor dashed (log-log).

        `metric`: ``kernel_us`` (default on a GPU), ``e2e_nosync_us``, ``e2e_sync_us``, ``graphed_us``.
        `relative_to`: a variant name; then each line is that variant's time divided by this one's.
        """
        import plotly.graph_objects as go

        df, metric = self._sweep_metric(metric)
        what = {
            "kernel_us": "kernel time per forward",
            "e2e_nosync_us": "wall time per forward (back to back)",
            "e2e_sync_us": "wall time per forward (synchronised)",
            "graphed_us": "time per forward (CUDA graph replay)",
        }.get(metric, metric)
        fig = go.Figure()
        base = None
        labels = {n: v.get("label", n) for n, v in self._shape(None)["variants"].items()}
        if relative_to is not None:
            if relative_to not in set(df["variant"]):
                raise ValueError(f"{relative_to!r} is not in the sweep; variants: {sorted(set(df['variant']))}")
            base = df[df["variant"] == relative_to].set_index("m")[metric]
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
                go.Scatter(x=floor.index, y=floor.to_numpy(), mode="lines", name=f"floor ({self.ceilings.label})",
                           line={"color": "black", "dash": "dash"})
            )  # fmt: skip
            fig.update_yaxes(type="log", title=f"{what} (us)")
        else:
            fig.add_hline(y=1.0, line={"color": "gray", "dash": "dot"})
            fig.update_yaxes(title=f"{what} / {labels.get(relative_to, relative_to)}'s")
        fig.update_xaxes(type="log", title="M = batch x seq (tokens)")
        fig.update_layout(title=f"Sweep over M, {what}: {self.label}", template="plotly_white")
        return fig


def _short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."
