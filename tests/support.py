"""Things tests import by name (a module, not conftest.py: tests/browser has a conftest of its own,
and two conftest modules on sys.path shadow each other)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

DATA = Path(__file__).parent / "data"
requires_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="needs a CUDA GPU: this machine has none (CI never has one); the CUDA parsing path is tested on "
    "the committed H200 traces in tests/data instead",
)


def data_file(name: str) -> Path:
    """A committed test trace under tests/data; fails the test with advice when it is missing."""
    path = DATA / name
    if not path.exists():
        pytest.fail(f"committed test trace {path} is missing: record it with scripts/record_reference_traces.py")
    return path
