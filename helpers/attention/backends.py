"""PyTorch's SDPA backends: force one, ask which run here and why not (SDPA picks one per call, so forcing
each in turn is how the lesson compares them)."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator

import pandas as pd
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from ..measure.device import synchronize

BACKENDS: dict[str, str] = {
    "math": "MATH",
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
}
# The ATen operator each backend appears as, directly under aten::scaled_dot_product_attention.
SDPA_OPS: dict[str, str] = {
    "aten::_scaled_dot_product_attention_math": "math",
    "aten::_scaled_dot_product_flash_attention": "flash",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "flash",
    "aten::_scaled_dot_product_efficient_attention": "efficient",
    "aten::_scaled_dot_product_cudnn_attention": "cudnn",
}


def sdpa_backend(name: str) -> SDPBackend:
    """The ``SDPBackend`` member for a course name: math, flash, efficient or cudnn."""
    if name not in BACKENDS:
        raise ValueError(f"backend must be one of {sorted(BACKENDS)}, got {name!r}")
    return getattr(SDPBackend, BACKENDS[name])


@contextlib.contextmanager
def force_backend(name: str) -> Iterator[None]:
    """``with force_backend("flash"): ...``: SDPA may use that backend only (``sdpa_kernel``)."""
    with sdpa_kernel(sdpa_backend(name)):
        yield


def sdpa_fn(backend: str | None = None, causal: bool = True) -> Callable[..., torch.Tensor]:
    """``fn(q, k, v)``: ``F.scaled_dot_product_attention`` forced to `backend` (None: PyTorch's choice)."""
    if backend is not None:
        sdpa_backend(backend)  # fail early on a bad name

    def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        gqa = {"enable_gqa": True} if k.shape[1] != q.shape[1] else {}
        with force_backend(backend) if backend else contextlib.nullcontext():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa)

    sdpa.__name__ = f"sdpa_{backend or 'auto'}"
    return sdpa


def _ops_under_sdpa(fn: Callable, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> list[str]:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn(q, k, v)
        synchronize(q.device)
    return [e.key for e in prof.key_averages() if e.key in SDPA_OPS]


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return lines[0][:300] if lines else ""


def sdpa_backends(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True) -> pd.DataFrame:
    """Try every SDPA backend on these inputs: whether it ran, its ATen op, PyTorch's own pick, and why not."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise TypeError(f"{name} must be a 4-D tensor [batch, heads, seq, head_dim], got {type(t).__name__}")
    rows = []
    with torch.no_grad():
        auto_ops = _ops_under_sdpa(sdpa_fn(None, causal), q, k, v)
        chosen = SDPA_OPS[auto_ops[0]] if auto_ops else None
        for name in BACKENDS:
            fn = sdpa_fn(name, causal)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    ops = _ops_under_sdpa(fn, q, k, v)
                    error = None
                except RuntimeError as err:
                    ops, error = [], _first_line(str(err))
            said = [_first_line(str(w.message)) for w in caught]
            said = [s for s in said if s and "not used because" not in s] or said
            reason = ""
            if error is not None:
                where = f"{q.device.type} {str(q.dtype).removeprefix('torch.')} inputs of this shape"
                said_here = "; ".join(dict.fromkeys(said)) if said else "no reason given"
                reason = f"no {name} kernel ran for {where}: PyTorch's warnings: {said_here}; its error: {error}"
            rows.append(
                {
                    "backend": name,
                    "available": error is None,
                    "aten_op": ops[0] if ops else None,
                    "chosen": name == chosen,
                    "reason": reason,
                }
            )
    return pd.DataFrame(rows, columns=["backend", "available", "aten_op", "chosen", "reason"])


def backend_in_trace(ops: pd.DataFrame) -> list[str]:
    """The SDPA backends whose operators appear in an ops table (``Trace.ops()``), in first-seen order."""
    if not isinstance(ops, pd.DataFrame) or "name" not in ops.columns:
        raise TypeError("pass trace.ops(): a DataFrame with a 'name' column")
    return list(dict.fromkeys(SDPA_OPS[n] for n in ops["name"] if n in SDPA_OPS))
