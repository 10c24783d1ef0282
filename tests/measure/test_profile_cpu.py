"""helpers.profile and the Trace tables on real CPU profiles made here."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import torch

import helpers
import helpers.measure.profile
import helpers.paths


def test_bias_linear_is_one_addmm_under_linear_and_no_add(linear_trace):
    ops = linear_trace.ops()
    names = set(ops["name"])
    assert {"aten::linear", "aten::t", "aten::addmm"} <= names
    assert "aten::add" not in names and "aten::add_" not in names
    calls = ops.set_index("name")["calls"]
    assert calls["aten::linear"] == 3 and calls["aten::addmm"] == 3  # one per step


def test_chain_of_linear_on_cpu(linear_trace):
    chain = linear_trace.chain("aten::linear")
    paths = list(chain["path"])
    assert "aten::linear -> aten::t -> aten::transpose -> aten::as_strided" in paths
    assert "aten::linear -> aten::addmm" in paths
    # the bias is broadcast into the output, then the GEMM accumulates into it
    assert "aten::linear -> aten::addmm -> aten::expand" in paths
    assert "aten::linear -> aten::addmm -> aten::copy_" in paths
    root = chain.iloc[0]
    assert root["name"] == "aten::linear" and root["depth"] == 0 and root["calls_of_root"] == 3
    assert (chain["kind"] == "op").all()


def test_ops_times_are_consistent(linear_trace):
    ops = linear_trace.ops().set_index("name")
    assert (ops["self_cpu_us"] <= ops["cpu_total_us"] + 1e-6).all()
    assert (ops["self_cpu_us"] >= -1e-6).all()
    # on CPU nothing runs on a device
    assert (ops["device_total_us"] == 0).all()
    assert "[128, 32]" in ops.loc["aten::linear", "input_shapes"]


def test_ops_agree_with_profiler_table(linear_trace):
    ours = linear_trace.ops().set_index("name")["calls"]
    theirs = linear_trace.profiler_table().set_index("name")["calls"]
    for name in ("aten::linear", "aten::addmm", "aten::t", "aten::copy_"):
        assert ours[name] == theirs[name]


def test_the_profiler_table_is_built_once_and_only_when_asked(monkeypatch):
    built = []
    real = helpers.measure.profile.key_averages_frame
    monkeypatch.setattr(helpers.measure.profile, "key_averages_frame", lambda prof: built.append(1) or real(prof))
    lin = torch.nn.Linear(16, 8)
    trace = helpers.profile(lin, torch.randn(4, 16), steps=4)
    assert built == []  # torch's parsing of its events is most of a profile's cost: skipped unless asked
    first, again = trace.profiler_table(), trace.profiler_table()
    assert built == [1]
    # every active step is in it, as in ops()
    assert (
        first.set_index("name").loc["aten::linear", "calls"]
        == 4
        == trace.ops().set_index("name").loc["aten::linear", "calls"]
    )
    assert again.equals(first)


def test_steps_each_hold_one_call(linear_trace):
    assert linear_trace.steps == [1, 2, 3]
    ev = linear_trace.events
    per_step = ev[ev["name"] == "aten::linear"].groupby("step").size()
    assert per_step.to_dict() == {1: 1, 2: 1, 3: 1}


def test_no_kernels_on_cpu_eager_gives_a_clear_error(linear_trace):
    with pytest.raises(helpers.trace.NoKernelsError, match="CPU-only run"):
        linear_trace.kernels()
    assert linear_trace.kernels(allow_empty=True).empty


def test_mlp_ops(mlp_trace):
    ops = mlp_trace.ops().set_index("name")
    assert ops.loc["aten::mm", "calls"] == 3 * 2  # three GEMMs per forward, two steps
    assert ops.loc["aten::gelu", "calls"] == 2 and ops.loc["aten::mul", "calls"] == 2
    chain = mlp_trace.chain("aten::linear")
    assert "aten::linear -> aten::matmul -> aten::mm" in set(chain["path"])


def test_repr_says_where_it_came_from(linear_trace):
    text = repr(linear_trace)
    assert "live profile" in text and torch.__version__ in text and "CPU" in text


def test_timeline_has_a_cpu_lane_and_steps(linear_trace):
    fig = linear_trace.timeline()
    assert fig.layout.meta["lanes"] == linear_trace.host_lanes and len(fig.layout.meta["lanes"]) == 1
    assert sum(1 for s in fig.layout.shapes) == 3  # one shaded band per profiler step
    hover = "".join(str(t.hovertext) for t in fig.data)
    assert "aten::addmm" in hover and "[128, 32]" in hover
    assert "live profile" in fig.layout.title.text


def test_timeline_step_window_and_cap(linear_trace):
    fig = linear_trace.timeline(steps=2)
    assert fig.layout.meta["drawn_events"] < len(linear_trace.events)
    capped = linear_trace.timeline(max_events=5)
    assert capped.layout.meta["drawn_events"] == 5 and "left out" in capped.layout.title.text
    with pytest.raises(ValueError, match="not in this trace"):
        linear_trace.timeline(steps=99)


def test_save_roundtrip(linear_trace, tmp_path):
    out = linear_trace.save(tmp_path / "linear.json.gz")
    loaded = helpers.load_trace(out)
    assert loaded.info.source == "file"
    assert loaded.info.torch_version == torch.__version__
    assert loaded.ops().set_index("name")["calls"].equals(linear_trace.ops().set_index("name")["calls"])
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind


def test_save_refuses_reference_folder(linear_trace):
    with pytest.raises(ValueError, match="read-only"):
        linear_trace.save(helpers.paths.TRACES_DIR / "should_not_exist.json.gz")
    with pytest.raises(ValueError, match=".json.gz"):
        linear_trace.save("/tmp/x.json")


def test_save_is_atomic_when_writing_fails(linear_trace, tmp_path, monkeypatch):
    target = tmp_path / "t.json.gz"
    linear_trace.save(target)
    before = target.read_bytes()

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr("helpers.trace.files.os.replace", boom)
    with pytest.raises(OSError, match="disk full"):
        linear_trace.save(target)
    assert target.read_bytes() == before
    assert not list(tmp_path.glob(".*.tmp"))


def test_compiled_cpu_kernel_listed():
    import torch._inductor.config as inductor_config

    built = helpers.workloads.geglu_mlp("cpu", shape=helpers.MLPShape(batch=2, seq=8, dim=32, hidden=64))
    torch._dynamo.reset()
    with inductor_config.patch({"cpp.enable_kernel_profile": True}):
        fn = torch.compile(built.fn)
        trace = helpers.profile(fn, *built.inputs, steps=2, warmup=1, label="compiled")
    k = trace.kernels()
    # graph_<N>_: N counts the graphs compiled earlier in this process (or cached on disk), so any N
    names = list(k["name"].unique())
    assert len(names) == 1 and re.fullmatch(r"(graph_\d+_)?cpp_fused__unsafe_view_gelu_mul_0", names[0]), names
    assert (k["kind"] == "cpu-generated").all() and len(k) == 2
    names = set(trace.ops()["name"])
    assert "aten::gelu" not in names and "aten::mm" in names
    assert "Torch-Compiled Region: 0/0" in names


class Boom(torch.nn.Module):
    def forward(self, x):
        raise KeyError("bad key inside the model")


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: helpers.profile(42, torch.ones(1)), TypeError, "function or an nn.Module"),
        (lambda: helpers.profile(torch.nn.Linear(2, 2), torch.ones(1, 2), steps=0), ValueError, "steps"),
        (lambda: helpers.profile(torch.nn.Linear(2, 2), torch.ones(1, 2), warmup=-1), ValueError, "warmup"),
        (lambda: helpers.profile(Boom(), torch.ones(1)), RuntimeError, "Boom raised KeyError during warm-up"),
    ],
)
def test_bad_inputs(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_mixed_devices_are_named():
    class FakeDevice(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("b", torch.empty(1, device="meta"))

    with pytest.raises(ValueError, match=r"mixed devices: cpu \(inputs\[0\]\), meta \(module.b\)"):
        helpers.measure.profile.infer_device(FakeDevice(), (torch.ones(1),))


def test_model_error_keeps_the_cause():
    with pytest.raises(RuntimeError) as info:
        helpers.profile(Boom(), torch.ones(3))
    assert isinstance(info.value.__cause__, KeyError)


def test_profile_drops_the_profilers_own_notices_and_keeps_other_stderr():
    """Kineto prints "USDT: ... profiler_start" on the C-level stderr at each start and stop: noise in a
    lesson. profile() drops exactly those lines; anything else written to stderr meanwhile comes out."""
    code = (
        "import os, torch, helpers\n"
        "def f(x):\n"
        "    os.write(2, b'a line of my own\\n')\n"
        "    return x * 2\n"
        "helpers.profile(f, torch.ones(4), steps=2, warmup=1)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert "profiler_start" not in out.stderr and "USDT" not in out.stderr, out.stderr
    assert out.stderr.count("a line of my own") == 4, out.stderr  # 1 warm-up, 1 profiler warm-up step, 2 steps


def test_a_function_without_tensors_is_profiled_on_the_gpu_when_there_is_one(monkeypatch):
    closure = lambda: None  # noqa: E731 - a closure over its model and data, as a training step is
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert helpers.measure.profile.infer_device(closure, ()) == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert helpers.measure.profile.infer_device(closure, ()) == torch.device("cuda")
    assert helpers.measure.profile.infer_device(closure, (torch.ones(1),)) == torch.device("cpu")


def test_a_timer_waits_for_the_gpu_of_a_closure(monkeypatch):
    """time_per_call of a function with no tensor arguments synchronises the device it runs on (the GPU when there
    is one): else a GPU step would be timed as the host's queuing of its kernels."""
    waited = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(helpers.measure.timing, "synchronize", lambda device: waited.append(device))
    helpers.measure.timing.time_per_call(lambda: None, repeats=2, warmup=0)
    assert waited and all(d == torch.device("cuda") for d in waited)
