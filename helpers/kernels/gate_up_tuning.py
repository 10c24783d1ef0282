"""Tile configurations of the gate+up kernels: the caller's, else the nearest tuned entry, else the default
that fills the SMs best (a persistent kernel runs ``ceil(tiles / SMs)`` waves, so small M wants small tiles)."""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import triton

from .launch_plans import config_label

__all__ = [
    "KINDS", "gate_up_config", "tma_config", "config_to_dict", "config_from_dict", "default_config", "fallback_chain",
    "table_config", "load_table", "config_table", "TABLE_PATH", "TABLE_ENV"
]  # fmt: skip

KINDS = {
    "forward": "gate+up GEMM with a GeGLU epilogue (inference; training in recompute mode)",
    "forward_gu": "the same, also storing the gate/up pre-activations (training in save mode)",
    "backward": "dh = dy @ W_down with a GeGLU-backward epilogue (training)",
}
TABLE_PATH = Path(__file__).with_name("gate_up_table.json")
TABLE_ENV = "COURSE_GATE_UP_TABLE"
TABLE_SCHEMA = "course-gate-up-table/1"
# Table entries farther than this (sum of |log2| ratios of dim, columns and M bucket) are not used.
MAX_TABLE_DISTANCE = 3.0


def gate_up_config(
    bm: int, bn: int, bk: int, stages: int, warps: int, group_m: int = 8, **extra: object
) -> triton.Config:
    """A ``triton.Config`` for the gate+up kernels (BLOCK_N counts the GEMM's output columns)."""
    return triton.Config(
        {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group_m, **extra},
        num_stages=stages,
        num_warps=warps,
    )


