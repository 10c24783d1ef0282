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


# ------------------------------------------------------------------ the course's Triton kernels
requires_compiled_kernels = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="needs a CUDA GPU: this machine has none (CI never has one); the same kernels are tested in the "
    "Triton interpreter by the other tests of this file",
)


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """Relative error ||out - ref|| / ||ref||, computed in float64."""
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


def kernel_device() -> str:
    """Where the course's kernels run: "cuda" when compiled, "cpu" under Triton's interpreter."""
    from helpers.fused import triton_mode

    return "cuda" if triton_mode() == "cuda" else "cpu"


def seeded_randn(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0, scale: float = 1.0) -> torch.Tensor:
    """A reproducible normal tensor on :func:`kernel_device`."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).to(device=kernel_device(), dtype=dtype)
