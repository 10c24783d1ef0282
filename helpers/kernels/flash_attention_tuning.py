"""Tile configurations of the flash-attention kernels and how the launcher picks one (layer 1b).

A configuration is ``BLOCK_M`` (query rows per program), ``BLOCK_N`` (keys per streamed tile), the
number of warps and the software-pipelining depth (``num_stages``: how many K/V tiles are in
flight while one is being used). On a GPU the launcher times the candidates that fit the problem
the first time it meets a (path, head dim, causal, dtype, sequence bucket) and remembers the
fastest; the interpreter always uses one small configuration.

The tuner here is the course's own and deliberately forgiving: a configuration that fails to
compile or to run (too much shared memory, an option this Triton version lacks) is recorded with
its reason and skipped, never fatal. :func:`tuning_log` shows what was tried.

Why these candidates (Hopper, bf16, head dim 64 and 128). Shared memory per stage holds one K and
one V tile, ``2 * BLOCK_N * head_dim * 2`` bytes (32 KB for 64 x 128), plus the Q tile once; an
H200 SM has 227 KB, so 128-row tiles allow 2-4 stages at head dim 128. 8 warps make two
warpgroups, each owning 64 query rows of a 128-row block (Hopper's ``wgmma`` works on 64-row
slices). The accumulator tile ``[BLOCK_M, head_dim]`` in fp32 lives in registers, as does the
score tile ``[BLOCK_M, BLOCK_N]``: at 128 x 128 each is 64 registers per thread over 256 threads.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
import torch
import triton
import triton.testing

from ..triton_env import triton_mode


@dataclass(frozen=True)
class FlashConfig:
    """One tile configuration of the flash-attention kernels (rows per program, keys per tile, warps, stages)."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int

    def as_dict(self) -> dict[str, int]:
        return {
            "BLOCK_M": self.block_m,
            "BLOCK_N": self.block_n,
            "num_warps": self.num_warps,
            "num_stages": self.num_stages,
        }

    def __str__(self) -> str:
        return f"{self.block_m}x{self.block_n}, {self.num_warps} warps, {self.num_stages} stages"


# Candidates for compiled mode, largest tiles first. Small sequences prune the tall tiles.
# 8 warps only with 128 x 128 tiles: smaller tiles split over two warpgroups leave each too little
# work per wgmma (the usual Hopper advice for Triton's attention kernels).
GPU_CONFIGS: tuple[FlashConfig, ...] = (
    FlashConfig(128, 128, 8, 2),
    FlashConfig(128, 128, 8, 3),
    FlashConfig(128, 128, 8, 4),
    FlashConfig(128, 64, 4, 2),
    FlashConfig(128, 64, 4, 3),
    FlashConfig(128, 64, 4, 4),
    FlashConfig(64, 128, 4, 3),
    FlashConfig(64, 64, 4, 3),
)
# fp32 inputs use IEEE dots (FMA units, not tensor cores): exact results for tests, small tiles.
FP32_CONFIG = FlashConfig(32, 32, 4, 2)
# The interpreter runs programs one after another in numpy: mid-sized tiles, nothing to pipeline.
# 16 rows and 32 keys per tile, so that tests on lengths such as 37 or 100 cross several tiles
# and every code path (unmasked tiles, diagonal tiles, the ragged last tile) runs.
INTERPRETER_CONFIG = FlashConfig(16, 32, 4, 1)

_TUNED: dict[tuple, FlashConfig] = {}
_FAILED: dict[tuple, str] = {}  # groups where no candidate ran: why
_LOG: list[dict] = []


def seq_bucket(n: int) -> int:
    """Sequence lengths that share a tuned configuration: the next power of two (at least 64)."""
    return 1 << max(6, math.ceil(math.log2(max(n, 1))))


