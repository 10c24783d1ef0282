"""FlexAttention masks, the workloads' lazy Triton import, and the recording script's attention views."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

import helpers
from helpers.attention import flex
from helpers.attention import workloads as aw
from helpers.attention.costs import AttentionShape


@pytest.mark.slow
def test_flex_sliding_window_matches_a_masked_reference() -> None:
    # One compile (~5 s on two cores): the sliding-window mask_mod exercises the BlockMask path.
    shape = AttentionShape(batch=1, heads=2, seq=256, head_dim=16)
    q, k, v = aw.attention_inputs("cpu", shape=shape)
    out = flex.flex_fn("sliding_window", window=48)(q, k, v)
    i, j = torch.arange(256)[:, None], torch.arange(256)[None, :]
    scores = (q.double() @ k.double().transpose(-2, -1)) / 4.0
    scores = scores.masked_fill(~((j <= i) & (j > i - 48)), float("-inf"))
    assert helpers.relative_error(out, scores.softmax(-1) @ v.double()) < 1e-5
    block = flex.flex_block_mask("sliding_window", 256, 256, "cpu", window=48)
    assert block.sparsity() > 0  # some 128 x 128 tiles are skipped entirely


def test_flex_rejects_unknown_masks() -> None:
    with pytest.raises(ValueError, match="mask must be one of"):
        flex.flex_fn("banded")
    with pytest.raises(TypeError, match="window"):
        flex.flex_fn("sliding_window")


def test_the_plain_block_imports_no_triton_until_the_course_kernel_is_asked_for() -> None:
    code = (
        "import sys, helpers\n"
        "from helpers.attention import workloads as aw\n"
        "b = aw.attention_block('cpu'); b.fn(*b.inputs); aw.manual('cpu'); aw.sdpa('cpu')\n"
        "print('triton' in sys.modules)\n"
        "aw.course_kernel('cpu'); print('triton' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]


def test_recording_script_records_attention_views_and_skips_missing_backends(tmp_path, capsys) -> None:
    from record_reference_traces import main as record_main

    assert (
        record_main(["--device", "cpu", "--out", str(tmp_path), "--only", "attention_manual", "attention_sdpa_cudnn"])
        == 0
    )
    assert "failed: " in capsys.readouterr().out  # no cuDNN on a CPU: reported, the run goes on
    trace = helpers.load_trace(tmp_path / "cpu_attention_manual.json.gz")
    assert helpers.op_input(trace, "aten::_softmax").shape[-1] == aw.CPU_SHAPE.seq
    provenance = json.loads((tmp_path / "cpu_provenance.json").read_text())
    assert set(provenance) == {"cpu_attention_manual.json.gz"}
