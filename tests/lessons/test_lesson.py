"""helpers.lessons: the building blocks notebooks 00-03 share, on live CPU profiles and real H200 traces."""

from __future__ import annotations

import html

import matplotlib
import pandas as pd
import pytest
import torch
from support import data_file

import helpers
import helpers.trace.queries
from helpers.lessons import display

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def mlp_h200() -> helpers.trace.Trace:
    return helpers.load_trace(data_file("h200_mlp_eager.json.gz"))


@pytest.fixture(scope="module")
def linear_h200() -> helpers.trace.Trace:
    return helpers.load_trace(data_file("h200_linear_bias.json.gz"))


@pytest.fixture(scope="module")
def views_h200() -> helpers.trace.Trace:
    """The shipped reference trace of notebook 01 (recorded on an H200)."""
    return helpers.load_trace(helpers.reference_trace_path("h200_views_copy"))


@pytest.fixture(scope="module")
def views_cpu() -> helpers.trace.Trace:
    built = helpers.workloads.views_and_copies("cpu", rows=256, cols=128)
    return helpers.profile(built.fn, *built.inputs, steps=2, label="views_cpu")


# ------------------------------------------------------------------------------------ environment
def test_environment_report_describes_this_machine():
    report = helpers.nb00.environment_report()
    assert list(report.columns) == ["item", "value"]
    values = dict(zip(report["item"], report["value"]))
    assert values["torch"] == torch.__version__
    assert values["CUDA GPU available"] == str(torch.cuda.is_available())
    assert values["lesson path"] == helpers.lesson_path()
    assert values["torch CPU threads"] == str(torch.get_num_threads())
    assert ("GPU 0" in values) == torch.cuda.is_available()


def test_lesson_path_follows_the_device():
    assert helpers.on_gpu() == torch.cuda.is_available()
    assert helpers.lesson_path() == (display.GPU_PATH if torch.cuda.is_available() else display.CPU_PATH)


# ------------------------------------------------------------------------------------ trace cards
def test_trace_cards_label_live_and_reference(linear_trace):
    shipped = helpers.load_trace(helpers.reference_trace_path("h200_linear_bias"))
    cards = helpers.trace_cards(linear_trace, shipped).set_index("label")
    live, ref = cards.loc["linear"], cards.loc["h200_linear_bias"]
    assert live["kind"] == "live profile" and live["device_events_per_step"] == 0 and live["steps"] == 3
    assert live["torch"] == torch.__version__
    assert ref["kind"] == "reference trace" and ref["device"] == "NVIDIA H200"
    assert ref["device_events_per_step"] == 1.0 and ref["torch"].startswith("2.11")
    assert ref["cpu_ops_per_step"] > 0


def test_trace_cards_errors(linear_trace):
    with pytest.raises(ValueError, match="at least one"):
        helpers.trace_cards()
    with pytest.raises(TypeError, match=r"traces\[1\] must be a Trace"):
        helpers.trace_cards(linear_trace, "trace.json")


def test_device_properties(mlp_h200, linear_trace):
    props = helpers.nb03.device_properties(mlp_h200)
    assert props["name"] == "NVIDIA H200" and props["numSms"] == 132
    if not torch.cuda.is_available():  # on a CUDA host even a CPU-only profile lists the GPUs
        with pytest.raises(ValueError, match="no GPU properties"):
            helpers.nb03.device_properties(linear_trace)


# ------------------------------------------------------------------------------------ side by side
def test_side_by_side_titles_and_rendering(linear_trace, linear_h200):
    left = helpers.kernel_table(linear_h200)[["short_name", "duration_us"]]
    right = linear_trace.ops()[["name", "calls"]]
    panel = helpers.side_by_side(left, ("CPU ops", right))
    html = panel._repr_html_()
    assert "course-side-by-side" in html and "CPU ops" in html and "h200_linear_bias" in html
    assert "nvjet_sm90_tst_64x8_64x16_1x2_h_bz_bias_TNT" in html and "aten::addmm" in html
    text = repr(panel)
    assert text.startswith("== h200_linear_bias") and "== CPU ops ==" in text
    titled = helpers.side_by_side(right, "some text", titles=["ops", "note"])
    assert [t for t, _ in titled.panels] == ["ops", "note"] and "some text" in titled._repr_html_()


