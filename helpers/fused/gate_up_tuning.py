"""Tile configurations of the gate+up kernels and their autotuning (layer 1b of ``gate_up``).

``TMA_CONFIGS`` and ``POINTER_CONFIGS`` are what the autotuner tries on a GPU; the winner for each
problem size is remembered (``_TUNED``) so later calls skip the autotuner.
"""

from __future__ import annotations

import functools

import pandas as pd
import torch
import triton
import triton.testing

from .gate_up_kernels import _gate_up_geglu_kernel, _gate_up_geglu_tma_kernel

# ----------------------------------------------------------------------------------------------
# Configurations and autotuning
# ----------------------------------------------------------------------------------------------


def gate_up_config(
    bm: int, bn: int, bk: int, stages: int, warps: int, group_m: int = 8, **extra: object
) -> triton.Config:
    return triton.Config(
        {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group_m, **extra},
        num_stages=stages,
        num_warps=warps,
    )


# A small set of Hopper configurations (BLOCK_N counts packed columns: 256 = 128 gate + 128 up).
# Measured on the H200 at the blog shape (benchmarks/geglu_kernels.py --sweep, profiler kernel
# time, cuBLAS on the concatenated weight without GeGLU: 108 us):
#   128x256x64, 3 or 4 stages, 8 warps, flattened persistent loop  119.6 us (646 TFLOP/s)
#   same, loop not flattened (epilogue not overlapped)             129.6
#   256x128x64, 4 stages                                           123.9
#   128x128x64, 4 stages, 4 warps                                  128.8
#   GROUP_M 4 / 16 instead of 8                                    119.6 / 120.2
#   warp specialisation (triton 3.6), flattened / not              121.9 / 130.7
#   gate/up in blocks of 128 rows instead of pairs (GROUP_ROWS)    118.9 (within 1%: pairs kept,
#                                                                  they work with any BLOCK_N)
#   pointer kernel (no TMA, not persistent), best tile             146.3
# The smaller tiles are here for small M (few tiles would leave most SMs idle).
TMA_CONFIGS = [
    gate_up_config(128, 256, 64, 3, 8, FLATTEN=True),
    gate_up_config(128, 256, 64, 4, 8, FLATTEN=True),
    gate_up_config(256, 128, 64, 4, 8, FLATTEN=True),
    gate_up_config(128, 128, 64, 4, 4, FLATTEN=True),
    gate_up_config(64, 128, 64, 4, 4, FLATTEN=True),
]
POINTER_CONFIGS = [
    gate_up_config(128, 256, 64, 3, 8),
    gate_up_config(128, 128, 64, 3, 8),
    gate_up_config(64, 128, 32, 4, 4),
    gate_up_config(64, 64, 32, 4, 4),
]
# fp32 inputs use IEEE fp32 dots, i.e. FMA instructions, not tensor cores: that path is for
# exact results (tests, references), not speed. Large tiles make those kernels slow to compile
# and too big for shared memory, so fp32 uses one small configuration instead of autotuning.
FP32_CONFIG = gate_up_config(64, 64, 32, 2, 4)
# The interpreter runs programs one after another in Python/numpy: few, mid-sized programs.
INTERPRETER_CONFIG = gate_up_config(64, 64, 32, 1, 4, group_m=2)
# Persistent programs in the interpreter: a small number that does not divide the tile count of
# the test shapes, so the tests exercise programs that own different numbers of tiles.
INTERPRETER_PROGRAMS = 3


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@functools.cache
def _num_sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


@functools.cache
def _capability_major(device_index: int) -> int:
    return torch.cuda.get_device_capability(device_index)[0]


def _device_index(t: torch.Tensor) -> int:
    return t.device.index if t.device.index is not None else torch.cuda.current_device()


def _set_tma_block_shapes(nargs: dict) -> None:
    """Autotune pre-hook: give the descriptors the block shapes of the configuration being run."""
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["x_desc"].block_shape = [bm, bk]
    nargs["w_desc"].block_shape = [bn, bk]
    nargs["out_desc"].block_shape = [bm, bn // 2]


def _with_hook(configs: list[triton.Config]) -> list[triton.Config]:
    return [
        triton.Config(dict(c.kwargs), num_warps=c.num_warps, num_stages=c.num_stages, pre_hook=_set_tma_block_shapes)
        for c in configs
    ]


def _prune_for_small_m(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    """Skip tiles taller than the problem (M=37 needs no 256-row tile); keep at least one config."""
    m = named_args["M"]
    kept = [c for c in configs if c.kwargs["BLOCK_M"] <= max(64, m)]
    return kept or configs[-1:]


def _tuning_bench(fn, quantiles):
    # Shorter than do_bench's default (25 ms warm-up, 100 ms of runs) so that tuning a new shape
    # costs well under a second per configuration; ample for kernels of 10 us and more.
    return triton.testing.do_bench(fn, warmup=5, rep=25, quantiles=quantiles)


# Autotuned wrappers (compiled mode only). Their key is the problem size (M, N2, K); Triton adds
# the dtypes of tensor arguments. After the first call for a key, gate_up_geglu reads the
# winner (autotuner.best_config) into _TUNED and launches the plain kernel with it, which skips
# the autotuner's per-call work.
_tma_autotuned = triton.autotune(
    configs=_with_hook(TMA_CONFIGS),
    key=["M", "N2", "K"],
    prune_configs_by={"early_config_prune": _prune_for_small_m},
    do_bench=_tuning_bench,
)(_gate_up_geglu_tma_kernel)
_pointer_autotuned = triton.autotune(
    configs=POINTER_CONFIGS,
    key=["M", "N2", "K"],
    prune_configs_by={"early_config_prune": _prune_for_small_m},
    do_bench=_tuning_bench,
)(_gate_up_geglu_kernel)
_TUNED: dict[tuple, triton.Config] = {}


def config_table() -> pd.DataFrame:
    """The Hopper (TMA) configurations the autotuner tries, one row each (used by notebook 06)."""
    return pd.DataFrame(
        [{**cfg.kwargs, "num_stages": cfg.num_stages, "num_warps": cfg.num_warps} for cfg in TMA_CONFIGS]
    )


def tuned_configs() -> dict[tuple, triton.Config]:
    """The configuration the autotuner chose for each problem key seen in this process (a copy)."""
    return dict(_TUNED)
