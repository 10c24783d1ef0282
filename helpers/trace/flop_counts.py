"""FLOPs of an operator from its recorded input shapes (no torch), a multiply-add counting 2;
:data:`BASIS` says what each count assumes."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from functools import lru_cache


@lru_cache(maxsize=4096)
def parse_shapes(text: str) -> tuple | None:
    """'[[8192, 768], [768, 3072]]' -> ((8192, 768), (768, 3072)); None when not a list of shapes."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, list):
        return None
    out = []
    for item in value:
        if isinstance(item, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in item):
            out.append(tuple(item))
        else:
            out.append(None)
    return tuple(out)


def _prod(values) -> int:
    return math.prod(int(v) for v in values)


def _mm(s):  # (a[M, K], b[K, N])
    (m, k), (_, n) = s[0], s[1]
    return 2 * m * n * k


def _addmm(s):  # (bias, a[M, K], b[K, N])
    return _mm(s[1:3])


def _bmm(s):  # (a[B, M, K], b[B, K, N])
    (b, m, k), (_, _, n) = s[0], s[1]
    return 2 * b * m * n * k


def grouped_mm_flops(a: tuple, b: tuple) -> tuple[int, str]:
    """FLOPs of ``torch._grouped_mm`` and its scaled forms, and the layout assumed: only the count of the offsets
    is recorded, so every row of the jagged dimension counts (an upper bound)."""
    if len(a) == 2 and len(b) == 3:  # MoE forward: A [M_total, K] split by offs over M, B [G, K, N]
        (m, k), (_g, k2, n) = a, b
        basis = "2d x 3d: A [M_total, K] split over G groups by offs, B [G, K, N]: 2*M_total*N*K (all M_total rows)"
    elif len(a) == 3 and len(b) == 3:  # batched: one product per group
        (g, m, k), (g2, k2, n) = a, b
        if g != g2:
            raise ValueError("group counts differ")
        return 2 * g * m * n * k, "3d x 3d: [G, M, K] x [G, K, N]: 2*G*M*N*K (no offs)"
    elif len(a) == 2 and len(b) == 2:  # MoE weight gradient: offs splits K, output [G, M, N]
        (m, k), (k2, n) = a, b
        basis = "2d x 2d: offs splits K: A [M, K_total], B [K_total, N], out [G, M, N]: 2*M*N*K_total (all K_total)"
    elif len(a) == 3 and len(b) == 2:  # offs splits N, output [M, N_total]
        (_g, m, k), (k2, n) = a, b
        basis = "3d x 2d: offs splits N: A [G, M, K], B [K, N_total], out [M, N_total]: 2*M*N_total*K (all N_total)"
    else:
        raise ValueError("grouped GEMM operands must be 2-D or 3-D")
    if k != k2:
        raise ValueError("inner dimensions differ")
    return 2 * m * n * k, basis


def _grouped(s):  # (a, b, ...): the two operands lead for every grouped form
    return grouped_mm_flops(s[0], s[1])


def _baddbmm(s):
    return _bmm(s[1:3])


def _matmul(s):
    a, b = s[0], s[1]
    if len(a) == 1 and len(b) == 1:
        return 2 * a[0]
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    m, k, n = a2[-2], a2[-1], b2[-1]
    batch_a, batch_b = a2[:-2], b2[:-2]
    width = max(len(batch_a), len(batch_b))
    batch_a = (1,) * (width - len(batch_a)) + tuple(batch_a)
    batch_b = (1,) * (width - len(batch_b)) + tuple(batch_b)
    return 2 * _prod(max(x, y) for x, y in zip(batch_a, batch_b)) * m * n * k


def _linear(s):  # (x[..., K], w[N, K], bias)
    x, w = s[0], s[1]
    return 2 * _prod(x[:-1]) * x[-1] * w[0]


def _mv(s):  # (A[M, N], x[N])
    m, n = s[0]
    return 2 * m * n


def _addmv(s):
    return _mv(s[1:3])


def _dot(s):
    return 2 * s[0][0]


def _sdpa(s, layout: str = "BHLE", backward: bool = False):
    q, k, v = (s[1], s[2], s[3]) if backward else (s[0], s[1], s[2])
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        raise ValueError("not 4-d")
    if layout == "BHLE":
        b, h, seq_q, e = q
        seq_k, ev = k[2], v[3]
    else:  # BLHE
        b, seq_q, h, e = q
        seq_k, ev = k[1], v[3]
    forward = 2 * b * h * seq_q * seq_k * (e + ev)
    return forward * 5 // 2 if backward else forward


def _conv_backward(s):  # (grad_out[N, O, *out], input, weight[O, C/g, *kernel], ...)
    grad, weight = s[0], s[2]
    return 2 * 2 * grad[0] * grad[1] * _prod(grad[2:]) * weight[1] * _prod(weight[2:])  # dgrad + wgrad


