"""How a loaded trace names itself in titles and captions: a file torch exported carries no device, torch
version or date, and its caption says so once instead of three "not recorded" (a learner took that title
for a broken one)."""

from __future__ import annotations

import json

import pytest
import torch

import helpers


def test_a_plain_torch_export_says_in_one_clause_what_it_does_not_record(tmp_path):
    path = tmp_path / "plain_export.json"
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        torch.ones(4, 4) @ torch.ones(4, 4)
    prof.export_chrome_trace(str(path))
    # on a CUDA machine torch writes the GPUs' deviceProperties even into a CPU-only profile: drop them
    doc = json.loads(path.read_text())
    doc.pop("deviceProperties", None)
    path.write_text(json.dumps(doc))
    text = helpers.load_trace(path).info.describe()
    assert text == "plain_export (trace file: no device, torch version or date recorded in it)"


def test_a_trace_saved_by_the_course_names_what_it_recorded(tmp_path):
    trace = helpers.profile(lambda: torch.ones(4, 4) @ torch.ones(4, 4), label="tiny")
    text = helpers.load_trace(trace.save(tmp_path / "tiny.json.gz")).info.describe()
    assert text.startswith("tiny (trace file: ") and f"torch {torch.__version__}" in text
    assert "not recorded" not in text and "no device" not in text


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: torch writes its deviceProperties there")
def test_a_plain_export_on_a_gpu_machine_names_the_device_and_not_the_rest(tmp_path):
    path = tmp_path / "plain_export.json"
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        torch.ones(4, 4) @ torch.ones(4, 4)
    prof.export_chrome_trace(str(path))
    text = helpers.load_trace(path).info.describe()
    assert torch.cuda.get_device_name() in text and "torch not recorded, date not recorded" in text