def test_side_by_side_errors(linear_trace):
    ops = linear_trace.ops()
    with pytest.raises(ValueError, match="at least one panel"):
        helpers.side_by_side()
    with pytest.raises(ValueError, match="panel 0 has no title"):
        helpers.side_by_side(ops)
    with pytest.raises(ValueError, match="one title per panel"):
        helpers.side_by_side(ops, ops, titles=["only one"])
    with pytest.raises(TypeError, match="titles must be strings"):
        helpers.side_by_side(ops, titles=[3])


# ------------------------------------------------------------------------------------ kernels
def test_kernel_table_of_the_eager_mlp(mlp_h200):
    table = helpers.kernel_table(mlp_h200)
    assert list(table["kind"]).count("kernel") == 5 and list(table["kind"]).count("memset") == 2
    gemms = table[table["family"] == "gemm"]
    assert sorted(gemms["tile"].unique()) == ["192x128x64", "256x128x64"]
    assert set(gemms["launched_by"]) == {"aten::mm"}
    assert sorted({helpers.nb03.mm_dims(s) for s in gemms["input_shapes"]}) == [(8192, 768, 3072), (8192, 3072, 768)]
    assert set(table.loc[table["family"] == "elementwise", "op"]) == {"gelu", "mul"}
    assert set(table.loc[table["kind"] == "memset", "launched_by"]) == {"aten::mm"}
    assert table.attrs["trace"].endswith("step 1")
    later = helpers.kernel_table(mlp_h200, step=mlp_h200.steps[-1], decode=False)
    assert list(later.columns) == ["name", "kind", "duration_us", "launched_by", "input_shapes"]
    assert len(later) == len(table)


def test_kernel_table_errors(mlp_h200, linear_trace):
    with pytest.raises(helpers.trace.NoKernelsError, match="launches none"):
        helpers.kernel_table(linear_trace)
    with pytest.raises(ValueError, match="not in this trace"):
        helpers.kernel_table(mlp_h200, step=99)
    with pytest.raises(TypeError, match="step must be"):
        helpers.kernel_table(mlp_h200, step=True)


def test_kernels_per_forward(mlp_h200, linear_h200, linear_trace):
    assert helpers.kernels_per_forward(mlp_h200) == 5
    assert helpers.kernels_per_forward(mlp_h200, kinds=None) == 7
    assert helpers.kernels_per_forward(mlp_h200, kinds="memset") == 2
    assert helpers.kernels_per_forward(linear_h200, kinds=None) == 1
    with pytest.raises(ValueError, match="unknown kinds"):
        helpers.kernels_per_forward(mlp_h200, kinds=("kernels",))
    with pytest.raises(helpers.trace.NoKernelsError):
        helpers.kernels_per_forward(linear_trace)


def test_kernels_per_forward_refuses_unequal_steps(mlp_h200, monkeypatch):
    kernels = mlp_h200.kernels()
    first = kernels.index[kernels["step"] == mlp_h200.steps[0]][0]
    monkeypatch.setattr(mlp_h200, "kernels", lambda: kernels.drop(index=first))
    with pytest.raises(ValueError, match="steps launch different numbers"):
        helpers.kernels_per_forward(mlp_h200, kinds=None)


def test_views_launch_nothing_and_copies_one_kernel_on_the_h200(views_h200):
    views = ["aten::t", "aten::transpose", "aten::view", "aten::reshape", "aten::as_strided"]
    costs = helpers.nb01.op_costs(views_h200, views + ["aten::contiguous", "aten::flatten"]).set_index("name")
    assert (costs.loc[views, "kernels_per_call"] == 0).all() and (costs.loc[views, "device_us_per_call"] == 0).all()
    assert (costs.loc[["aten::contiguous", "aten::flatten"], "kernels_per_call"] == 1).all()
    assert (costs.loc[["aten::contiguous", "aten::flatten"], "device_us_per_call"] > 0).all()
    assert helpers.trace.queries.kernels_under(views_h200, "aten::copy_") == 1.0
    assert helpers.kernels_per_forward(views_h200) == 2


def test_op_costs_on_a_cpu_profile(views_cpu):
    costs = helpers.nb01.op_costs(views_cpu, ["aten::t", "aten::copy_"]).set_index("name")
    assert (costs["device_us_per_call"] == 0).all() and (costs["kernels_per_call"] == 0).all()
    assert costs.loc["aten::copy_", "calls"] == 2 * 2  # two copies per call, two steps
    assert costs.loc["aten::copy_", "self_cpu_us_per_call"] > 0
    with pytest.raises(TypeError, match="non-empty list"):
        helpers.nb01.op_costs(views_cpu, "aten::t")
    with pytest.raises(ValueError, match=r"\['aten::nothing'\] are not in"):
        helpers.nb01.op_costs(views_cpu, ["aten::t", "aten::nothing"])


