"""The attention workloads of notebook 07, the benchmark and the recording script, defined once so they
measure the same thing."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..measure.workload import Built, default_dtype, workload_device
from .backends import sdpa_fn
from .costs import AttentionShape
from .flex import flex_fn
from .model import AttentionConfig, CausalSelfAttention, future_mask, manual_attention

GPU_SHAPE = AttentionShape(batch=4, heads=16, seq=2048, head_dim=128)
CPU_SHAPE = AttentionShape(batch=2, heads=4, seq=256, head_dim=64)
SLIDING_WINDOW = 256  # keys each query sees under the sliding-window mask


def default_shape(device: torch.device) -> AttentionShape:
    """The GPU shape on a GPU, the small CPU shape elsewhere."""
    return GPU_SHAPE if device.type == "cuda" else CPU_SHAPE


def block_config(shape: AttentionShape) -> AttentionConfig:
    """An :class:`AttentionConfig` with the heads and head dim of `shape` (hidden = heads x head_dim)."""
    return AttentionConfig(
        hidden_size=shape.hidden,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv,
        head_dim=shape.head_dim,
        max_position_embeddings=max(4096, shape.keys),
    )


def _setup(device, dtype, shape) -> tuple[torch.device, torch.dtype, AttentionShape]:
    dev = workload_device(device)
    return dev, dtype or default_dtype(dev), shape or default_shape(dev)


def attention_inputs(
    device=None, dtype=None, shape: AttentionShape | None = None, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random q, k and v drawn on the device itself (long inputs take milliseconds there), reproducible per seed."""
    dev, dt, shp = _setup(device, dtype, shape)
    g = torch.Generator(device=dev).manual_seed(seed)
    q = torch.randn(shp.batch, shp.heads, shp.seq, shp.head_dim, generator=g, device=dev)
    k = torch.randn(shp.batch, shp.kv, shp.keys, shp.head_dim, generator=g, device=dev)
    v = torch.randn(shp.batch, shp.kv, shp.keys, shp.head_dim, generator=g, device=dev)
    return q.to(dt), k.to(dt), v.to(dt)


def _details(shp: AttentionShape, **extra) -> dict:
    return dict(batch=shp.batch, heads=shp.heads, kv_heads=shp.kv, seq=shp.seq, head_dim=shp.head_dim, **extra)


def attention_block(
    device=None,
    dtype=None,
    shape: AttentionShape | None = None,
    fused_qkv: bool = False,
    attn_impl: str = "sdpa",
    seed: int = 0,
) -> Built:
    """:class:`CausalSelfAttention` (eval mode) on ``x`` [batch, seq, heads x head_dim]."""
    dev, dt, shp = _setup(device, dtype, shape)
    torch.manual_seed(seed)
    block = CausalSelfAttention(block_config(shp), fused_qkv=False, attn_impl=attn_impl).to(dev, dt).eval()
    if fused_qkv:
        block = block.with_fused_qkv()
    x = torch.randn(shp.batch, shp.seq, shp.hidden, generator=torch.Generator().manual_seed(seed)).to(dev, dt)
    name = "attention_block" + ("_fused_qkv" if fused_qkv else "") + ("" if attn_impl == "sdpa" else f"_{attn_impl}")
    return Built(name, block, (x,), dev, dt, shp, _details(shp, fused_qkv=fused_qkv, attn_impl=attn_impl))


def sdpa(
    device=None, dtype=None, shape: AttentionShape | None = None, backend: str | None = None, seed: int = 0
) -> Built:
    """Causal ``F.scaled_dot_product_attention``, forced to `backend` (None: PyTorch's choice)."""
    dev, dt, shp = _setup(device, dtype, shape)
    name = f"attention_sdpa_{backend or 'auto'}"
    return Built(
        name, sdpa_fn(backend), attention_inputs(dev, dt, shp, seed), dev, dt, shp, _details(shp, backend=backend)
    )


def manual(device=None, dtype=None, shape: AttentionShape | None = None, seed: int = 0) -> Built:
    """:func:`manual_attention` (causal) with its mask built once, as a module would keep it."""
    dev, dt, shp = _setup(device, dtype, shape)
    future = future_mask(shp.seq, shp.keys, dev)

    def hand_written(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return manual_attention(q, k, v, causal=True, mask=future)

    return Built("attention_manual", hand_written, attention_inputs(dev, dt, shp, seed), dev, dt, shp, _details(shp))


def manual_compiled(device=None, dtype=None, shape: AttentionShape | None = None, seed: int = 0) -> Built:
    """:func:`manual` under ``torch.compile`` (compiles on the first call)."""
    built = manual(device, dtype, shape, seed)
    fn = torch.compile(built.fn)
    return Built("attention_manual_compiled", fn, built.inputs, built.device, built.dtype, built.shape, built.details)


def flex(
    device=None,
    dtype=None,
    shape: AttentionShape | None = None,
    mask: str = "causal",
    window: int = SLIDING_WINDOW,
    seed: int = 0,
) -> Built:
    """Compiled FlexAttention with a causal or sliding-window mask (compiles on the first call)."""
    dev, dt, shp = _setup(device, dtype, shape)
    fn = flex_fn(mask, window if mask == "sliding_window" else None)
    extra = {"mask": mask} | ({"window": window} if mask == "sliding_window" else {})
    return Built(
        f"attention_flex_{mask}", fn, attention_inputs(dev, dt, shp, seed), dev, dt, shp, _details(shp, **extra)
    )


def course_kernel(device=None, dtype=None, shape: AttentionShape | None = None, seed: int = 0) -> Built:
    """The course's Triton flash-attention kernel (compiled on a GPU, interpreted on a CPU: keep shapes small)."""
    from ..kernels.flash_attention import CourseFlashAttention  # Triton only when asked for

    dev, dt, shp = _setup(device, dtype, shape)
    fn = CourseFlashAttention(causal=True)
    return Built("attention_course", fn, attention_inputs(dev, dt, shp, seed), dev, dt, shp, _details(shp))


# The GPU views of notebook 07, by name. scripts/record_reference_traces.py records each as
# traces/h200_<name>.json.gz; on a GPU the notebook profiles the same workload live.
GPU_VIEWS: dict[str, Callable[[torch.device], Built]] = {
    "attention_block": lambda d: attention_block(d),
    "attention_block_fused_qkv": lambda d: attention_block(d, fused_qkv=True),
    "attention_manual": lambda d: manual(d),
    "attention_sdpa_math": lambda d: sdpa(d, backend="math"),
    "attention_sdpa_flash": lambda d: sdpa(d, backend="flash"),
    "attention_sdpa_efficient": lambda d: sdpa(d, backend="efficient"),
    "attention_sdpa_cudnn": lambda d: sdpa(d, backend="cudnn"),
    "attention_manual_compiled": lambda d: manual_compiled(d),
    "attention_flex_causal": lambda d: flex(d, mask="causal"),
    "attention_flex_sliding_window": lambda d: flex(d, mask="sliding_window"),
    "attention_course": lambda d: course_kernel(d),
}
