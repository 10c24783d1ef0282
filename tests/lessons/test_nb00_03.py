"""The checkers of lessons 00-03, each probed with the taught answer, a naive one and the tempting wrong one.

Expected values are computed as the notebooks compute them: from a live CPU profile (at small sizes) or
from the H200 reference traces the notebooks read on a machine without a GPU. Each wrong answer says in
a comment what makes it tempting.
"""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

import helpers
from helpers import decode_kernel, nb00, nb01, nb02, nb03
from helpers.lessons.exercises import RIGHT, WRONG

BOOKS = (nb00, nb01, nb02, nb03)


@pytest.fixture(autouse=True)
def fresh_books():
    for book in BOOKS:
        book.reset()
    yield
    for book in BOOKS:
        book.reset()


def _ref(name: str) -> helpers.trace.Trace:
    return helpers.load_trace(helpers.reference_trace_path(name))


def _probe(book, key, expected, taught, *wrong, **kw):
    fb = book.check(key, taught, expected, **kw)
    assert fb.status == RIGHT and "Hint:" not in fb.message, (key, taught, fb)
    for answer in wrong:
        fb = book.check(key, answer, expected, **kw)
        assert fb.status == WRONG, (key, answer, fb)
        assert "Hint:" in fb.message  # a wrong answer gets the hint, not the explanation


# -- 00 ----------------------------------------------------------------------------------------------


def test_00_linear_calls_counts_the_active_steps():
    torch.manual_seed(0)
    layer, x = torch.nn.Linear(32, 64), torch.randn(64, 32)
    wait, warmup, active = 1, 2, 4
    with (
        torch.no_grad(),
        profile(
            activities=[ProfilerActivity.CPU], schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1)
        ) as prof,
    ):
        for _ in range(wait + warmup + active):
            with record_function("my_linear"):
                layer(x)
            prof.step()
    averages = nb00.key_averages_frame(prof).set_index("name")
    expected = int(averages.loc["aten::linear", "calls"])
    details = {"active": active, "warmup": warmup}
    # naive: every call of the loop; tempting: warm-up steps are recorded, so they must count too
    _probe(nb00, "linear_calls", expected, active, wait + warmup + active, warmup + active, details=details)


def test_00_biggest_child_of_linear_on_a_live_profile():
    torch.manual_seed(0)
    layer, x = torch.nn.Linear(32, 64), torch.randn(1024, 32)
    trace = helpers.profile(layer, x, steps=10, label="linear")
    chain = trace.chain("aten::linear")
    children = chain.loc[chain["depth"] == 1, "name"].tolist()
    expected = helpers.op_call_times(trace, children).set_index("name")["median_us"].idxmax()
    # naive: the operator itself (largest total, but not a child); tempting: `x @ W.T` reads as a matmul,
    # which is the bias-free path of nn.Linear
    _probe(nb00, "biggest_child", expected, "aten::addmm", "aten::linear", "aten::matmul")


def test_00_gemm_launcher_on_the_h200_trace():
    kernels = helpers.kernel_table(_ref("h200_linear_bias"))
    expected = ", ".join(sorted(set(kernels.loc[kernels["family"] == "gemm", "launched_by"])))
    # naive: the layer's own operator, whose total holds the kernel's time; tempting: the CUDA call that
    # queues the kernel, one level further down than an operator
    _probe(nb00, "gemm_launched_by", expected, "aten::addmm", "aten::linear", "cuLaunchKernelEx")


def test_00_my_busiest_op_on_the_notebooks_default_layer():
    torch.manual_seed(0)
    trace = helpers.profile(torch.nn.Linear(32, 64, bias=False), torch.randn(1024, 32), steps=5, label="my_layer")
    measured = helpers.busiest_op(trace)
    details = {"measured": measured, "where": "time in its own code"}
    # naive: the layer's operator; tempting: addmm, the answer with a bias the lesson taught just before
    _probe(nb00, "my_busiest_op", measured, "aten::mm", "aten::linear", "aten::addmm", details=details)


# -- 01 ----------------------------------------------------------------------------------------------


