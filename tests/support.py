"""Things tests import by name (a module, not conftest.py: tests/browser has a conftest of its own,
and two conftest modules on sys.path shadow each other)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import torch

import helpers
import helpers.lessons.results
import helpers.triton_env

DATA = Path(__file__).parent / "data"  # third-party traces (SOURCES.tsv says where each comes from)
# The course's recorded H200 ceilings (benchmarks/results/h200_ceilings.json), as every lesson divides by them.
H200_REFERENCE = helpers.lessons.results.reference_ceilings()
requires_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="needs a CUDA GPU: this machine has none (CI never has one); `make test-gpu` runs it on a GPU",
)
# The profiler's CUDA path: what it reads is also checked, without a GPU, on the shipped GPU traces.
requires_cuda_profile = pytest.mark.skipif(
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
    return "cuda" if helpers.triton_env.triton_mode() == "cuda" else "cpu"


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


# ------------------------------------------------------------------ a hand-built GPU trace of a model step
HOST, GPU = (100, 1), (0, 7)  # (pid, tid) of the main thread and of the GPU stream
BACKWARD_TID = 2  # the autograd engine's thread on a GPU


def _x(name, cat, ts, dur, pid_tid=HOST, **args):
    pid, tid = pid_tid
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}


def _launch(op, ts, op_dur, launch_at, corr, kernel_ts, kernel_dur, tid=HOST[1], kernel="kernel_x"):
    """An op that launches one kernel: the cpu_op, its launch call, the kernel on the GPU stream."""
    return [
        _x(op, "cpu_op", ts, op_dur, (HOST[0], tid), **{"External id": corr}),
        _x("cudaLaunchKernel", "cuda_runtime", launch_at, 5, (HOST[0], tid), correlation=corr, **{"External id": corr}),
        _x(kernel, "kernel", kernel_ts, kernel_dur, GPU, correlation=corr, device=0, stream=7, **{"External id": corr}),
    ]


def _decoder_step(step: int, t0: float, names: dict[str, str]) -> list[dict]:
    """One step: attention (2 kernels), mlp (2), backward (1, engine thread), optimizer (1).

    Kernel time per part: attention 50, mlp 55, backward 40, optimizer 10 (us). GPU gaps: 18, 135,
    217, 163 us CPU-bound (the next launch call ended after the GPU ran dry) and 5 us waiting.
    """
    e = [
        _x(f"ProfilerStep#{step}", "user_annotation", t0, 1000),
        _x("attention", "user_annotation", t0 + 10, 190),
        _x("mlp", "user_annotation", t0 + 210, 190),
        _x("Optimizer.step#AdamW.step", "user_annotation", t0 + 700, 100),
        _x("autograd::engine::evaluate_function: MmBackward0", "cpu_op", t0 + 500, 100, (HOST[0], BACKWARD_TID)),
    ]
    c = step * 10
    e += _launch("aten::mm", t0 + 20, 40, t0 + 40, c + 1, t0 + 52, 30, kernel=names["gemm_a"])
    e += _launch("aten::add", t0 + 70, 30, t0 + 90, c + 2, t0 + 100, 20, kernel=names["add_a"])  # launch ends 95 > 82
    e += _launch("aten::mm", t0 + 220, 40, t0 + 245, c + 3, t0 + 255, 50, kernel=names["gemm_b"])  # ends at 305
    e += _launch("aten::mul", t0 + 262, 18, t0 + 265, c + 6, t0 + 310, 5, kernel=names["mul_b"])  # queued: waits 5
    e += _launch("aten::mm", t0 + 510, 80, t0 + 525, c + 4, t0 + 532, 40, tid=BACKWARD_TID, kernel=names["gemm_bwd"])
    e += _launch("aten::_fused_adamw_", t0 + 710, 80, t0 + 725, c + 5, t0 + 735, 10, kernel=names["adamw"])
    return e


DECODER_KERNELS = {n: n for n in ("gemm_a", "add_a", "gemm_b", "mul_b", "gemm_bwd", "adamw")}


def synthetic_decoder_trace(path, names: dict[str, str] | None = None, steps: int = 2) -> helpers.trace.Trace:
    """A gzipped Kineto-style GPU trace of `steps` model steps with known answers (see ``_decoder_step``).

    `names` renames the six kernels (e.g. real cuBLAS names to test layout letters).
    """
    names = {**DECODER_KERNELS, **(names or {})}
    events = [e for i in range(steps) for e in _decoder_step(i + 1, 2000.0 * i, names)]
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    return helpers.load_trace(path)


def run_benchmark_interpreted(*args: str, timeout: int = 300) -> None:
    """``python -m benchmarks ARGS`` in a child process on Triton's CPU interpreter, on every machine: a CPU smoke
    run must not meet a GPU's compiled mode, which refuses CPU tensors (and this process's mode is fixed)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", *args], cwd=root, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"python -m benchmarks {' '.join(args)} failed:\n{done.stderr[-3000:]}"