def candidates(seq_q: int, head_dim: int, dtype: torch.dtype) -> list[FlashConfig]:
    """The configurations worth trying for this problem in the current Triton mode."""
    if triton_mode() == "interpreter":
        return [INTERPRETER_CONFIG]
    if dtype == torch.float32:
        return [FP32_CONFIG]
    # A 128-row block on a 20-token query wastes most of its rows: keep blocks near the query length.
    tall_enough = max(16, 1 << max(0, math.ceil(math.log2(max(seq_q, 1)))))
    kept = [c for c in GPU_CONFIGS if c.block_m <= max(64, tall_enough)]
    if head_dim > 128:  # K/V tiles of 256-wide heads: keep to the smaller tiles
        kept = [c for c in kept if c.block_m * c.block_n <= 64 * 128]
    return kept or [GPU_CONFIGS[-1]]


def _bench_ms(fn: Callable[[], object]) -> float:
    # Shorter than do_bench's defaults (25 ms warm-up, 100 ms of runs): a new problem size then costs
    # a few tenths of a second per configuration, ample for kernels of tens of microseconds and more.
    return float(triton.testing.do_bench(fn, warmup=5, rep=25, return_mode="median"))


def pick_config(
    key: tuple,
    configs: list[FlashConfig],
    launch: Callable[[FlashConfig], None],
    check: Callable[[], str | None] | None = None,
    group: tuple | None = None,
) -> FlashConfig:
    """The configuration to use for `key`: remembered, the only candidate, or the fastest one timed now.

    `launch(config)` runs the kernel once with that configuration; `check()`, called after a
    candidate ran, returns None when its output is right and a reason otherwise. A candidate that
    raises (fails to compile, needs more shared memory than the GPU has) or computes a wrong result
    is logged and skipped; if all fail, RuntimeError lists what was tried. `group` (the key without
    the sequence lengths): once every candidate failed for a group, later keys of it fail at once
    with the same reason instead of compiling everything again.
    """
    if key in _TUNED:
        return _TUNED[key]
    if group is not None and group in _FAILED:
        raise RuntimeError(_FAILED[group])
    if len(configs) == 1:
        _TUNED[key] = configs[0]
        return configs[0]
    best, best_ms, errors = None, math.inf, []
    for cfg in configs:
        try:
            launch(cfg)  # compiles it
            wrong = check() if check is not None else None
            if wrong:
                raise ArithmeticError(wrong)
            ms = _bench_ms(lambda: launch(cfg))
        except Exception as err:  # noqa: BLE001 - one failing candidate must not stop the others
            first_line = str(err).strip().splitlines()[0][:160] if str(err).strip() else ""
            errors.append(f"{cfg}: {type(err).__name__}: {first_line}")
            _LOG.append({"key": str(key), "config": str(cfg), "ms": None, "error": errors[-1]})
            continue
        _LOG.append({"key": str(key), "config": str(cfg), "ms": ms, "error": None})
        if ms < best_ms:
            best, best_ms = cfg, ms
    if best is None:
        reason = "no flash-attention configuration ran here:\n  " + "\n  ".join(errors)
        if group is not None:
            _FAILED[group] = reason
        raise RuntimeError(reason)
    _TUNED[key] = best
    return best


def tuning_log() -> pd.DataFrame:
    """Every configuration the tuner tried in this process: key, config, median ms or the error."""
    return pd.DataFrame(_LOG, columns=["key", "config", "ms", "error"])


def tuned_configs() -> dict[tuple, FlashConfig]:
    """The configuration chosen for each problem key seen in this process (a copy)."""
    return dict(_TUNED)


@functools.cache
def capability_major(device_index: int) -> int:
    return torch.cuda.get_device_capability(device_index)[0]


def config_table() -> pd.DataFrame:
    """The GPU candidates, one row each, with the shared memory their K/V pipeline needs at head dim 128."""
    rows = []
    for c in GPU_CONFIGS:
        kv_bytes = 2 * c.block_n * 128 * 2 * c.num_stages
        rows.append(
            {**c.as_dict(), "kv_smem_kb_at_d128": kv_bytes // 1024, "q_smem_kb_at_d128": c.block_m * 128 * 2 // 1024}
        )
    return pd.DataFrame(rows)
