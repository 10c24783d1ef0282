"""The open exercises' checkers: the expected answer comes from a profile of the learner's own choice."""

from __future__ import annotations

import pytest
import torch
from support import data_file

import helpers
from helpers.trace.aten_ops import aten_family


@pytest.mark.parametrize(
    "name, op",
    [
        ("h200_linear_bias.json.gz", "aten::addmm"),
        ("h200_mlp_eager.json.gz", "aten::mm"),
        ("h200_matmul_add.json.gz", "aten::mm"),
    ],
)
def test_busiest_op_on_gpu_traces_is_the_op_launching_the_most_device_time(name, op):
    assert helpers.busiest_op(helpers.load_trace(data_file(name))) == op


def test_busiest_op_on_a_cpu_trace_ignores_wrappers_views_and_copies():
    layer = torch.nn.Linear(16, 32)
    trace = helpers.profile(layer, torch.randn(64, 16), steps=3)
    # make the bias copy of the CPU's addmm the slowest operator by far: still not "the arithmetic"
    ev = trace.events
    for i in ev.index[(ev["name"] == "aten::copy_") & (ev["cat"] == "cpu_op")]:
        while i >= 0:  # the copy and every caller get 10 ms longer: only the copy's own time grows
            ev.loc[i, "dur"] += 10_000.0
            i = int(ev.loc[i, "parent"])
    assert helpers.busiest_op(trace) == "aten::addmm"
    assert helpers.busiest_op(trace, under="aten::linear") == "aten::addmm"
    conv = helpers.profile(torch.nn.Conv1d(2, 4, 3), torch.randn(3, 2, 50), steps=2)
    assert aten_family(helpers.busiest_op(conv)) == "convolution"


def test_busiest_op_errors(linear_trace):
    with pytest.raises(ValueError, match="no operator named"):
        helpers.busiest_op(linear_trace, under="aten::nothing")
    with pytest.raises(TypeError):
        helpers.busiest_op("trace")
