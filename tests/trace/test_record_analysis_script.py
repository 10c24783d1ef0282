"""scripts/record_analysis_traces.py on the CPU path: records, reads back and summarises (the GPU run
is for the coordinator's H200 session)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "record_analysis_traces.py"


def test_cpu_quick_run_records_reads_and_writes_its_summary(tmp_path):
    spec = importlib.util.spec_from_file_location("record_analysis_traces", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out, summary = tmp_path / "traces", tmp_path / "summary.json"
    assert module.main(["--device", "cpu", "--quick", "--out", str(out), "--json", str(summary)]) == 0
    data = json.loads(summary.read_text())
    assert data["provenance"]["device"] and set(data["results"]) >= {"sdpa_math", "conv", "cuda_graph", "ddp"}
    results = data["results"]
    assert "needs a CUDA GPU" in results["cuda_graph"]["skipped"]
    # what the CPU host ops were read as
    assert "attention" in results["sdpa_math"]["families"]
    assert {"convolution", "normalization"} <= set(results["conv"]["families"])
    assert (out / "conv.json.gz").exists()