def config_to_dict(cfg: triton.Config) -> dict[str, Any]:
    """A JSON-ready dict of a configuration (kwargs plus num_warps and num_stages)."""
    return {**cfg.kwargs, "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}


def config_from_dict(d: Mapping[str, Any]) -> triton.Config:
    """Inverse of :func:`config_to_dict` (ValueError when a block size is missing)."""
    d = dict(d)
    missing = [k for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K") if k not in d]
    if missing:
        raise ValueError(f"a gate+up configuration needs {missing}, got {sorted(d)}")
    warps, stages = int(d.pop("num_warps", 4)), int(d.pop("num_stages", 3))
    return triton.Config(d, num_warps=warps, num_stages=stages)


def tma_config(bm: int, bn: int, bk: int, stages: int, warps: int, **extra: object) -> triton.Config:
    """A configuration of the TMA (tensor-descriptor) path; flattened loops unless ``FLATTEN=False``."""
    return gate_up_config(bm, bn, bk, stages, warps, FLATTEN=extra.pop("FLATTEN", True), **extra)


# Defaults when the table has nothing near: (configuration, relative efficiency of its tile when
# the GPU is full). The efficiencies are rough, read from the tuning sweep's results
# (benchmarks/results/h200_gate_up_tuning.json); they only rank tiles whose wave counts differ.
_DEFAULTS: dict[tuple[str, str], list[tuple[triton.Config, float]]] = {
    ("tma", "forward"): [
        (tma_config(128, 256, 64, 3, 8), 1.0),
        (tma_config(128, 128, 64, 4, 8), 0.9),
        (tma_config(64, 256, 64, 4, 4), 0.85),
        (tma_config(64, 128, 64, 4, 4), 0.8),
        (tma_config(64, 64, 64, 4, 4), 0.65),
    ],
    ("tma", "forward_gu"): [
        (tma_config(128, 128, 64, 4, 8), 0.95),
        (tma_config(128, 256, 64, 2, 8), 0.9),
        (tma_config(64, 128, 64, 4, 4), 0.8),
        (tma_config(64, 64, 64, 4, 4), 0.65),
    ],
    ("tma", "backward"): [
        (tma_config(128, 64, 64, 4, 8), 0.95),
        (tma_config(64, 128, 64, 4, 4), 0.9),
        (tma_config(128, 128, 64, 2, 8), 0.9),
        (tma_config(64, 64, 64, 4, 4), 0.7),
    ],
    ("pointer", "forward"): [
        (gate_up_config(128, 128, 64, 3, 8), 1.0),
        (gate_up_config(64, 128, 32, 4, 4), 0.8),
        (gate_up_config(64, 64, 32, 4, 4), 0.6),
    ],
    ("pointer", "backward"): [
        (gate_up_config(128, 64, 64, 3, 8), 1.0),
        (gate_up_config(64, 64, 32, 4, 4), 0.7),
    ],
}
_DEFAULTS[("pointer", "forward_gu")] = _DEFAULTS[("pointer", "forward")]

# fp32 inputs use IEEE fp32 dots, i.e. FMA instructions, not tensor cores: that path is for exact
# results (tests, references), not speed; large tiles would only make it slow to compile.
FP32_CONFIG = gate_up_config(64, 64, 32, 2, 4)
# The interpreter runs programs one after another in Python/numpy: few, mid-sized programs.
INTERPRETER_CONFIG = gate_up_config(64, 64, 32, 1, 4, group_m=2)
# Persistent programs in the interpreter: a small number that does not divide the tile count of
# the test shapes, so the tests exercise programs that own different numbers of tiles.
INTERPRETER_PROGRAMS = 3


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _check_kind_path(kind: str, path: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {list(KINDS)}, got {kind!r}")
    if path not in ("tma", "pointer"):
        raise ValueError(f"path must be 'tma' or 'pointer', got {path!r}")


def _ranked(kind: str, path: str, m: int, n: int, sms: int) -> list[triton.Config]:
    """The default tiles, best first: efficiency x how full the last wave of tiles keeps the SMs."""
    _check_kind_path(kind, path)
    scored = []
    for order, (cfg, eff) in enumerate(_DEFAULTS[(path, kind)]):
        tiles = _cdiv(m, cfg.kwargs["BLOCK_M"]) * _cdiv(n, cfg.kwargs["BLOCK_N"])
        fill = tiles / (_cdiv(tiles, sms) * sms)
        scored.append((-eff * fill, order, cfg))
    return [cfg for _, _, cfg in sorted(scored, key=lambda s: (s[0], s[1]))]


def default_config(kind: str, path: str, m: int, n: int, sms: int) -> triton.Config:
    """The default tile for an ``[m, n]`` output (`n`: the kernel's output columns) on a GPU with `sms` SMs."""
    return _ranked(kind, path, m, n, sms)[0]


def fallback_chain(kind: str, path: str, m: int, n: int, sms: int, first: triton.Config) -> list[triton.Config]:
    """`first`, then the defaults in rank order: what a launcher tries until one runs here."""
    rest = [c for c in _ranked(kind, path, m, n, sms) if config_to_dict(c) != config_to_dict(first)]
    return [first, *rest]


# The tuned table


def _table_path() -> Path:
    return Path(os.environ.get(TABLE_ENV) or TABLE_PATH)


@functools.lru_cache(maxsize=8)
def _read_table(path: str, mtime: float) -> dict[str, Any]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if data.get("schema") != TABLE_SCHEMA or not isinstance(data.get("entries"), list):
        raise ValueError(f"{path} is not a {TABLE_SCHEMA} table; write one with benchmarks/geglu_kernels.py")
    return data


def load_table(path: str | os.PathLike | None = None) -> dict[str, Any] | None:
    """The tuned table (a dict with ``device``, ``capability``, ``provenance``, ``entries``), or None
    when the file does not exist (no GPU run recorded yet: the defaults apply)."""
    p = Path(path) if path is not None else _table_path()
    if not p.is_file():
        return None
    return _read_table(str(p), p.stat().st_mtime)


def _m_bucket(m: int) -> int:
    """M rounded up to a power of two (tiles and waves change little within a bucket)."""
    return 1 << max(int(m) - 1, 0).bit_length()


def _itemsize(dtype: torch.dtype | str) -> int:
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype.removeprefix("torch."))
    return torch.empty((), dtype=dtype).element_size()


def table_config(
    kind: str,
    m: int,
    n: int,
    k: int,
    dtype: torch.dtype | str,
    capability: str,
    table: Mapping[str, Any] | None = None,
) -> tuple[triton.Config, dict[str, Any]] | None:
    """The nearest tuned configuration (same kind, element size and compute capability, within
    :data:`MAX_TABLE_DISTANCE` in log2 sizes) with its table entry, or None."""
    table = load_table() if table is None else table
    if not table or str(table.get("capability")) != str(capability):
        return None
    size = _itemsize(dtype)
    best, best_d = None, math.inf
    for e in table["entries"]:
        if e.get("kind") != kind or _itemsize(e["dtype"]) != size or "config" not in e:
            continue
        d = abs(math.log2(k / e["k"])) + abs(math.log2(n / e["n"])) + abs(math.log2(_m_bucket(m) / _m_bucket(e["m"])))
        if d < best_d:
            best, best_d = e, d
    if best is None or best_d > MAX_TABLE_DISTANCE:
        return None
    return config_from_dict(best["config"]), {**best, "distance": best_d}


def config_table(table: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """The tuned table as a DataFrame (one row per tuned problem), or the default tiles when there is
    no table yet (column ``source`` says which). Used by notebook 06."""
    table = load_table() if table is None else table
    if table:
        rows = [
            {
                "source": f"tuned on {table.get('device')}",
                "kind": e["kind"],
                "dtype": e["dtype"],
                "dim": e.get("dim"),
                "hidden": e.get("hidden"),
                "m": e["m"],
                "config": config_label(config_from_dict(e["config"])),
                "us": e.get("us"),
                "reference_us": e.get("reference_us"),
            }
            for e in table["entries"]
        ]
        return pd.DataFrame(rows)
    rows = [
        {
            "source": "default (no tuned table)",
            "kind": kind,
            "path": path,
            "config": config_label(cfg),
            "efficiency": eff,
        }
        for (path, kind), cfgs in _DEFAULTS.items()
        for cfg, eff in cfgs
    ]
    return pd.DataFrame(rows)
