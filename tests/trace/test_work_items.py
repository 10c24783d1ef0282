"""helpers.trace.work.work_items: the units of work breakdowns count, on a CPU bias linear and the H200
compiled MLP (torch 2.11)."""

from __future__ import annotations

import pytest
from support import data_file

import helpers
from helpers.trace.work import work_items


@pytest.fixture(scope="module")
def h200():
    return {
        name: helpers.load_trace(data_file(f"h200_mlp_{name}.json.gz"), label=name) for name in ("eager", "compiled")
    }


def test_cpu_work_items_of_a_bias_linear(linear_trace):
    items = work_items(linear_trace)
    # aten::addmm is the GEMM; the bias copy (aten::copy_) inside it is part of it, not extra work
    assert set(items["name"]) == {"aten::addmm"} and len(items) == 3
    assert (items["family"] == "gemm").all() and (items["unit"] == "host op").all()


def test_work_items_columns_h200(h200):
    items = work_items(h200["compiled"])
    assert list(items.columns) == [
        "name",
        "family",
        "source",
        "unit",
        "step",
        "start_us",
        "duration_us",
        "op",
        "annotation",
        "launch_call",
        "launch_us",
        "lane",
        "launch_row",
        "graph",
    ]
    assert not items["graph"].any() and (items["launch_row"] >= 0).all()
    fused = items[items["family"] == "fused"]
    assert (fused["source"] == "triton-inductor").all() and (fused["launch_call"] == "cuLaunchKernel").all()
    # Inductor's launcher records a cpu_op named after the kernel around its cuLaunchKernel call
    assert (fused["op"] == "triton_poi_fused__unsafe_view_gelu_mul_0").all()
    assert (items.loc[items["family"] == "gemm", "op"] == "aten::mm").all()
    assert (items["launch_us"] > 0).all() and (items["unit"] == "device kernel").all()
