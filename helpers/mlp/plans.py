"""The GeGLU MLP's plans (which kernels it launches: ``unfused``, ``pointwise-fused`` ...), the bytes and FLOPs
each kernel must move and do once, and the least time a plan can take on given ceilings."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pandas as pd
import torch

from ..checks import positive_int
from ..measure.ceilings import Ceilings
from ..measure.roofline import dtype_size, elementwise_bytes, gemm_bytes, gemm_flops
from ..trace.kernel_names import decode_kernel
from .model import MLPShape


def geglu_bytes(m: int, hidden: int, dtype: torch.dtype | str) -> int:
    """Bytes of `gelu(gate) * up` on [m, hidden]: read gate and up, write the product."""
    return elementwise_bytes(positive_int("m", m) * positive_int("hidden", hidden), dtype, reads=2, writes=1)


def geglu_mlp_flops(m: int, dim: int, hidden: int) -> int:
    """FLOPs of the GeGLU MLP's three GEMMs; the GeLU and product add under 1 % and are left out."""
    m, dim, hidden = positive_int("m", m), positive_int("dim", dim), positive_int("hidden", hidden)
    return 2 * gemm_flops(m, hidden, dim) + gemm_flops(m, dim, hidden)


PLANS: dict[str, str] = {
    "unfused": "gate GEMM, up GEMM, GeLU, mul, down GEMM: gate, up, gelu(gate) and h all go through memory",
    "pointwise-fused": "gate GEMM, up GEMM, one GeGLU kernel, down GEMM: gate and up go through memory",
    "concat-gemm": "one GEMM on [Wg; Wu] writes [M, 2*hidden], one GeGLU kernel reads its halves, down GEMM",
    "gemm-fused-geglu": (
        "GeGLU fused into one of the Inductor GEMM templates (prologue or epilogue): two "
        "[M, hidden] tensors written and read once, no separate pointwise pass"
    ),
    "gemm-epilogue": "one GEMM computes gate and up with the GeGLU in its epilogue, then the down GEMM: only h goes through memory",
}


def _shape_args(shape: MLPShape | None, m: int | None, dim: int | None, hidden: int | None) -> tuple[int, int, int]:
    if shape is not None:
        if not isinstance(shape, MLPShape):
            raise TypeError(f"shape must be a helpers.MLPShape, got {type(shape).__name__}")
        return shape.tokens, shape.dim, shape.hidden
    if m is None or dim is None or hidden is None:
        raise ValueError("give shape=MLPShape(...) or all of m, dim, hidden")
    return m, dim, hidden


def plan_kernels(
    plan: str,
    shape: MLPShape | None = None,
    dtype: torch.dtype | str = torch.bfloat16,
    *,
    m: int | None = None,
    dim: int | None = None,
    hidden: int | None = None,
) -> pd.DataFrame:
    """The kernels of `plan` at a shape with the bytes each must move once and its FLOPs (0 for pointwise work)."""
    if plan not in PLANS:
        raise ValueError(f"unknown plan {plan!r}; plans are {', '.join(PLANS)}")
    M, D, H = _shape_args(shape, m, dim, hidden)
    s = dtype_size(dtype)
    act = M * H * s  # one [M, hidden] tensor
    gate = ("gate GEMM x @ Wg.T", "gemm", gemm_bytes(M, H, D, dtype), gemm_flops(M, H, D))
    up = ("up GEMM x @ Wu.T", "gemm", gemm_bytes(M, H, D, dtype), gemm_flops(M, H, D))
    down = ("down GEMM h @ Wd.T", "gemm", gemm_bytes(M, D, H, dtype), gemm_flops(M, D, H))
    geglu = ("GeGLU gelu(gate) * up", "pointwise", 3 * act, 0)
    rows: list[tuple[str, str, int, int]]
    if plan == "unfused":
        rows = [
            gate,
            up,
            ("GeLU gelu(gate)", "pointwise", 2 * act, 0),
            ("mul gelu(gate) * up", "pointwise", 3 * act, 0),
            down,
        ]
    elif plan == "pointwise-fused":
        rows = [gate, up, geglu, down]
    elif plan == "concat-gemm":
        rows = [
            ("gate+up GEMM x @ [Wg; Wu].T", "gemm", gemm_bytes(M, 2 * H, D, dtype), gemm_flops(M, 2 * H, D)),
            geglu,
            down,
        ]
    elif plan == "gemm-fused-geglu":
        # Drawn as GeGLU in the down GEMM's prologue; an epilogue on the up GEMM moves the same bytes.
        rows = [gate, up, ("down GEMM with GeGLU prologue", "gemm", 2 * act + (H * D + M * D) * s, gemm_flops(M, D, H))]
    else:  # gemm-epilogue
        rows = [
            ("gate+up GEMM with GeGLU epilogue", "gemm", (M * D + 2 * H * D) * s + act, gemm_flops(M, 2 * H, D)),
            down,
        ]
    return pd.DataFrame(rows, columns=["kernel", "role", "bytes", "flops"])