def test_01_stride_of_the_transpose():
    x = torch.arange(12.0).reshape(3, 4)
    # naive: x's own stride; tempting: the stride of a fresh contiguous (4, 3) tensor; a list is not a tuple
    _probe(nb01, "t_stride", tuple(x.t().stride()), (1, 4), (4, 1), (3, 1), "(1, 4)")


def test_01_which_results_copy():
    x = torch.arange(12.0).reshape(3, 4)
    results = {
        "x": x,
        "x.t()": x.t(),
        "x.transpose(0, 1)": x.transpose(0, 1),
        "x.view(12)": x.view(12),
        "x.reshape(4, 3)": x.reshape(4, 3),
        "x.as_strided((2, 2), (4, 1), 1)": x.as_strided((2, 2), (4, 1), 1),
        "x.t().contiguous()": x.t().contiguous(),
        "x.t().flatten()": x.t().flatten(),
    }
    layout = nb01.layout_table(results)
    measured = set(layout.loc[~layout["shares_storage_with_first"], "name"])
    taught = {"x.t().contiguous()", "x.t().flatten()"}
    # naive: everything that reorders the elements copies; tempting: flatten is a view (it is, of a
    # contiguous tensor), so only contiguous() copies
    naive = {"x.t()", "x.transpose(0, 1)", "x.t().contiguous()", "x.t().flatten()"}
    _probe(nb01, "copies", measured, taught, naive, {"x.t().contiguous()"}, "x.t().contiguous()")


def test_01_kernels_per_call_on_the_h200_trace():
    expected = helpers.kernels_per_forward(_ref("h200_views_copy"), kinds=None)
    # naive: one kernel per operator called (five views, two copies); tempting: a view is free and so is
    # contiguous(), which only "makes the layout right", leaving flatten's one kernel
    _probe(nb01, "kernels_per_call", expected, 2, 7, 1)


@pytest.mark.parametrize(
    ("expression", "copies"),
    [(lambda t: t[:, 1:].reshape(-1), True), (lambda t: t.reshape(-1), False), (lambda t: t[:, ::2], False)],
)
def test_01_my_expression_copies(expression, copies):
    t = torch.arange(64.0 * 64).reshape(64, 64)
    mine = nb01.layout_table({"t": t, "your result": expression(t)})
    expected = not bool(mine["shares_storage_with_first"].iloc[1])
    details = {"shares": "", "wrote": ""}
    # tempting: reshape and slicing read as views whatever the strides; naive: the word instead of a bool
    _probe(nb01, "my_expression_copies", expected, copies, not copies, "copy", details=details)


# -- 02 ----------------------------------------------------------------------------------------------


def test_02_kernel_counts_on_the_h200_traces():
    by_hand = helpers.kernels_per_forward(_ref("h200_matmul_add"), kinds=None)
    linear = helpers.kernels_per_forward(_ref("h200_linear_bias"), kinds=None)
    # x @ W.T + b: naive one kernel for one line of Python; tempting three, one per operator (t, matmul, add)
    _probe(nb02, "kernels_matmul_add", by_hand, 2, 1, 3)
    # nn.Linear: tempting 2, the same work as by hand; naive 3, one per operator of its tree (t, addmm, copy_)
    _probe(nb02, "kernels_linear", linear, 1, 2, 3)


def test_02_add_under_linear_on_a_live_cpu_profile():
    torch.manual_seed(0)
    built = helpers.workloads.linear_layer("cpu")
    trace = helpers.profile(built.fn, *built.inputs, steps=3, label="linear_bias_cpu")
    expected = bool({"aten::add", "aten::add_"} & set(trace.chain("aten::linear")["name"]))
    # tempting: a bias must be added somewhere, so an add shows; naive: the word instead of a bool
    _probe(nb02, "add_under_linear", expected, False, True, "no")


def test_02_layout_letters_of_the_linear_gemm():
    ref_linear = _ref("h200_linear_bias")
    bias_kernel = helpers.kernel_table(ref_linear).query("family == 'gemm'")["name"].iloc[0]
    named = (
        bias_kernel if decode_kernel(bias_kernel).get("layout") else helpers.kernel_table(ref_linear)["name"].iloc[0]
    )
    expected = decode_kernel(named)["layout"][:2]
    # naive: both operands as stored, row-major; tempting: `x @ W.T` puts the transpose on the second operand
    _probe(nb02, "ab_layout", expected, "TN", "NN", "NT")


