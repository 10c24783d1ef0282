"""Memory by category from the profiler's own analysis, on a real CPU training step."""

from __future__ import annotations

import pytest
import torch

from helpers.measure import memory


@pytest.fixture(scope="module")
def training_step():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(32, 64)

    def step(inp: torch.Tensor) -> None:
        opt.zero_grad(set_to_none=True)
        model(inp).pow(2).mean().backward()
        opt.step()

    params = sum(p.numel() * p.element_size() for p in model.parameters())
    return step, x, params


def test_categories_follow_a_training_step(training_step):
    step, x, param_bytes = training_step
    timeline = memory.profile_memory(step, x, steps=1, warmup=1)
    assert list(timeline.columns) == ["time_us", *memory.CATEGORIES, "total"]
    assert timeline["time_us"].is_monotonic_increasing and timeline["time_us"].iloc[0] == 0
    assert timeline.attrs["device"] == "cpu"
    # the parameters are present throughout; AdamW keeps two states of the parameters' size
    assert timeline["parameters"].max() == param_bytes
    assert timeline["optimizer state"].max() >= 2 * param_bytes
    assert timeline["gradients"].max() == param_bytes  # one gradient per parameter, set_to_none between steps
    assert timeline["activations"].max() > 0
    assert (timeline["total"] == timeline[list(memory.CATEGORIES)].sum(axis=1)).all()
    peaks = memory.memory_peaks(timeline).set_index("category")
    assert peaks.loc["total", "at_peak_mb"] == pytest.approx(timeline["total"].max() / 1e6)
    assert peaks["share_of_peak"].drop("total").sum() == pytest.approx(1.0)
    fig = memory.memory_figure(timeline)
    assert {t.name for t in fig.data} >= {"parameters", "optimizer state", "gradients", "activations"}


def test_bad_input():
    with pytest.raises(TypeError, match="torch.profiler.profile"):
        memory.memory_timeline(object())
    with pytest.raises(TypeError, match="function or nn.Module"):
        memory.profile_memory("not callable")
    with pytest.raises(ValueError, match="steps"):
        memory.profile_memory(lambda: None, steps=10**6)
    with torch.profiler.profile() as prof:  # no profile_memory: the analysis has nothing to read
        torch.ones(4) + 1
    with pytest.raises(ValueError, match="profile_memory=True"):
        memory.memory_timeline(prof)
    with pytest.raises(ValueError, match="time_us"):
        memory.memory_figure(torch.ones(1))  # type: ignore[arg-type]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only message")
def test_allocator_history_needs_a_gpu():
    with pytest.raises(ValueError, match="CUDA GPU"):
        memory.allocator_history(lambda: None)


def _timeline(unknown_share: float):
    import pandas as pd

    t = pd.DataFrame({"time_us": [0.0], **{c: [0] for c in memory.CATEGORIES}, "total": [100]})
    t.attrs["unknown_share_at_peak"] = unknown_share
    return t


def test_a_profile_that_lost_track_of_its_tensors_is_taken_again(monkeypatch):
    shares = iter([0.6, 0.1, 0.0])
    taken = []

    def once(*_):
        taken.append(1)
        return _timeline(next(shares))

    monkeypatch.setattr(memory, "_profile_once", once)
    timeline = memory.profile_memory(lambda: None, attempts=3)
    assert len(taken) == 2  # the second profile labels enough: no third
    assert timeline.attrs["unknown_share_at_peak"] == 0.1 and timeline.attrs["profiles"] == 2
    # never better than the limit: the least unknown of all attempts, and the count says so
    shares = iter([0.5, 0.3, 0.4])
    timeline = memory.profile_memory(lambda: None, attempts=3)
    assert timeline.attrs["unknown_share_at_peak"] == 0.3 and timeline.attrs["profiles"] == 3
    with pytest.raises(ValueError, match="unknown_limit"):
        memory.profile_memory(lambda: None, unknown_limit=2)


def test_a_real_profile_says_how_much_it_left_unlabelled(training_step):
    step, x, _ = training_step
    timeline = memory.profile_memory(step, x, steps=1, warmup=1)
    assert 0 <= timeline.attrs["unknown_share_at_peak"] <= 1
    assert 1 <= timeline.attrs["profiles"] <= 3
