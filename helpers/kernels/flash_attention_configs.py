"""Tile configurations of the flash-attention kernels: on a GPU the configuration tuned for the nearest length
(:data:`TUNED_H200`) first, then the other candidates, keeping the first that runs and computes right."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..triton_env import triton_mode


@dataclass(frozen=True)
class FlashConfig:
    """One tile configuration of the flash-attention kernels (rows per program, keys per tile, warps, stages)."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int

    def __str__(self) -> str:
        return f"{self.block_m}x{self.block_n}, {self.num_warps} warps, {self.num_stages} stages"


# Compiled-mode candidates. Per stage, shared memory holds one K and one V tile (2 * BLOCK_N * d * 2
# bytes) besides the Q tile; 8 warps (two warpgroups of 64 rows each, Hopper's wgmma slice) only with
# 128 x 128 tiles, since smaller tiles leave each warpgroup too little work.
GPU_CONFIGS: tuple[FlashConfig, ...] = (
    FlashConfig(64, 64, 4, 3), FlashConfig(128, 64, 4, 3), FlashConfig(128, 64, 4, 2), FlashConfig(128, 64, 4, 4),
    FlashConfig(64, 128, 4, 3), FlashConfig(128, 128, 8, 2), FlashConfig(128, 128, 8, 3), FlashConfig(128, 128, 8, 4),
)  # fmt: skip
# fp32 inputs use IEEE dots (FMA units, not tensor cores): exact results for tests, small tiles.
FP32_CONFIG = FlashConfig(32, 32, 4, 2)
# The interpreter runs programs one after another in numpy: 16 rows and 32 keys per tile, so that
# lengths such as 37 or 100 cross several tiles and every path (unmasked, diagonal, ragged) runs.
INTERPRETER_CONFIG = FlashConfig(16, 32, 4, 1)

# Causal bf16 on an H200, (path, head dim) -> {length: (BLOCK_M, BLOCK_N, warps, stages)}: the table
# "tuned" of benchmarks/results/h200_attention.json (a test keeps the two equal).
_S, _M, _L = (64, 64, 4, 3), (128, 64, 4, 3), (128, 128, 8, 3)
TUNED_H200: dict[tuple[str, int], dict[int, tuple[int, int, int, int]]] = {
    ("tma", 128): {1024: _S, 2048: _S, 4096: _S, 8192: (128, 64, 4, 2), 16384: _S},
    ("tma", 64): {1024: _S, 2048: _S, 4096: (128, 64, 4, 4), 8192: (64, 128, 4, 3), 16384: _M},
    ("pointer", 128): {1024: _S, 2048: _S, 4096: _L, 8192: _L, 16384: _L},
    ("pointer", 64): {1024: _S, 2048: _S, 4096: _M, 8192: _M, 16384: (128, 64, 4, 4)},
}
TUNED_CAPABILITY = 9  # the table holds for GPUs of this compute capability (Hopper)

_CHOSEN: dict[tuple, FlashConfig] = {}
_FAILED: dict[tuple, str] = {}  # groups where no candidate ran: why


def seq_bucket(n: int) -> int:
    """Sequence lengths that share a configuration: the next power of two (at least 64)."""
    return 1 << max(6, math.ceil(math.log2(max(n, 1))))


def candidates(seq_q: int, head_dim: int, dtype: torch.dtype) -> list[FlashConfig]:
    """The configurations that fit this problem in the current Triton mode, default order."""
    if triton_mode() == "interpreter":
        return [INTERPRETER_CONFIG]
    if dtype == torch.float32:
        return [FP32_CONFIG]
    # A 128-row block on a 20-token query wastes most of its rows: keep blocks near the query length.
    tall_enough = max(16, 1 << max(0, math.ceil(math.log2(max(seq_q, 1)))))
    kept = [c for c in GPU_CONFIGS if c.block_m <= max(64, tall_enough)]
    if head_dim > 128:  # K/V tiles of 256-wide heads: keep to the smaller tiles
        kept = [c for c in kept if c.block_m * c.block_n <= 64 * 128]
    return kept or [GPU_CONFIGS[0]]


def configs_to_try(
    path: str, seq_q: int, seq_k: int, head_dim: int, dtype: torch.dtype, capability: int
) -> list[FlashConfig]:
    """Best first: the H200's tuned choice for the nearest tuned length (same path, head dim), then the others."""
    found = candidates(seq_q, head_dim, dtype)
    tuned = TUNED_H200.get((path, head_dim))
    if len(found) == 1 or not tuned or capability != TUNED_CAPABILITY:
        return found
    first = FlashConfig(*tuned[min(tuned, key=lambda s: abs(math.log2(s / max(seq_k, 1))))])
    return [first, *(c for c in found if c != first)] if first in found else found


def pick_config(
    key: tuple,
    configs: list[FlashConfig],
    launch: Callable[[FlashConfig], None],
    check: Callable[[], str | None] | None = None,
    group: tuple | None = None,
) -> FlashConfig:
    """The configuration for `key`: remembered, or the first of `configs` that runs (`launch(cfg)`) and
    computes right (`check()` returns None, else why). If all fail, RuntimeError lists why, and later
    keys of the same `group` fail at once (nothing compiles again)."""
    if key in _CHOSEN:
        return _CHOSEN[key]
    if group is not None and group in _FAILED:
        raise RuntimeError(_FAILED[group])
    errors = []
    for cfg in configs:
        try:
            launch(cfg)  # compiles it
            wrong = check() if check is not None and len(configs) > 1 else None
            if wrong:
                raise ArithmeticError(wrong)
        except Exception as err:  # noqa: BLE001 - one failing candidate must not stop the others
            text = str(err).strip().splitlines()
            errors.append(f"{cfg}: {type(err).__name__}: {text[0][:160] if text else ''}")
            continue
        _CHOSEN[key] = cfg
        return cfg
    reason = "no flash-attention configuration ran here:\n  " + "\n  ".join(errors)
    if group is not None:
        _FAILED[group] = reason
    raise RuntimeError(reason)


@functools.cache
def capability_major(device_index: int) -> int:
    return torch.cuda.get_device_capability(device_index)[0]
