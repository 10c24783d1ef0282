"""Shared fixtures: small real profiles made in the test session, and the committed trace files."""

from __future__ import annotations

import pytest
import torch

# `import helpers` first: it decides, before any kernel module is defined, whether Triton compiles or
# interprets (helpers/triton_env.py says why).
import helpers


@pytest.fixture(scope="session")
def linear_trace() -> helpers.trace.Trace:
    """A live CPU profile of nn.Linear(32, 64, bias=True) on [128, 32]."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(32, 64)
    return helpers.profile(layer, torch.randn(128, 32), steps=3, label="linear")


@pytest.fixture(scope="session")
def mlp_trace() -> helpers.trace.Trace:
    """A live CPU profile of the GeGLU MLP at a small shape."""
    built = helpers.workloads.geglu_mlp("cpu", shape=helpers.MLPShape(batch=2, seq=16, dim=64, hidden=128))
    return helpers.profile(built.fn, *built.inputs, steps=2, label="mlp")


@pytest.fixture(scope="session")
def learner_copies(tmp_path_factory):
    """Fresh learner copies of every lesson, made once per test process as a learner gets them
    (``scripts/make_learner_copies.py``); the answer-hiding tests of every lesson read them."""
    from make_learner_copies import make_learner_copies

    from helpers.paths import NOTEBOOKS_DIR

    dest = tmp_path_factory.mktemp("learner")
    make_learner_copies(NOTEBOOKS_DIR, dest=dest, fresh=True)
    return dest
