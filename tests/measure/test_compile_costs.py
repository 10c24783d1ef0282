"""Counting compiles, timing calls and reading compile wrappers (helpers/measure/compile_costs.py, compile_counts.py).

The sweeps use the "eager" backend behind the counter (Dynamo still traces, guards and decides
when to recompile; only the code generation is skipped), plus one sweep with Inductor to show
the counts are the same.
"""

from __future__ import annotations

import pytest
import torch
from support import data_file

import helpers
from helpers.measure import compile_costs as cc
from helpers.measure import compile_counts as counts

SMALL = helpers.MLPShape(batch=2, seq=8, dim=32, hidden=64)


@pytest.fixture(scope="module")
def mlp():
    return helpers.workloads.geglu_mlp("cpu", shape=SMALL)


def inputs(mlp, sizes):
    return counts.batch_inputs(mlp.inputs[0], sizes)


def test_default_dynamic_recompiles_once_into_a_dynamic_graph_then_reuses(mlp):
    result = counts.shape_sweep(mlp.fn, inputs(mlp, [2, 3, 5, 3, 2]), backend="eager", progress=False)
    t = result.table
    assert result.compiles == 2 == result.dynamo_graphs
    assert list(t["new_graphs"]) == [1, 1, 0, 0, 0]
    assert not result.graphs[0].dynamic and result.graphs[1].dynamic
    assert t.loc[1, "graph"].startswith("dynamic (s") and t.loc[1, "graph"].endswith(", 8, 32)")
    assert "size mismatch at index 0" in t.loc[1, "why"] and "expected 2, actual 3" in t.loc[1, "why"]
    assert t.loc[0, "why"] == "first call" and (t.loc[2:, "graph"] == "reused").all()


def test_dynamic_false_compiles_every_new_shape(mlp):
    result = counts.shape_sweep(mlp.fn, inputs(mlp, [2, 3, 5, 4, 2]), dynamic=False, backend="eager", progress=False)
    assert result.compiles == 4 == result.table["input_shape"].nunique()
    assert not any(g.dynamic for g in result.graphs)
    assert result.table.loc[4, "graph"] == "reused"  # the size-2 graph is still cached


@pytest.mark.parametrize("kwargs", [{"mark_dynamic": 0}, {"dynamic": True}])
def test_marked_or_dynamic_compiles_once(mlp, kwargs):
    xs = inputs(mlp, [2, 3, 5])
    result = counts.shape_sweep(mlp.fn, xs, backend="eager", progress=False, **kwargs)
    assert result.compiles == 1 and result.graphs[0].dynamic
    assert not any(hasattr(x, "_dynamo_dynamic_indices") for x in xs)  # the caller's tensors stay unmarked


def test_sweep_prints_progress_and_summarises(mlp, capsys):
    a = counts.shape_sweep(mlp.fn, inputs(mlp, [2, 3]), backend="eager", label="default")
    out = capsys.readouterr().out
    assert "[default] call 1/2 input (2, 8, 32): compiled a static (2, 8, 32) graph" in out
    assert "[default] call 2/2 input (3, 8, 32): compiled a dynamic (s" in out
    summary = counts.sweep_summary(a)
    assert summary.loc[0, "compiles"] == 2 and summary.loc[0, "dynamic graphs"] == 1
    assert "2 graph(s) compiled in 2 calls" in a._repr_html_() and "2 compiles" in repr(a)


def test_sweep_leaves_no_compiled_code_behind(mlp):
    counts.shape_sweep(mlp.fn, inputs(mlp, [2]), backend="eager", progress=False)
    counter = counts.CompileCounter("eager")
    with torch.no_grad():
        torch.compile(mlp.fn, backend=counter)(*mlp.inputs)
    assert len(counter.graphs) == 1


def test_counter_agrees_with_torchs_own_counter(mlp):
    """CompileCounter is built on torch._dynamo.testing.CompileCounterWithBackend (torch 2.11 and 2.13 have it)."""
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    ours, theirs = counts.CompileCounter("eager"), CompileCounterWithBackend("eager")
    assert ours.torch_counter is not None
    for backend in (ours, theirs):
        fn = torch.compile(mlp.fn, backend=backend, dynamic=False)
        with torch.no_grad():
            for x in inputs(mlp, [2, 3, 2]):
                fn(x)
        torch._dynamo.reset()
    assert ours.frame_count == theirs.frame_count == len(ours.graphs) == 2
    assert ours.op_count == theirs.op_count > 0


@pytest.mark.slow
def test_inductor_counts_the_same_graphs_as_eager(mlp):
    xs = inputs(mlp, [2, 3, 5])
    real = counts.shape_sweep(mlp.fn, xs, backend="inductor", progress=False)
    fast = counts.shape_sweep(mlp.fn, xs, backend="eager", progress=False)
    assert real.compiles == fast.compiles == 2
    assert [g.dynamic for g in real.graphs] == [g.dynamic for g in fast.graphs]


