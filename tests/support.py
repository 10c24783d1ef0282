"""Things tests import by name (a module, not conftest.py: tests/browser has a conftest of its own,
and two conftest modules on sys.path shadow each other)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import helpers

DATA = Path(__file__).parent / "data"  # third-party traces (SOURCES.tsv says where each comes from)
requires_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="needs a CUDA GPU: this machine has none (CI never has one); the CUDA parsing path is tested on "
    "the committed H200 reference traces in traces/ instead",
)


def data_file(name: str) -> Path:
    """A shipped reference trace (traces/) by name, or a third-party test trace (tests/data/) by file name."""
    if (DATA / name).exists():
        return DATA / name
    try:
        return helpers.reference_trace_path(name.removesuffix(".json.gz"))
    except FileNotFoundError as err:
        pytest.fail(f"test trace {name} is missing: {err}")


# ------------------------------------------------------------------ the course's Triton kernels
requires_compiled_kernels = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="needs a CUDA GPU: this machine has none (CI never has one); the same kernels are tested in the "
    "Triton interpreter by the other tests of this file",
)


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """Relative error ||out - ref|| / ||ref|| (helpers.relative_error: float64, inf on NaN)."""
    return helpers.relative_error(out, ref)


def kernel_device() -> str:
    """Where the course's kernels run: "cuda" when compiled, "cpu" under Triton's interpreter."""
    return "cuda" if helpers.triton_mode() == "cuda" else "cpu"


def seeded_randn(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0, scale: float = 1.0) -> torch.Tensor:
    """A reproducible normal tensor on :func:`kernel_device`."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).to(device=kernel_device(), dtype=dtype)


def load_benchmark(name: str):
    """A script of ``benchmarks/`` (e.g. ``"mlp_variants"``) imported as a module, to call its ``main``."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module