def test_chain_tree_shortens_kernel_names(views_h200, linear_trace):
    tree = helpers.chain_tree(views_h200, "aten::contiguous").frame
    assert tree["tree"].iloc[0] == "aten::contiguous"
    assert tree["tree"].iloc[-1].endswith("\u2514\u2500 elementwise_kernel<copy>")
    assert tree["kind"].iloc[-1] == "kernel" and (tree["per_call"] == 1).all()
    cpu = helpers.chain_tree(linear_trace, "aten::linear").frame
    assert (cpu["kind"] == "op").all() and cpu["tree"].str.contains("aten::addmm").any()


def test_merged_chain_nests_every_kernel_under_its_own_op(mlp_h200):
    """Issue 11: the down GEMM's kernel, first met in the third call, was listed after aten::_unsafe_view."""
    chain = mlp_h200.chain("aten::linear")
    for i, row in enumerate(chain.itertuples()):
        parent = row.path.rsplit(" -> ", 1)[0]
        if row.depth:  # the row above is the parent or a node of the parent's subtree
            above = list(chain["path"].iloc[:i])
            last_shallower = next(
                p for p, d in zip(reversed(above), reversed(list(chain["depth"].iloc[:i]))) if d < row.depth
            )
            assert last_shallower == parent, (row.path, last_shallower)
    mm_kernels = chain[chain["path"].str.startswith("aten::linear -> aten::matmul -> aten::mm -> ")]
    assert len(mm_kernels) == 3 and mm_kernels.index.max() < chain.index[chain["name"] == "aten::_unsafe_view"][0]


def test_chain_tree_draws_a_tree_in_html(mlp_h200):
    tree = helpers.chain_tree(mlp_h200, "aten::linear")
    lines = list(tree.frame["tree"])
    assert lines[0] == "aten::linear"
    assert lines[1].startswith("\u251c\u2500 aten::t") and lines[2].startswith("\u2502  \u2514\u2500 aten::transpose")
    down = next(line for line in lines if "coopB" in line)
    assert down.startswith("   \u2502  \u2514\u2500 ")  # last kernel of aten::mm, whose sibling _unsafe_view follows
    page = tree._repr_html_()
    assert "white-space:pre" in page and "text-align:left" in page and "&nbsp;" not in page
    assert page.count("<tr>") == len(lines) + 1
    assert "merged over 9 calls" in repr(tree) and "x0.33/call" in repr(tree)
    panel = helpers.side_by_side(tree)  # titled by its trace, once
    assert panel.panels[0][0] == tree.title
    assert panel._repr_html_().count(html.escape(tree.title)) == 1 and "white-space:pre" in panel._repr_html_()


def test_op_input_reads_recorded_shapes(mlp_h200, mlp_trace):
    inter = helpers.op_input(mlp_h200, "aten::gelu")
    assert inter.shape == (64, 128, 3072) and inter.dtype == "bfloat16" and inter.itemsize == 2
    assert inter.numel == 8192 * 3072 and inter.nbytes == 50_331_648
    cpu = helpers.op_input(mlp_trace, "aten::gelu")
    assert cpu.dtype == "float32" and cpu.shape == (2, 16, 128)
    with pytest.raises(ValueError, match="no operator 'aten::softmax'"):
        helpers.op_input(mlp_h200, "aten::softmax")
    with pytest.raises(TypeError):
        helpers.op_input(mlp_h200, "")


def test_op_input_needs_shapes():
    trace = helpers.profile(torch.nn.GELU(), torch.ones(4, 4), steps=1, record_shapes=False)
    with pytest.raises(ValueError, match="without shapes"):
        helpers.op_input(trace, "aten::gelu")


@pytest.mark.parametrize(
    "text, dims",
    [
        ("[[8192, 768], [768, 3072]]", (8192, 3072, 768)),
        ("[[64], [1024, 32], [32, 64], [], []]", (1024, 64, 32)),  # addmm: bias first
        # compiled addmm with an out= buffer after the operands (h200_linear_bias_compiled)
        ("[[64], [1024, 32], [32, 64], [], [], [1024, 64]]", (1024, 64, 32)),
        ("[[8192, 768], [768, 3072], [8192, 3072]]", (8192, 3072, 768)),  # extern mm with out=
    ],
)
def test_mm_dims(text, dims):
    assert helpers.nb03.mm_dims(text) == dims


