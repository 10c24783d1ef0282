"""The matmul ceilings of a GPU: the best rate of a few large GEMMs in bf16 and, where it runs, FP8
(judged against the bf16 rate an FP8 GEMM would show well over 100 %)."""

from __future__ import annotations

from functools import partial

import torch

from .timing import time_device

# The GEMMs (m, n, k) whose best rate is the matmul ceiling on a GPU.
CUDA_MATMUL_SHAPES = ((8192, 8192, 8192), (4096, 2048, 8192), (8192, 4096, 16384), (4096, 2048, 32000))
# cuBLAS's FP8 kernels run only from this compute capability on (Ada, Hopper, Blackwell)
FP8_MIN_CAPABILITY = (8, 9)


def best_matmul_rate(
    device: torch.device, dtype: torch.dtype, repeats: int, warmup: int
) -> tuple[float, tuple[int, int, int]]:
    """(FLOP/s, (m, n, k)) of the fastest ``torch.mm`` over :data:`CUDA_MATMUL_SHAPES`, each with A row- and
    column-major (a weight gradient is the second kind, and cuBLAS picks another kernel for it)."""
    rate, best = 0.0, CUDA_MATMUL_SHAPES[0]
    for m, n, k in CUDA_MATMUL_SHAPES:
        b = torch.randn(k, n, dtype=dtype, device=device)
        for a in (torch.randn(m, k, dtype=dtype, device=device), torch.randn(k, m, dtype=dtype, device=device).t()):
            r = 2 * m * n * k / time_device(partial(torch.mm, a, b), repeats, warmup)
            if r > rate:
                rate, best = r, (m, n, k)
            del a
        del b
    return rate, best


def fp8_supported(device: torch.device) -> bool:
    """True where ``torch._scaled_mm`` multiplies e4m3 on `device`: an NVIDIA GPU of capability 8.9+."""
    if device.type != "cuda" or torch.version.hip or not hasattr(torch, "float8_e4m3fn"):
        return False
    return torch.cuda.get_device_capability(device) >= FP8_MIN_CAPABILITY


def best_fp8_matmul_rate(device: torch.device, repeats: int, warmup: int) -> tuple[float, tuple[int, int, int]] | None:
    """(FLOP/s, (m, n, k)) of the fastest e4m3 ``torch._scaled_mm``, with and without fast accumulation (a kernel
    in either mode stays under it); None where FP8 does not run."""
    if not fp8_supported(device):
        return None
    e4m3 = torch.float8_e4m3fn
    one = torch.ones((), dtype=torch.float32, device=device)
    rate, best = 0.0, CUDA_MATMUL_SHAPES[0]
    try:
        for m, n, k in CUDA_MATMUL_SHAPES:
            a = torch.randn(m, k, device=device).to(e4m3)
            b = torch.randn(n, k, device=device).to(e4m3).t()
            for fast in (False, True):
                run = partial(torch._scaled_mm, a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
                r = 2 * m * n * k / time_device(partial(run, use_fast_accum=fast), repeats, warmup)
                if r > rate:
                    rate, best = r, (m, n, k)
            del a, b
    except (RuntimeError, NotImplementedError):  # a build or driver without FP8 GEMMs: no FP8 ceiling
        return None
    return rate, best
