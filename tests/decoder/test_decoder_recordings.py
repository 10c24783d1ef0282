"""The decoder's reference-trace recipes (scripts/record_reference_traces.py), and a plain model without Triton."""

from __future__ import annotations

import subprocess
import sys

import pytest

import helpers
from helpers.decoder.workloads import GPU_VIEWS
from helpers.paths import REPO_ROOT


def test_decoder_recipes_record_on_a_cpu_and_skip_graphs(tmp_path, capsys):
    from record_reference_traces import RECIPES, main

    ours = [r for r in RECIPES if r.name.startswith("decoder_")]
    assert {r.name for r in ours} == set(GPU_VIEWS)
    assert main(["--device", "cpu", "--only", "decoder_decode", "decoder_decode_graph", "--out", str(tmp_path)]) == 0
    assert "skipped: recorded on a GPU only" in capsys.readouterr().out
    trace = helpers.load_trace(tmp_path / "cpu_decoder_decode.json.gz")
    assert len(trace.steps) == 3 and trace.info.extra["shapes"]["configuration"] == "eager"
    assert not (tmp_path / "cpu_decoder_decode_graph.json.gz").exists()


def _loads_triton(code: str) -> bool:
    """Whether `code` loads Triton through the course: its kernel modules, or Triton itself where torch alone
    would not (a CUDA build of torch may import Triton for its own reasons)."""
    probe = (
        "kernels = [m for m in sys.modules if m.startswith('helpers.kernels.') and m != 'helpers.kernels.layout']\n"
        "print(bool(kernels) or ('triton' in sys.modules and not torch.cuda.is_available()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", f"import sys, torch\n{code}\n{probe}"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=180,
    )
    return out.stdout.strip().endswith("True")


def test_the_eager_decoder_imports_no_triton():
    blocks = "import helpers.attention.model, helpers.mlp.model"
    if _loads_triton(blocks):
        pytest.skip("the attention block or the MLP still imports Triton by itself (their own modules)")
    eager = "from helpers.decoder import workloads\nb = workloads.prefill('cpu', 'tiny')\nb.fn(*b.inputs)"
    assert not _loads_triton(eager)


def test_the_decoder_imports_the_course_kernels_only_inside_functions():
    """Its own part of the rule above, whatever the blocks do: no module-level import of helpers.kernels."""
    import ast

    top = []
    for path in sorted((REPO_ROOT / "helpers" / "decoder").glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom) and "kernels" in (node.module or ""):
                top.append(f"{path.name}: from {'.' * node.level}{node.module}")
    assert not top, top