def test_mm_dims_errors():
    with pytest.raises(ValueError, match="matching inner dimensions"):
        helpers.nb03.mm_dims("[[8, 4], [5, 2]]")
    with pytest.raises(ValueError, match="two matrix operands"):
        helpers.nb03.mm_dims("[[8, 4]]")
    with pytest.raises(ValueError, match="cannot read"):
        helpers.nb03.mm_dims("[[8, 4")
    with pytest.raises(TypeError):
        helpers.nb03.mm_dims([[8, 4], [4, 2]])


def test_tile_waves():
    waves = helpers.tile_waves({"down": (768, 8192)}, ["256x128x64", "192x128"], sms=132).set_index("tile")
    assert waves.loc["256x128", "tiles"] == 3 * 64 and waves.loc["192x128", "tiles"] == 4 * 64
    assert waves.loc["192x128", "waves"] == pytest.approx(256 / 132)
    assert waves.loc["256x128", "last_wave_busy"] == pytest.approx(60 / 132)
    assert waves.loc["192x128", "last_wave_busy"] == pytest.approx(124 / 132)
    even = helpers.tile_waves({"x": (10, 10)}, ["5x5"], sms=4)
    assert even["tiles"].iloc[0] == 4 and even["last_wave_busy"].iloc[0] == 1.0
    with pytest.raises(ValueError, match="sms"):
        helpers.tile_waves({"x": (10, 10)}, ["5x5"], sms=0)
    with pytest.raises(ValueError, match="not of the form"):
        helpers.tile_waves({"x": (10, 10)}, ["big"], sms=4)
    with pytest.raises(ValueError, match="positive integers"):
        helpers.tile_waves({"x": (10, 0)}, ["5x5"], sms=4)
    with pytest.raises(TypeError):
        helpers.tile_waves({}, ["5x5"], sms=4)


# ------------------------------------------------------------------------------------ strides
def test_layout_table_tells_views_from_copies():
    x = torch.arange(12.0).reshape(3, 4)
    table = helpers.nb01.layout_table({"x": x, "x.t()": x.t(), "x[1:]": x[1:], "copy": x.t().contiguous()}).set_index(
        "name"
    )
    assert table.loc["x.t()", "stride"] == (1, 4) and not table.loc["x.t()", "is_contiguous"]
    assert table.loc["x[1:]", "storage_offset"] == 4
    assert table.loc[["x", "x.t()", "x[1:]"], "shares_storage_with_first"].all()
    assert not table.loc["copy", "shares_storage_with_first"] and table.loc["copy", "stride"] == (3, 1)
    assert (table["storage_elements"] == 12).all()
    with pytest.raises(TypeError, match="non-empty dict"):
        helpers.nb01.layout_table([x])
    with pytest.raises(TypeError, match="not a tensor"):
        helpers.nb01.layout_table({"x": [1, 2]})


def test_storage_index_matches_the_buffer():
    x = torch.arange(12).reshape(3, 4)  # values equal their buffer positions
    for view in (x, x.t(), x[1:, 1::2], x.view(12).as_strided((5, 3), (2, 1))):
        assert torch.equal(helpers.nb01.storage_index(view), view)
    with pytest.raises(TypeError):
        helpers.nb01.storage_index([1, 2])


def test_strides_figure_draws_each_view():
    x = torch.arange(12.0).reshape(3, 4)
    fig = helpers.nb01.strides_figure({"x": x, "x.t()": x.t()})
    assert isinstance(fig, matplotlib.figure.Figure)
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert len(fig.axes) == 3 and titles[0].startswith("storage: one buffer of 12")
    assert "stride (1, 4)" in titles[2] and "not contiguous" in titles[2]
    labels = [t.get_text() for t in fig.axes[2].texts]
    assert labels[:3] == ["0", "4", "8"]  # first row of x.t() reads positions 0, 4, 8


def test_strides_figure_errors():
    x = torch.arange(12.0).reshape(3, 4)
    with pytest.raises(ValueError, match="is a copy, not a view"):
        helpers.nb01.strides_figure({"x": x, "copy": x.t().contiguous()})
    with pytest.raises(ValueError, match="at most 64"):
        helpers.nb01.strides_figure({"big": torch.zeros(10, 10)})
    with pytest.raises(ValueError, match="3 dimensions"):
        helpers.nb01.strides_figure({"x": x, "3d": x.view(3, 2, 2)})