FORMULAS: dict[str, tuple[str, Callable]] = {
    "mm": ("gemm", _mm),
    "addmm": ("gemm", _addmm),
    "_addmm_activation": ("gemm", _addmm),
    "_scaled_mm": ("gemm", _mm),
    "_scaled_mm_v2": ("gemm", _mm),
    "_int_mm": ("gemm", _mm),
    "_grouped_mm": ("gemm", _grouped),
    "_scaled_grouped_mm": ("gemm", _grouped),
    "_scaled_grouped_mm_v2": ("gemm", _grouped),
    "bmm": ("gemm", _bmm),
    "baddbmm": ("gemm", _baddbmm),
    "matmul": ("gemm", _matmul),
    "linear": ("gemm", _linear),
    "mv": ("gemm", _mv),
    "addmv": ("gemm", _addmv),
    "dot": ("gemm", _dot),
    "scaled_dot_product_attention": ("attention", _sdpa),
    "_scaled_dot_product_flash_attention": ("attention", _sdpa),
    "_scaled_dot_product_efficient_attention": ("attention", _sdpa),
    "_scaled_dot_product_cudnn_attention": ("attention", _sdpa),
    "_scaled_dot_product_flash_attention_for_cpu": ("attention", _sdpa),
    "_flash_attention_forward": ("attention", lambda s: _sdpa(s, "BLHE")),
    "_efficient_attention_forward": ("attention", lambda s: _sdpa(s, "BLHE")),
    "_scaled_dot_product_flash_attention_backward": ("attention", lambda s: _sdpa(s, backward=True)),
    "_scaled_dot_product_efficient_attention_backward": ("attention", lambda s: _sdpa(s, backward=True)),
    "_scaled_dot_product_cudnn_attention_backward": ("attention", lambda s: _sdpa(s, backward=True)),
    "_flash_attention_backward": ("attention", lambda s: _sdpa(s, "BLHE", backward=True)),
    "_efficient_attention_backward": ("attention", lambda s: _sdpa(s, "BLHE", backward=True)),
    "convolution_backward": ("convolution", _conv_backward),
}
_GEMM_BASIS = "2*M*N*K"
BASIS: dict[str, str] = {
    "mm": _GEMM_BASIS,
    "addmm": _GEMM_BASIS + " (the bias add not counted)",
    "_addmm_activation": _GEMM_BASIS + " (bias and activation not counted)",
    "_scaled_mm": _GEMM_BASIS + ": A [M, K] x B [K, N]; scaling and bias not counted",
    "_scaled_mm_v2": _GEMM_BASIS + ": A [M, K] x B [K, N]; scaling and bias not counted",
    "_int_mm": _GEMM_BASIS + " (integer operations)",
    "bmm": "2*B*M*N*K",
    "baddbmm": "2*B*M*N*K (the add not counted)",
    "matmul": "2*M*N*K x broadcast batch",
    "linear": "2*rows*in*out (the bias add not counted)",
    "mv": "2*M*N",
    "addmv": "2*M*N",
    "dot": "2*N",
}
ATTENTION_BASIS = "2*B*H*L*S*(E+Ev) forward, 2.5x backward; full count (a causal mask does about half)"
CONVOLUTION_BASIS = "2*N*C_out*(output positions)*C_in/groups*(kernel area)"
# Where an operator's `out_dtype` (a ScalarType number) sits among its inputs, and the numbers' meaning
OUT_DTYPE_AT = {
    "_scaled_mm": 6,
    "_scaled_mm_v2": 9,
    "_grouped_mm": 4,
    "_scaled_grouped_mm": 7,
    "_scaled_grouped_mm_v2": 10,
}
SCALAR_TYPES = {"5": "fp16", "6": "fp32", "7": "fp64", "15": "bf16", "23": "fp8_e5m2", "24": "fp8_e4m3"}


def count(op: str, shapes: tuple) -> tuple[int, str]:
    """(FLOPs, basis) of one call of ``op`` on parsed shapes; KeyError without a formula."""
    family, formula = FORMULAS[op]
    value = formula(shapes)
    if isinstance(value, tuple):
        return value
    if family == "attention":
        return value, ATTENTION_BASIS
    return value, BASIS.get(op, CONVOLUTION_BASIS)


# Forward convolutions: (position of stride, padding, dilation, transposed) among the inputs
CONVOLUTIONS = {
    "convolution": (3, 4, 5, 6),
    "_convolution": (3, 4, 5, 6),
    "conv1d": (3, 4, 5, None),
    "conv2d": (3, 4, 5, None),
    "conv3d": (3, 4, 5, None),
    "cudnn_convolution": (3, 2, 4, None),
    "miopen_convolution": (4, 3, 5, None),
    "mkldnn_convolution": (3, 2, 4, None),
}


def conv_forward_flops(shapes: tuple, concrete: list | None, positions: tuple) -> int | None:
    """FLOPs of a forward convolution from input/weight shapes and its stride/padding/dilation values."""
    x, w = shapes[0], shapes[1]
    if concrete is None or x is None or w is None or len(x) < 3:
        return None
    stride_at, pad_at, dil_at, transposed_at = positions
    try:
        stride, padding, dilation = (json.loads(concrete[i]) for i in (stride_at, pad_at, dil_at))
        if transposed_at is not None and concrete[transposed_at] not in ("False", "0", "false"):
            return None  # transposed convolutions: not counted
    except (IndexError, ValueError, TypeError):
        return None
    dims = len(x) - 2

    def per_dim(v):
        return list(v) * dims if isinstance(v, list) and len(v) == 1 else (v if isinstance(v, list) else [v] * dims)

    stride, padding, dilation = per_dim(stride), per_dim(padding), per_dim(dilation)
    out = [(x[2 + i] + 2 * padding[i] - dilation[i] * (w[2 + i] - 1) - 1) // stride[i] + 1 for i in range(dims)]
    if min(out) <= 0:
        return None
    return 2 * x[0] * w[0] * _prod(out) * w[1] * _prod(w[2:])
