"""The workloads the course profiles, defined once for notebooks, tests and the recording script, so a live
profile and its reference trace are comparable (GPU: the blog's shapes in bf16; CPU: small float32)."""

from __future__ import annotations

import torch
from torch import nn

from ..measure.workload import Built, default_dtype
from ..measure.workload import workload_device as _resolve
from .model import BLOG_SHAPE, CPU_SHAPE, MLPShape, SimpleGeGLUMLP


def default_shape(device: torch.device) -> MLPShape:
    """The blog's shape on a GPU, the small CPU shape elsewhere."""
    return BLOG_SHAPE if device.type == "cuda" else CPU_SHAPE


def linear_layer(
    device=None,
    dtype=None,
    bias: bool = True,
    in_features: int = 32,
    out_features: int = 64,
    rows: int = 1024,
    seed: int = 0,
) -> Built:
    """The blog's single ``nn.Linear(32, 64)`` on a [1024, 32] input."""
    dev = _resolve(device)
    dt = dtype or default_dtype(dev)
    torch.manual_seed(seed)
    layer = nn.Linear(in_features, out_features, bias=bias).to(dev, dt)
    x = torch.randn(rows, in_features, device=dev, dtype=dt)
    return Built(
        "linear_bias" if bias else "linear_nobias",
        layer,
        (x,),
        dev,
        dt,
        None,
        {"in_features": in_features, "out_features": out_features, "rows": rows, "bias": bias},
    )


def matmul_then_add(
    device=None, dtype=None, in_features: int = 32, out_features: int = 64, rows: int = 1024, seed: int = 0
) -> Built:
    """``x @ W.T + b`` written by hand: the two-kernel version of a biased Linear."""
    lin = linear_layer(device, dtype, True, in_features, out_features, rows, seed)
    w, b = lin.fn.weight.detach(), lin.fn.bias.detach()

    def matmul_add(x: torch.Tensor) -> torch.Tensor:
        return x @ w.T + b

    return Built("matmul_add", matmul_add, lin.inputs, lin.device, lin.dtype, None, lin.details)


def geglu_mlp(device=None, dtype=None, shape: MLPShape | None = None, seed: int = 0) -> Built:
    """The blog's ``SimpleGeGLUMLP`` with input ``[batch, seq, dim]``."""
    dev = _resolve(device)
    dt = dtype or default_dtype(dev)
    shp = shape or default_shape(dev)
    torch.manual_seed(seed)
    model = SimpleGeGLUMLP(shp.dim, shp.hidden).to(dev, dt).eval()
    x = torch.randn(shp.batch, shp.seq, shp.dim, device=dev, dtype=dt)
    return Built(
        "mlp_eager",
        model,
        (x,),
        dev,
        dt,
        shp,
        {"batch": shp.batch, "seq": shp.seq, "dim": shp.dim, "hidden": shp.hidden},
    )


def compiled(built: Built, mode: str | None = None, dynamic: bool | None = None, name: str | None = None) -> Built:
    """The same workload under ``torch.compile`` (compiles lazily on the first call)."""
    fn = torch.compile(built.fn, mode=mode, dynamic=dynamic)
    return Built(
        name or f"{built.name}_compiled",
        fn,
        built.inputs,
        built.device,
        built.dtype,
        built.shape,
        {**built.details, "compile_mode": mode or "default", "dynamic": dynamic},
    )


def views_then_copies(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Read a 2-D tensor through five metadata-only views, then make two real copies (a transposed tensor cannot
    be flattened by changing strides alone)."""
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or not x.is_contiguous():
        raise ValueError("views_then_copies needs a contiguous 2-D tensor")
    rows, cols = x.shape
    x.t()
    x.transpose(0, 1)
    x.view(-1)
    x.reshape(cols, rows)
    xt = x.as_strided((cols, rows), (1, cols))
    return xt.contiguous(), xt.flatten()


def views_and_copies(device=None, dtype=None, rows: int | None = None, cols: int | None = None, seed: int = 0) -> Built:
    """:func:`views_then_copies` on a [rows, cols] tensor (notebook 01): the MLP's activations on a GPU, on a CPU a
    tensor large enough that a copy clearly costs more than a view."""
    dev = _resolve(device)
    dt = dtype or default_dtype(dev)
    if rows is None or cols is None:
        shp = default_shape(dev)
        default_rows, default_cols = (shp.tokens, shp.dim) if dev.type == "cuda" else (1024, 1024)
        rows = default_rows if rows is None else rows
        cols = default_cols if cols is None else cols
    for name, value in (("rows", rows), ("cols", cols)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    torch.manual_seed(seed)
    x = torch.randn(rows, cols, device=dev, dtype=dt)
    return Built("views_copy", views_then_copies, (x,), dev, dt, None, {"rows": rows, "cols": cols})


def _transpose_contiguous(x: torch.Tensor) -> torch.Tensor:
    return x.t().contiguous()


# A [rows, cols] bf16 tensor several times larger than a GPU's L2 cache (60 MB on an H200).
L2_BEATING_ROWS, L2_BEATING_COLS = 32768, 2048


def transpose_copies(
    device=None, dtype=None, rows: int | None = None, cols: int | None = None, seed: int = 0, tiled: bool | None = None
) -> Built:
    """Three copies of one tensor to compare their bandwidth (notebook 01): a clone, a transposed copy, and with
    `tiled` (GPU default) the transpose compiled into a tiled kernel. The GPU default is sized above the L2
    cache of current data-centre GPUs, so every copy runs from DRAM.
    """
    dev = _resolve(device)
    if dev.type == "cuda" and rows is None and cols is None:
        rows, cols = L2_BEATING_ROWS, L2_BEATING_COLS
    base = views_and_copies(dev, dtype, rows, cols, seed)
    use_tiled = base.device.type == "cuda" if tiled is None else bool(tiled)
    transposed = torch.compile(_transpose_contiguous, dynamic=False) if use_tiled else None

    def copies(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = (x.clone(), x.t().contiguous())
        return out + (transposed(x),) if transposed is not None else out

    return Built(
        "transpose_copies", copies, base.inputs, base.device, base.dtype, None, {**base.details, "tiled": use_tiled}
    )


def geglu_mlp_hand_tuned(
    device=None,
    dtype=None,
    shape: MLPShape | None = None,
    seed: int = 0,
    sources: tuple[str, ...] = ("hub", "cache", "package", "local"),
) -> Built:
    """:func:`geglu_mlp`'s model with a hand-tuned GeGLU layer from :func:`helpers.mlp.hub.load_geglu_mlp`
    (notebook 05); KernelLoadError when no source works here."""
    from .hub import load_geglu_mlp

    eager = geglu_mlp(device, dtype, shape, seed)
    loaded = load_geglu_mlp(sources=sources, device=eager.device)
    layer = loaded.from_mlp(eager.fn)
    name = "mlp_course_kernel" if loaded.source == "local" else "mlp_liger"
    return Built(
        name,
        layer,
        eager.inputs,
        eager.device,
        eager.dtype,
        eager.shape,
        {**eager.details, "kernel_source": loaded.source, "kernel_origin": loaded.origin},
    )