def test_timing(mlp):
    fn = torch.compile(mlp.fn, backend=counts.CompileCounter("eager"))
    first = cc.time_first_call(fn, *mlp.inputs, later=3, progress=False)
    assert first.first_s > first.later_s > 0 and first.compile_s == pytest.approx(first.first_s - first.later_s)
    assert set(first.fx_cache) == {"hit", "miss", "bypass"}
    assert list(first.as_frame()["what"]) == ["first call (compiles)", "later call (median)", "compile time"]
    assert cc.time_per_call(mlp.fn, *mlp.inputs, repeats=3) > 0
    torch._dynamo.reset()


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda m: counts.shape_sweep(42, [torch.ones(1)]), TypeError, "function or nn.Module"),
        (lambda m: counts.shape_sweep(m.fn, torch.ones(2, 8, 32)), TypeError, "list of tensors"),
        (lambda m: counts.shape_sweep(m.fn, [torch.ones(2, 8, 32)], dynamic="yes"), ValueError, "dynamic must be"),
        (lambda m: counts.shape_sweep(m.fn, [torch.ones(2, 8, 32)], mark_dynamic=True), TypeError, "dimension index"),
        (lambda m: counts.CompileCounter("no-such-backend"), ValueError, "unknown torch.compile backend"),
        (lambda m: cc.time_per_call(m.fn, *m.inputs, repeats=0), ValueError, "repeats"),
        (lambda m: counts.batch_inputs(m.inputs[0], [0]), ValueError, "positive ints"),
        (lambda m: cc.compile_wrapper_rows("trace"), TypeError, "a Trace"),
    ],
)
def test_bad_arguments(mlp, call, error, match):
    with pytest.raises(error, match=match):
        call(mlp)


def test_batch_inputs(mlp):
    xs = counts.batch_inputs(mlp.inputs[0], [1, 4], dim=0)
    assert [tuple(x.shape) for x in xs] == [(1, 8, 32), (4, 8, 32)] and xs[0].dtype == mlp.inputs[0].dtype


# ------------------------------------------------------------------------------ on the H200 traces


def test_wrapper_rows_of_the_h200_compiled_trace():
    compiled = helpers.load_trace(data_file("h200_mlp_compiled.json.gz"))
    rows = cc.compile_wrapper_rows(compiled)
    assert list(rows["row"]) == [
        "TorchDynamo Cache Lookup",
        "Torch-Compiled Region: 0/0",
        "Pregraph bytecode",
        "AOTDispatcher Runtime Wrapper Prologue",
        "## Call CompiledFxGraph",
    ]
    assert (rows["calls"] == 3).all() and (rows["self_cpu_us_per_call"] > 0).all()
    eager = helpers.load_trace(data_file("h200_mlp_eager.json.gz"))
    assert cc.compile_wrapper_rows(eager).empty


def test_call_split_of_the_h200_traces():
    eager = cc.call_split(helpers.load_trace(data_file("h200_mlp_eager.json.gz")))
    compiled = cc.call_split(helpers.load_trace(data_file("h200_mlp_compiled.json.gz")))
    assert list(compiled["step"]) == [1, 2, 3]
    # fusion saves device time; each compiled call still spends longer on the CPU than on the GPU
    assert compiled["device_us"].mean() < eager["device_us"].mean() - 20
    assert compiled["cpu_bound"].all()
    k = helpers.load_trace(data_file("h200_mlp_compiled.json.gz")).kernels()
    assert compiled.loc[0, "device_us"] == pytest.approx(k[k["step"] == 1]["duration_us"].sum())


def test_call_split_needs_call_annotations(linear_trace):
    split = cc.call_split(linear_trace)
    assert (split["device_us"] == 0).all() and len(split) == 3


def test_first_calls_count_graphs_per_variant(mlp, capsys):
    torch._dynamo.reset()
    xs = inputs(mlp, [2, 4])
    table = cc.first_calls({"compiled": torch.compile(mlp.fn, backend="eager"), "eager": mlp.fn}, xs)
    torch._dynamo.reset()
    assert list(table["variant"]) == ["compiled", "compiled", "eager", "eager"]
    assert list(table["graphs_compiled"]) == [1, 1, 0, 0]  # compile, then one recompile into a dynamic graph
    assert (table["first_call_s"] > 0).all() and (table["later_call_s"] > 0).all()
    assert "[compiled] input (4, 8, 32): first call" in capsys.readouterr().out
    with pytest.raises(TypeError, match="non-empty dict"):
        cc.first_calls({}, xs)


def test_first_call_times_read_in_seconds_or_milliseconds():
    frame = cc.FirstCall(first_s=2.2336, later_s=0.00033663, fx_cache={"hit": 0}).as_frame()
    assert list(frame["time"]) == ["2.2 s", "0.34 ms", "2.2 s"]
    from helpers.measure.timing import readable_seconds

    assert readable_seconds(0.0123) == "12 ms" and readable_seconds(0.5) == "500 ms" and readable_seconds(0) == "0 ms"
    assert "seconds" in frame.columns  # the numbers stay for code; the HTML view shows the readable column
    assert "0.002" not in cc.FirstCall(first_s=0.9, later_s=0.002, fx_cache={})._repr_html_()
