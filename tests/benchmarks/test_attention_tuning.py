"""The tuning sweep of the course's flash-attention kernel (benchmarks/attention/tuning.py), on CPU tensors."""

from __future__ import annotations

import pytest
import torch

import helpers
import helpers.triton_env
from benchmarks.attention import tuning
from helpers.kernels.flash_attention_configs import INTERPRETER_CONFIG, FlashConfig

# CPU tensors: the kernel runs on them in Triton's interpreter only.
pytestmark = pytest.mark.skipif(
    helpers.triton_env.triton_mode() != "interpreter", reason="Triton compiles for a GPU here"
)


def qkv(seq: int = 24, d: int = 16):
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(1, 2, seq, d, generator=g) for _ in range(3))


def test_the_interpreter_has_nothing_to_tune() -> None:
    best, log = tuning.sweep(*qkv(), "auto")
    assert best == INTERPRETER_CONFIG and log == []


def test_the_sweep_skips_failing_and_wrong_configurations_and_keeps_the_fastest(monkeypatch) -> None:
    configs = [
        FlashConfig(64, 64, 4, 3),
        FlashConfig(32, 32, 4, 2),
        FlashConfig(16, 32, 4, 1),
        FlashConfig(16, 16, 4, 1),
    ]
    real = tuning.flash_attention

    def launch(q, k, v, causal, kernel, config):
        if config.block_m == 64:
            raise RuntimeError("out of resources: shared memory")
        out = real(q, k, v, causal, kernel=kernel, config=INTERPRETER_CONFIG)
        return out * 2 if config.block_m == 32 else out  # a miscompiled configuration

    times = {16: 1.0}
    monkeypatch.setattr(tuning, "candidates", lambda *a: configs)
    monkeypatch.setattr(tuning, "flash_attention", launch)
    monkeypatch.setattr(tuning, "_bench_ms", lambda fn: (fn(), times.pop(16, 0.5))[1])
    best, log = tuning.sweep(*qkv(), "auto")
    assert best == configs[3]  # the faster of the two right ones
    assert [r["ms"] for r in log] == [None, None, 1.0, 0.5]
    assert "out of resources" in log[0]["error"] and "relative error" in log[1]["error"]
    assert {r["path"] for r in log} == {"pointer"} and log[0]["seq_q"] == 24


def test_no_configuration_that_runs_gives_none(monkeypatch) -> None:
    def broken(*a, **k):
        raise RuntimeError("does not compile")

    monkeypatch.setattr(tuning, "candidates", lambda *a: [FlashConfig(16, 16, 4, 1)] * 2)
    monkeypatch.setattr(tuning, "flash_attention", broken)
    best, log = tuning.sweep(*qkv(), "pointer")
    assert best is None and len(log) == 2