def test_02_compile_keeps_the_gpu_kernel():
    eager = helpers.kernel_table(_ref("h200_linear_bias"))["name"].tolist()
    compiled = helpers.kernel_table(_ref("h200_linear_bias_compiled"))["name"].tolist()
    # tempting: compile generates code, so it must change the kernel; naive: the word instead of a bool
    _probe(nb02, "compile_changes_gpu_kernel", eager != compiled, False, True, "same")


@pytest.mark.parametrize(("bias", "taught"), [(True, "aten::addmm"), (False, "aten::mm")])
def test_02_my_product_op_on_a_3d_input(bias, taught):
    torch.manual_seed(0)
    trace = helpers.profile(torch.nn.Linear(32, 64, bias=bias), torch.randn(4, 64, 32), steps=3, label="my_linear")
    measured = helpers.busiest_op(trace, under="aten::linear")
    # tempting: a 3-D input needs a batched product; naive: the layer's own operator
    _probe(nb02, "my_product_op", measured, taught, "aten::bmm", "aten::linear", details={"measured": measured})


# -- 03 ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mlp_h200():
    return _ref("h200_mlp_eager")


def test_03_kernel_and_event_counts_on_the_h200_trace(mlp_h200):
    # naive: one kernel per Linear; tempting: the seven device events the profile lists, memsets included
    _probe(nb03, "kernels_per_forward", helpers.kernels_per_forward(mlp_h200), 5, 3, 7)
    # tempting: the five compute kernels of the last question; naive: three GEMMs and their memsets
    _probe(nb03, "device_events_per_forward", helpers.kernels_per_forward(mlp_h200, kinds=None), 7, 5, 9)


def test_03_distinct_tiles_on_the_h200_trace(mlp_h200):
    table = helpers.kernel_table(mlp_h200)
    gemms = table[table["family"] == "gemm"]
    # naive: one tile per GEMM; tempting: one GEMM library, one tile for all
    _probe(nb03, "distinct_tiles", int(gemms["tile"].nunique()), 2, 3, 1)


def test_03_megabytes_of_the_intermediate_and_the_pointwise_traffic(mlp_h200):
    inter = helpers.op_input(mlp_h200, "aten::gelu")
    details = {"numel": inter.numel, "itemsize": inter.itemsize, "dtype": inter.dtype}
    mb = inter.nbytes / 1e6
    elements_m = inter.numel / 1e6
    # naive: elements, not bytes; tempting: 4 bytes per element, as float32 (the CPU path's dtype)
    _probe(nb03, "intermediate_mb", mb, 50.3, elements_m, 4 * elements_m, details=details)
    gelu = helpers.nb03.elementwise_bytes(inter.numel, inter.dtype, reads=1, writes=1)
    mul = helpers.nb03.elementwise_bytes(inter.numel, inter.dtype, reads=2, writes=1)
    # naive: one read and one write per kernel (4 passes); tempting: what a fused kernel moves (3 passes)
    _probe(nb03, "pointwise_mb", (gelu + mul) / 1e6, 251.7, 4 * mb, 3 * mb)


def test_03_my_pointwise_mb_on_a_live_profile():
    shape = helpers.MLPShape(batch=2, seq=16, dim=32, hidden=128)
    mine = helpers.workloads.geglu_mlp("cpu", dtype=torch.float32, shape=shape)
    trace = helpers.profile(mine.fn, *mine.inputs, steps=2, label="my_mlp")
    inter = helpers.op_input(trace, "aten::gelu")
    details = {"shape": list(inter.shape), "dtype": inter.dtype, "mb": inter.nbytes / 1e6}
    tokens = shape.batch * shape.seq
    taught = 5 * tokens * shape.hidden * 4 / 1e6
    # naive: the fused count of three passes; tempting: the model width dim in place of hidden
    wrong = (3 * tokens * shape.hidden * 4 / 1e6, 5 * tokens * shape.dim * 4 / 1e6)
    _probe(nb03, "my_pointwise_mb", 5 * inter.nbytes / 1e6, taught, *wrong, details=details)
