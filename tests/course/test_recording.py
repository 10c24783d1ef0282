"""The reference-trace recipes run (their CPU path here; the GPU records them) and the shipped traces stay small."""

from __future__ import annotations

import json

import pytest
from record_reference_traces import RECIPES, main

import helpers
from helpers.paths import TRACES_DIR

MAX_BYTES = 3 * 2**20  # a reference trace stays under 3 MB gzipped


def test_recipes_cover_the_traces_notebooks_00_to_04_read():
    names = {r.name for r in RECIPES}
    assert {"linear_bias", "matmul_add", "linear_bias_compiled", "mlp_eager", "mlp_compiled"} <= names
    assert {"mlp_compiled_max_autotune", "views_copy", "transpose_copies"} <= names
    assert all(r.steps >= 3 and r.warmup >= 1 for r in RECIPES)


def test_a_recipe_records_on_the_cpu_with_provenance(tmp_path, capsys):
    assert main(["--device", "cpu", "--only", "linear_bias", "--out", str(tmp_path)]) == 0
    trace_file = tmp_path / "cpu_linear_bias.json.gz"
    assert trace_file.stat().st_size < MAX_BYTES
    trace = helpers.load_trace(trace_file)
    assert len(trace.steps) == next(r.steps for r in RECIPES if r.name == "linear_bias")
    index = json.loads((tmp_path / "cpu_provenance.json").read_text())
    row = index["cpu_linear_bias.json.gz"]
    assert row["torch"] and row["recorded_on"] and row["shapes"]["bias"] is True and "notebooks 00, 02" in row["what"]


@pytest.mark.parametrize("path", sorted(TRACES_DIR.glob("*.json.gz")), ids=lambda p: p.name)
def test_shipped_traces_are_small(path):
    assert path.stat().st_size < MAX_BYTES