def test_views_and_copies_workload():
    built = helpers.workloads.views_and_copies("cpu", rows=6, cols=4)
    contiguous, flat = built.fn(*built.inputs)
    x = built.inputs[0]
    assert torch.equal(contiguous, x.t()) and contiguous.is_contiguous()
    assert torch.equal(flat, x.t().reshape(-1))
    assert built.details == {"rows": 6, "cols": 4} and built.dtype == torch.float32
    assert helpers.workloads.views_and_copies("cpu").inputs[0].shape == (1024, 1024)
    with pytest.raises(ValueError, match="rows must be a positive integer"):
        helpers.workloads.views_and_copies("cpu", rows=0, cols=4)
    with pytest.raises(ValueError, match="contiguous 2-D"):
        helpers.workloads.views_then_copies(x.t())
    assert isinstance(helpers.nb01.layout_table({"x": x}), pd.DataFrame)


def test_op_call_times_per_call_statistics(linear_trace, linear_h200):
    times = helpers.op_call_times(linear_trace, ["aten::addmm", "aten::t"]).set_index("name")
    assert list(times.index) == ["aten::addmm", "aten::t"] and (times["calls"] == 3).all()
    assert ((times["min_us"] <= times["median_us"]) & (times["median_us"] <= times["max_us"])).all()
    ev = linear_trace.events
    addmm = ev.loc[(ev["name"] == "aten::addmm") & (ev["cat"] == "cpu_op"), "dur"]
    assert times.loc["aten::addmm", "median_us"] == addmm.median()
    gpu = helpers.op_call_times(linear_h200, ["aten::linear"])
    assert gpu["calls"].iloc[0] == 3
    with pytest.raises(ValueError, match="aten::gelu"):
        helpers.op_call_times(linear_trace, ["aten::gelu"])
    with pytest.raises(TypeError):
        helpers.op_call_times(linear_trace, "aten::t")


def test_op_call_times_of_every_op_resist_one_stall(linear_h200):
    """Issue 11: one paused call must not be what the first table shows (the median and the fastest call)."""
    every = helpers.op_call_times(linear_h200)
    ops = linear_h200.ops().set_index("name")
    assert set(every["name"]) == set(ops.index)
    t = every.set_index("name")
    assert t["total_us"].to_dict() == pytest.approx(ops.loc[t.index, "cpu_total_us"].to_dict())
    assert list(t["median_us"]) == sorted(t["median_us"], reverse=True)
    assert t.loc["aten::addmm", "device_us_per_call"] == pytest.approx(ops.loc["aten::addmm", "device_total_us"] / 3)
    assert (t["self_median_us"] <= t["median_us"] + 1e-9).all() and (
        (t["worst_share"] > 0) & (t["worst_share"] <= 1)
    ).all()
    # stall one call of aten::linear by 50 ms: the total jumps, the median does not
    stalled = helpers.load_trace(data_file("h200_linear_bias.json.gz"))  # a copy of its own: edited below
    ev = stalled.events
    first = ev.index[(ev["name"] == "aten::linear") & (ev["cat"] == "cpu_op")][0]
    ev.loc[first, "dur"] += 50_000.0
    after = helpers.op_call_times(stalled, ["aten::linear"]).iloc[0]
    assert after["total_us"] > 50_000 and after["worst_share"] > 0.99
    assert after["median_us"] == pytest.approx(t.loc["aten::linear", "median_us"])


def test_launch_calls_name_the_api_and_what_was_launched(mlp_h200, linear_trace):
    calls = helpers.nb00.launch_calls(mlp_h200)
    by_call = calls.groupby("call")["api"].first().to_dict()
    assert by_call["cuLaunchKernelEx"].startswith("CUDA driver") and by_call["cudaLaunchKernel"].startswith(
        "CUDA runtime"
    )
    memsets = calls[calls["call"] == "cudaMemsetAsync"]
    assert (
        len(memsets) == 2
        and set(memsets["called_by"]) == {"aten::mm"}
        and set(memsets["launches"]) == {"Memset (Device)"}
    )
    gemms = calls[calls["launches"].str.startswith("nvjet")]
    assert set(gemms["call"]) == {"cuLaunchKernelEx"} and len(gemms) == 3
    assert helpers.nb00.launch_calls(linear_trace).empty
    with pytest.raises(ValueError, match="not in this trace"):
        helpers.nb00.launch_calls(mlp_h200, step=99)