def plan_bytes(plan: str, shape: MLPShape | None = None, dtype: torch.dtype | str = torch.bfloat16, **dims: int) -> int:
    """Total bytes of `plan`'s kernels (see :func:`plan_kernels`)."""
    return int(plan_kernels(plan, shape, dtype, **dims)["bytes"].sum())


def plan_floor_us(
    plan: str, ceilings: Ceilings, shape: MLPShape | None = None, dtype: torch.dtype | str = torch.bfloat16, **dims: int
) -> float:
    """Least time `plan` can take: kernels run one after another, each bounded by memory or compute."""
    if not isinstance(ceilings, Ceilings):
        raise TypeError(f"ceilings must be a helpers.Ceilings, got {type(ceilings).__name__}")
    k = plan_kernels(plan, shape, dtype, **dims)
    mem = k["bytes"] / ceilings.bandwidth_bytes_per_s
    comp = k["flops"] / ceilings.matmul_flop_per_s
    return float(pd.concat([mem, comp], axis=1).max(axis=1).sum() * 1e6)


def min_mlp_bytes(
    shape: MLPShape | None = None,
    dtype: torch.dtype | str = torch.bfloat16,
    *,
    m: int | None = None,
    dim: int | None = None,
    hidden: int | None = None,
) -> int:
    """Bytes no implementation can avoid: read x and the three weights once, write y once."""
    M, D, H = _shape_args(shape, m, dim, hidden)
    return (2 * M * D + 3 * H * D) * dtype_size(dtype)


def mlp_floor_us(shape: MLPShape, dtype: torch.dtype | str, ceilings: Ceilings) -> float:
    """Least time any implementation of the MLP forward can take on `ceilings`' device, in us: the
    larger of its FLOPs at the matmul roof and its unavoidable bytes at the memory roof."""
    if not isinstance(ceilings, Ceilings):
        raise TypeError(f"ceilings must be a helpers.Ceilings, got {type(ceilings).__name__}")
    flops = geglu_mlp_flops(shape.tokens, shape.dim, shape.hidden)
    compute = flops / ceilings.matmul_flop_per_s
    memory = min_mlp_bytes(shape, dtype) / ceilings.bandwidth_bytes_per_s
    return max(compute, memory) * 1e6


# The roles of memory-bound work between the GEMMs (the GeGLU pass, however it is split).
POINTWISE_ROLES = frozenset({"geglu", "gelu", "mul", "pointwise"})
# Tensors of [tokens, hidden] each GeGLU kernel reads + writes: a fused kernel reads gate and up and
# writes h (3); eager's gelu reads gate and writes gelu(gate) (2), its mul reads that and up and writes h (3).
TENSORS_MOVED = {"geglu": 3, "gelu": 2, "mul": 3}


def kernel_role(name: str) -> str:
    """What a kernel does in a GeGLU MLP, from its name: gemm, geglu (gelu(gate) * up in one kernel), gelu or mul
    (eager's pair), pointwise, memset, copy or other."""
    d = decode_kernel(name)
    family = d["family"]
    if family in ("gemm", "memset", "copy"):
        return family
    if family == "fused" and {"gelu", "mul"} <= set(d.get("fused_ops") or []):
        return "geglu"
    if family == "elementwise" and d.get("op") in ("gelu", "mul"):
        return str(d["op"])
    if family in ("elementwise", "fused", "reduction"):
        return "pointwise"
    return "other"


def infer_plan(kernel_names: Iterable[str]) -> str | None:
    """The plan one forward's kernels follow (None when unclear). A GEMM template's name lists the ops Inductor
    traced into it without proving it computed them: ``gemm-fused-geglu`` only when no separate GeGLU pass runs."""
    names = list(kernel_names)
    decoded = {n: decode_kernel(n) for n in set(names)}
    roles = [kernel_role(n) for n in names]
    gemms = roles.count("gemm")
    if any(decoded[n]["source"] == "course-triton" and decoded[n]["family"] == "gemm" for n in names):
        return "gemm-epilogue"
    passes = roles.count("geglu")
    if passes == 0 and "gelu" in roles and "mul" in roles:
        return "unfused"
    if passes == 0 and any(
        decoded[n]["family"] == "gemm" and "gelu" in (decoded[n].get("fused_ops") or []) for n in names
    ):
        return "gemm-fused-geglu"
    if passes >= 1:
        return "concat-gemm" if gemms == 2 else "pointwise-fused" if gemms == 3 else None
    return None


def plans_frame(
    shape: MLPShape, dtype: torch.dtype | str, ceilings: Ceilings, plans: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """One row per plan: kernels, bytes (MB), GFLOP, arithmetic intensity, floor (us)."""
    rows = []
    for plan in plans or PLANS:
        k = plan_kernels(plan, shape, dtype)
        rows.append(
            {
                "plan": plan,
                "kernels": len(k),
                "bytes_mb": k["bytes"].sum() / 1e6,
                "gflop": k["flops"].sum() / 1e9,
                "flop_per_byte": k["flops"].sum() / k["bytes"].sum(),
                "floor_us": plan_floor_us(plan, ceilings, shape, dtype),
                "what": PLANS[plan],
            }
        )
    return pd.DataFrame(rows)
