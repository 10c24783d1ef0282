"""The course's own mixture-of-experts, FP8 and graph-capture traces (traces/h100_*.json.gz, recorded on an
H100 by scripts/record_analysis_traces.py; traces/h100_provenance.json says how): every kernel gets a family,
each grouped and FP8 GEMM's achieved rate matches a count made here by hand from its shapes and kernel times,
and the kernels a profiled graph capture replays are tied to the operators that captured them."""

from __future__ import annotations

import ast

import pytest
from support import data_file

import helpers

MOE_FP8 = ("h100_moe_grouped", "h100_moe_loop", "h100_moe_grouped_compiled", "h100_fp8_scaled_mm")


def _trace(name: str) -> helpers.trace.Trace:
    return helpers.load_trace(data_file(f"{name}.json.gz"))


@pytest.mark.parametrize("name", MOE_FP8 + ("h100_graph_capture_profiled",))
def test_every_kernel_has_a_family(name):
    k = _trace(name).kernels()
    families = helpers.decode_kernels(k["name"].unique()).set_index("name")["family"]
    unknown = k[k["name"].map(families) == "unknown"]
    assert unknown.empty, sorted(unknown["name"].unique())[:5]


def _hand_flops(op: str, shapes: list[list[int]]) -> float:
    """2 x M x N x K from the recorded input shapes, written out for the products these traces hold."""
    a, b = shapes[0], shapes[1]
    if op == "aten::_scaled_mm" or (op == "aten::_grouped_mm" and len(a) == 2 and len(b) == 2):
        # [M, K] @ [K, N]; a grouped product of two 2-D operands splits K by expert (a weight gradient)
        return 2.0 * a[0] * a[1] * b[1]
    if op == "aten::_grouped_mm" and len(a) == 2 and len(b) == 3:
        # tokens [T, K] against per-expert weights [E, K, N]: each token meets its own expert's weight once
        return 2.0 * a[0] * a[1] * b[2]
    raise AssertionError(f"no hand count for {op} {shapes}")


@pytest.mark.parametrize("name", ["h100_moe_grouped", "h100_fp8_scaled_mm"])
def test_grouped_and_fp8_rates_match_a_hand_count(name):
    trace = _trace(name)
    k = trace.kernels()
    table = helpers.trace.achieved_flops(trace)
    rows = table[table["op"].isin(["aten::_grouped_mm", "aten::_scaled_mm"])]
    assert len(rows) >= 2
    for _, row in rows.iterrows():
        mine = k[(k["launched_by"] == row["op"]) & (k["input_shapes"] == row["input_shapes"])]
        shapes = [s for s in ast.literal_eval(row["input_shapes"]) if s]
        hand = _hand_flops(row["op"], shapes) * row["calls"] / (mine["duration_us"].sum() * 1e6)
        assert row["tflops"] == pytest.approx(hand, rel=0.05), row[["op", "input_shapes"]].to_dict()
    if name == "h100_fp8_scaled_mm":
        assert set(rows["dtype"]) == {"fp8_e4m3"}


def test_replayed_kernels_are_tied_to_the_operators_that_captured_them():
    trace = _trace("h100_graph_capture_profiled")
    k = trace.kernels()
    replayed = k[k["graph"]]
    tied = replayed["launched_by"].notna() & (replayed["launched_by"] != replayed["launch_call"])
    assert len(replayed) >= 20 and tied.mean() >= 0.95
    # a captured GEMM runs once per replay: three replays of the MLP's three products
    mm = helpers.trace.achieved_flops(trace).query("op == 'aten::mm'")
    assert mm["calls"].sum() == 9
