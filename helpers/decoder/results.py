"""The decoder benchmark's results as notebook 08's tables: the final table, the targets, the graph prediction.

:func:`load_decoder_results` reads ``benchmarks/results/h200_decoder.json`` (written by
``benchmarks/decoder.py`` on an H200) or any file of the same form, e.g. a CPU smoke run.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pandas as pd

from ..measure.ceilings import Ceilings, ceilings_of_recording
from ..paths import REPO_ROOT
from .bench import judge_decodes, targets
from .configurations import CONFIGURATIONS
from .generate import weight_read_floor_us

RESULTS_PATH = REPO_ROOT / "benchmarks" / "results" / "h200_decoder.json"
TABLE_COLUMNS = {
    "prefill_tokens_per_s": ("prefill", "tokens_per_s"),
    "decode_us": ("decode", "step_us"),
    "decode_tokens_per_s": ("decode", "tokens_per_s"),
    "pct_of_floor": ("decode", "pct_of_floor"),
    "train_step_ms": ("train", "step_ms"),
    "train_tokens_per_s": ("train", "tokens_per_s"),
    "train_peak_gb": ("train", "peak_gb"),
}


class DecoderResults:
    """One run of the decoder benchmark: ``table()``, ``targets()``, ``graph_prediction()``, ``failures()``."""

    def __init__(self, data: dict[str, Any], source: str = "file") -> None:
        if not isinstance(data, dict) or data.get("benchmark") != "decoder" or "rows" not in data:
            raise ValueError("not a decoder benchmark result (benchmarks/decoder.py writes them)")
        self.data, self.source = data, source
        if source != "live":
            # a recording is judged against the course's one set of ceilings (its own session's
            # measurement stays in data["ceilings"]): the floor, each decode's %, the targets again
            self.data = copy.deepcopy(data)
            judge_decodes(self.data, weight_read_floor_us(int(self.data["weight_bytes"]), self.ceilings))
            self.data["targets"] = targets(self.data)

    @property
    def ceilings(self) -> Ceilings:
        """The ceilings the floor is computed from: a live run's own, :data:`helpers.H200_REFERENCE` for an H200 file."""
        return ceilings_of_recording(self.data["ceilings"], self.data["provenance"], live=self.source == "live")

    @property
    def decode_floor_us(self) -> float:
        """Every weight read once at the memory roof of :attr:`ceilings`: the least time of a decode step."""
        return float(self.data["decode_floor_us"])

    @property
    def on_gpu(self) -> bool:
        return self.ceilings.device_type == "cuda"

    @property
    def label(self) -> str:
        p = self.data["provenance"]
        done = "" if self.data.get("complete") else ", incomplete run"
        return f"{p.get('device', '?')}, torch {p.get('torch', '?')}, {str(p.get('date', '?'))[:10]}{done}"

    def rows(self) -> pd.DataFrame:
        """Every measurement as it was recorded, one row each (failed and skipped ones with their reason)."""
        return pd.DataFrame(self.data["rows"])

    def table(self) -> pd.DataFrame:
        """The final table: one row per configuration (eager first), the numbers of each use it was measured in."""
        ok = [r for r in self.data["rows"] if r.get("status") == "ok"]
        rows = []
        for name, conf in CONFIGURATIONS.items():
            mine = {r["use"]: r for r in ok if r["configuration"] == name}
            if not mine:
                continue
            row: dict[str, Any] = {"configuration": name, "what": conf.what}
            for column, (use, key) in TABLE_COLUMNS.items():
                row[column] = mine.get(use, {}).get(key)
            rows.append(row)
        return pd.DataFrame(rows, columns=["configuration", "what", *TABLE_COLUMNS])

    def targets(self) -> pd.DataFrame:
        """The issue's targets: what was measured against each, and whether it is met (None: not measured)."""
        return pd.DataFrame(self.data.get("targets") or [], columns=["target", "value", "met", "detail"])

    def failures(self) -> pd.DataFrame:
        """Measurements that failed or were skipped, with the reason."""
        rows = self.rows()
        if rows.empty:
            return rows
        rows = rows.reindex(columns=["configuration", "use", "status", "reason"])
        return rows[rows["status"] != "ok"].reset_index(drop=True)

    def value(self, configuration: str, use: str, key: str) -> float | None:
        """One measured number, or None when that measurement is absent or failed."""
        for r in self.data["rows"]:
            if r["configuration"] == configuration and r["use"] == use and r.get("status") == "ok":
                return r.get(key)
        return None

    def graph_prediction(self) -> dict[str, Any] | None:
        """The prediction of the CUDA-graph decode step made from the eager trace, with the measured step."""
        pred = self.data.get("graph_prediction")
        if not pred or pred.get("status") != "ok":
            return None
        out = {k: v for k, v in pred.items() if not k.endswith("breakdown")}
        out["measured_us"] = self.value("eager+graph", "decode", "step_us")
        out["eager_measured_us"] = self.value("eager", "decode", "step_us")
        return out

    def exercise(self) -> dict[str, Any] | None:
        """The transfer exercise's measured answer (the variant's prefill before and after its fix)."""
        ex = self.data.get("exercise")
        return ex if ex and ex.get("status") == "ok" else None


def load_decoder_results(path: str | Path | None = None) -> DecoderResults:
    """The committed H200 run (default) or the decoder benchmark file at `path`."""
    p = Path(path) if path is not None else RESULTS_PATH
    if not p.is_file():
        raise FileNotFoundError(
            f"{p} does not exist: the decoder benchmark writes it (python benchmarks/decoder.py on an H200)"
        )
    return DecoderResults(json.loads(p.read_text()), source="file")
