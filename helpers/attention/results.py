"""The attention benchmark's results, read back for notebook 07 (tables, targets, a roofline).

``benchmarks/attention.py`` writes them (on the H200: ``benchmarks/results/h200_attention.json``)
with their provenance and the ceilings measured in the same run; :func:`load_attention_results`
reads a file into :class:`AttentionResults`, whose percentages are against the course's one set of
ceilings (:data:`helpers.H200_REFERENCE` for an H200 recording).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from ..measure.ceilings import Ceilings, ceilings_of_recording
from ..measure.roofline import roofline_figure, roofline_frame
from ..paths import REPO_ROOT
from .bench import SCHEMA, row_time_us, targets
from .costs import AttentionShape, fused_attention_bytes

RESULTS_PATH = REPO_ROOT / "benchmarks" / "results" / "h200_attention.json"
COLUMNS = [
    "variant",
    "head_dim",
    "seq",
    "batch",
    "heads",
    "status",
    "kernel_us",
    "time_us",
    "kernels_per_call",
    "tflops",
    "pct_of_matmul",
    "peak_mb",
    "score_mb",
    "rel_err",
    "reason",
]


class AttentionResults:
    """One run of the attention benchmark: ``table()``, ``targets()``, ``kernels(variant)``, ``roofline_figure()``."""

    def __init__(self, data: dict[str, Any], source: str = "file") -> None:
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise ValueError(f"not an attention benchmark result (schema {SCHEMA!r} expected)")
        self.data, self.source = data, source
        self.provenance: dict[str, Any] = data["provenance"]
        # one set of ceilings across the course: a recorded H200 run is judged against H200_REFERENCE
        self.ceilings: Ceilings = ceilings_of_recording(data["ceilings"], self.provenance, live=source == "live")

    @property
    def on_gpu(self) -> bool:
        return self.provenance.get("device_type") == "cuda"

    @property
    def label(self) -> str:
        p = self.provenance
        done = "" if self.data.get("complete") else ", incomplete run"
        return f"{p['device']}, torch {p['torch']}, triton {p.get('triton')}, {p['date'][:10]}{done} ({self.source})"

    def table(self) -> pd.DataFrame:
        """One row per (variant, head dim, seq): times, rates, memory, error, or why it did not run."""
        frame = pd.DataFrame(self.data["rows"])
        for c in COLUMNS:
            if c not in frame.columns:
                frame[c] = None
        # against the ceilings this reader judges by (the run stored its own session's percentage)
        frame["pct_of_matmul"] = 100.0 * pd.to_numeric(frame["tflops"]) / self.ceilings.matmul_tflops
        return frame[COLUMNS]

    def targets(self) -> pd.DataFrame:
        """The course kernel against PyTorch's flash backend and the fastest other variant (see ``bench.targets``)."""
        return pd.DataFrame(self.data.get("targets") or targets(self.data))

    def pivot(self, metric: str = "tflops", head_dim: int | None = None) -> pd.DataFrame:
        """`metric` per variant (columns) and (head dim, seq) (rows), measured rows only."""
        ok = self.table().query("status == 'ok'")
        if head_dim is not None:
            ok = ok[ok["head_dim"] == head_dim]
        return ok.pivot_table(index=["head_dim", "seq"], columns="variant", values=metric, aggfunc="first")

    def fastest(self, head_dim: int, seq: int) -> str | None:
        """The variant with the shortest time at (head_dim, seq), None when nothing ran there."""
        rows = [
            r for r in self.data["rows"] if r.get("status") == "ok" and r["head_dim"] == head_dim and r["seq"] == seq
        ]
        return min(rows, key=row_time_us)["variant"] if rows else None

    def kernels(self, variant: str) -> pd.DataFrame:
        """The kernels one call of `variant` launched at the probe shape, with time per call."""
        for r in self.data["rows"]:
            if r["variant"] == variant and r.get("kernels"):
                frame = pd.DataFrame(r["kernels"])
                frame.attrs["shape"] = f"head dim {r['head_dim']}, seq {r['seq']}"
                return frame
        return pd.DataFrame(columns=["name", "calls_per_call", "us_per_call"])

    def roofline_frame(self, head_dim: int, seq: int) -> pd.DataFrame:
        """Every measured variant at one shape against :attr:`ceilings` (least bytes: q, k, v, o once)."""
        rows = [
            r for r in self.data["rows"] if r.get("status") == "ok" and r["head_dim"] == head_dim and r["seq"] == seq
        ]
        if not rows:
            raise ValueError(f"no measured row at head dim {head_dim}, seq {seq}")
        r0 = rows[0]
        shape = AttentionShape(batch=r0["batch"], heads=r0["heads"], seq=seq, head_dim=head_dim)
        nbytes = fused_attention_bytes(shape, self.data["config"]["dtype"])
        return roofline_frame([(r["variant"], row_time_us(r), nbytes, r["flops"]) for r in rows], self.ceilings)

    def roofline_figure(self, head_dim: int, seq: int) -> go.Figure:
        """:meth:`roofline_frame` drawn on the roofline (one point per variant)."""
        fig = roofline_figure(self.roofline_frame(head_dim, seq), self.ceilings)
        fig.update_layout(title=f"causal attention, head dim {head_dim}, seq {seq}: {self.label}")
        return fig


def load_attention_results(path: str | Path | None = None) -> AttentionResults:
    """Read a results file of ``benchmarks/attention.py`` (default: the committed H200 run).

    Raises FileNotFoundError when it does not exist (the H200 run is recorded by the course's
    maintainers: ``python benchmarks/attention.py`` on an H200).
    """
    target = Path(path) if path is not None else RESULTS_PATH
    if not target.is_file():
        raise FileNotFoundError(f"no attention benchmark results at {target}: run benchmarks/attention.py on a GPU")
    return AttentionResults(
        json.loads(target.read_text()),
        source=str(target.relative_to(REPO_ROOT)) if target.is_relative_to(REPO_ROOT) else str(target),
    )
