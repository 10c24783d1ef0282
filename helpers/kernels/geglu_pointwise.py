"""GeGLU pointwise kernel ``gelu_tanh(gate) * up``: kernels, launcher and autograd Function. Rows may have any
stride (the halves of one ``[M, 2H]`` tensor need no copy); tanh via sigmoid, since the interpreter has no libdevice."""

from __future__ import annotations

import functools

from ..triton_env import check_device, ensure_interpreter_ready, triton_mode

triton_mode()  # fixes the mode before the kernels below are defined (triton.jit reads it then)

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

ensure_interpreter_ready()

__all__ = ["geglu", "geglu_backward", "launch_geglu", "GeGLUFunction", "SUPPORTED_DTYPES"]

SUPPORTED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)

# 2 * sqrt(2 / pi) and 2 * sqrt(2 / pi) * 0.044715: the argument of sigmoid is 2z.
_K0 = tl.constexpr(1.5957691216057308)
_K1 = tl.constexpr(0.0713548162726009)


@triton.jit
def _sigmoid_2z(g):
    """sigmoid(2z) with z = sqrt(2/pi) (g + 0.044715 g^3) in fp32; 2z clamped at -80 so no inf is formed."""
    z2 = tl.maximum(g * (_K0 + _K1 * g * g), -80.0)
    return 1.0 / (1.0 + tl.exp(-z2))


@triton.jit
def _gelu_tanh_f32(g):
    """gelu_tanh(g) for an fp32 tensor, as g * sigmoid(2z) (identical to 0.5 g (1 + tanh z))."""
    return g * _sigmoid_2z(g)


@triton.jit
def _geglu_grads(d, g, u):
    """GeGLU backward in fp32: ``(dgate, dup, gelu(g))``; shared by the pointwise backward and the backward GEMM's epilogue."""
    s = _sigmoid_2z(g)
    gelu = g * s
    dgelu = s + gelu * (1.0 - s) * (_K0 + 3.0 * _K1 * g * g)
    return d * u * dgelu, d * gelu, gelu


@triton.jit
def _tile_offsets(M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, INT64: tl.constexpr):
    # A 1-D grid walked row-major: consecutive programs take consecutive column blocks of the
    # same rows, so at any moment the GPU streams through contiguous memory, as a flat copy does
    # (a grid walking down the rows puts concurrent programs a row apart, and runs slower).
    pid = tl.program_id(0)
    n_col_blocks = tl.cdiv(N, BLOCK_N)
    pid_m = pid // n_col_blocks
    pid_n = pid % n_col_blocks
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # Tell the compiler the columns are contiguous runs so that it can use 16-byte accesses.
    cols = tl.max_contiguous(tl.multiple_of(cols, BLOCK_N), BLOCK_N)
    if INT64:
        rows = rows.to(tl.int64)
    return rows, cols


@triton.jit
def _geglu_kernel(
    gate_ptr,
    up_ptr,
    out_ptr,
    M,
    N,
    stride_gate,
    stride_up,
    stride_out,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    EVEN_M: tl.constexpr,
    EVEN_N: tl.constexpr,
    INT64: tl.constexpr,
):
    """out[r, c] = gelu_tanh(gate[r, c]) * up[r, c] on one BLOCK_M x BLOCK_N tile (row strides given)."""
    rows, cols = _tile_offsets(M, N, BLOCK_M, BLOCK_N, INT64)
    g_ptrs = gate_ptr + rows[:, None] * stride_gate + cols[None, :]
    u_ptrs = up_ptr + rows[:, None] * stride_up + cols[None, :]
    o_ptrs = out_ptr + rows[:, None] * stride_out + cols[None, :]
    if EVEN_M and EVEN_N:
        # No mask at all: the common, fast case (the blog shape is [8192, 3072]).
        g = tl.load(g_ptrs).to(tl.float32)
        u = tl.load(u_ptrs).to(tl.float32)
        tl.store(o_ptrs, (_gelu_tanh_f32(g) * u).to(out_ptr.dtype.element_ty))
    else:
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        g = tl.load(g_ptrs, mask=mask, other=0.0).to(tl.float32)
        u = tl.load(u_ptrs, mask=mask, other=0.0).to(tl.float32)
        tl.store(o_ptrs, (_gelu_tanh_f32(g) * u).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _geglu_backward_kernel(
    dout_ptr,
    gate_ptr,
    up_ptr,
    dgate_ptr,
    dup_ptr,
    M,
    N,
    stride_dout,
    stride_gate,
    stride_up,
    stride_dgate,
    stride_dup,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    EVEN_M: tl.constexpr,
    EVEN_N: tl.constexpr,
    INT64: tl.constexpr,
):
    """dgate = dout * up * gelu_tanh'(gate), dup = dout * gelu_tanh(gate), recomputing gelu from gate."""
    rows, cols = _tile_offsets(M, N, BLOCK_M, BLOCK_N, INT64)
    r = rows[:, None]
    c = cols[None, :]
    mask = (r < M) & (c < N)
    if EVEN_M and EVEN_N:
        d = tl.load(dout_ptr + r * stride_dout + c).to(tl.float32)
        g = tl.load(gate_ptr + r * stride_gate + c).to(tl.float32)
        u = tl.load(up_ptr + r * stride_up + c).to(tl.float32)
    else:
        d = tl.load(dout_ptr + r * stride_dout + c, mask=mask, other=0.0).to(tl.float32)
        g = tl.load(gate_ptr + r * stride_gate + c, mask=mask, other=0.0).to(tl.float32)
        u = tl.load(up_ptr + r * stride_up + c, mask=mask, other=0.0).to(tl.float32)
    dgate, dup, _ = _geglu_grads(d, g, u)
    dgate = dgate.to(dgate_ptr.dtype.element_ty)
    dup = dup.to(dup_ptr.dtype.element_ty)
    if EVEN_M and EVEN_N:
        tl.store(dgate_ptr + r * stride_dgate + c, dgate)
        tl.store(dup_ptr + r * stride_dup + c, dup)
    else:
        tl.store(dgate_ptr + r * stride_dgate + c, dgate, mask=mask)
        tl.store(dup_ptr + r * stride_dup + c, dup, mask=mask)


# Launcher


def _next_pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@functools.lru_cache(maxsize=1024)
def _pick_blocks(M: int, N: int) -> tuple[int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps): compiled, one 16-byte vector per thread and input; in the interpreter few
    large programs, since each costs Python overhead there."""
    n_pow2 = _next_pow2(N)
    if triton_mode() == "interpreter":
        block_n = min(n_pow2, 4096)
        block_m = max(1, min(_next_pow2(M), 65536 // block_n))
        return block_m, block_n, 4
    block_n = min(n_pow2, 1024)
    block_m = min(max(1, 1024 // block_n), _next_pow2(M))
    return block_m, block_n, 4


def _as_rows(t: torch.Tensor, name: str) -> torch.Tensor:
    """View an N-D tensor as [rows, last_dim] without copying when the leading dims allow it."""
    if t.dim() == 0:
        raise ValueError(f"{name} must have at least one dimension, got a 0-d tensor")
    if t.shape[-1] > 1 and t.stride(-1) != 1:
        raise ValueError(
            f"{name} must be contiguous in its last dimension (stride 1), got strides {tuple(t.stride())}: "
            f"pass {name}.contiguous() (row strides may be anything, e.g. a slice of a wider tensor)"
        )
    if t.dim() == 2:
        return t
    # reshape returns a view when the leading dims can be merged (any slice along the last dim
    # of a contiguous tensor can), and copies otherwise; the kernel then gets correct strides.
    return t.reshape(-1, t.shape[-1])


def _out_rows(out: torch.Tensor) -> torch.Tensor:
    """A [rows, last_dim] *view* of ``out`` (a copy would silently drop the kernel's writes)."""
    if out.shape[-1] > 1 and out.stride(-1) != 1:
        raise ValueError(f"out must be contiguous in its last dimension, got strides {tuple(out.stride())}")
    if out.dim() == 2:
        return out
    try:
        return out.view(-1, out.shape[-1])
    except RuntimeError:
        raise ValueError(
            f"out (strides {tuple(out.stride())}) cannot be viewed as rows without a copy: pass a contiguous out"
        ) from None


def _check_pair(gate: object, up: object) -> None:
    for name, t in (("gate", gate), ("up", up)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    assert isinstance(gate, torch.Tensor) and isinstance(up, torch.Tensor)
    if gate.shape != up.shape:
        raise ValueError(
            f"gate and up must have the same shape, got {tuple(gate.shape)} and {tuple(up.shape)}: "
            "they are the two halves of the gate/up projection"
        )
    if gate.dtype != up.dtype:
        raise ValueError(
            f"gate and up must have the same dtype, got {gate.dtype} and {up.dtype}: cast one with .to(dtype)"
        )
    if gate.dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"dtype {gate.dtype} is not supported; use one of {', '.join(map(str, SUPPORTED_DTYPES))}")
    check_device(gate, up, what="gate and up")


def _needs_int64(M: int, *strides: int) -> bool:
    return M * max(max(strides), 1) >= 2**31


def geglu(gate: torch.Tensor, up: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``gelu_tanh(gate) * up`` in one Triton kernel (fp32 math); same shape, dtype and device, last dimension
    contiguous; ``out``, if given, is written in place."""
    _check_pair(gate, up)
    if out is not None:
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"out must be a torch.Tensor or None, got {type(out).__name__}")
        if out.shape != gate.shape or out.dtype != gate.dtype or out.device != gate.device:
            raise ValueError(
                f"out must match gate: expected shape {tuple(gate.shape)}, {gate.dtype} on {gate.device}, "
                f"got {tuple(out.shape)}, {out.dtype} on {out.device}"
            )
    else:
        out = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    if gate.numel() == 0:
        return out
    g2, u2 = _as_rows(gate, "gate"), _as_rows(up, "up")
    o2 = _out_rows(out)
    M, N = g2.shape
    launch_geglu(g2, u2, o2, *_pick_blocks(M, N))
    return out


def launch_geglu(
    g2: torch.Tensor,
    u2: torch.Tensor,
    o2: torch.Tensor,
    block_m: int,
    block_n: int,
    num_warps: int,
) -> None:
    """Launch ``_geglu_kernel`` on checked 2-D views with explicit block sizes."""
    M, N = g2.shape
    sg, su, so = g2.stride(0), u2.stride(0), o2.stride(0)
    _geglu_kernel[(_cdiv(M, block_m) * _cdiv(N, block_n),)](
        g2,
        u2,
        o2,
        M,
        N,
        sg,
        su,
        so,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        EVEN_M=M % block_m == 0,
        EVEN_N=N % block_n == 0,
        INT64=M * max(sg, su, so, 1) >= 2**31,
        num_warps=num_warps,
    )


def geglu_backward(dout: torch.Tensor, gate: torch.Tensor, up: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradients ``(dgate, dup)`` of ``gelu_tanh(gate) * up`` given ``dout``, in one Triton kernel."""
    _check_pair(gate, up)
    if not isinstance(dout, torch.Tensor):
        raise TypeError(f"dout must be a torch.Tensor, got {type(dout).__name__}")
    if dout.shape != gate.shape:
        raise ValueError(f"dout must have gate's shape {tuple(gate.shape)}, got {tuple(dout.shape)}")
    if dout.dtype != gate.dtype:
        dout = dout.to(gate.dtype)
    check_device(dout, gate, what="dout, gate and up")
    dgate = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    dup = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    if gate.numel() == 0:
        return dgate, dup
    if dout.shape[-1] > 1 and dout.stride(-1) != 1:
        dout = dout.contiguous()
    d2, g2, u2 = _as_rows(dout, "dout"), _as_rows(gate, "gate"), _as_rows(up, "up")
    dg2, du2 = dgate.view(-1, gate.shape[-1]), dup.view(-1, gate.shape[-1])
    M, N = g2.shape
    block_m, block_n, num_warps = _pick_blocks(M, N)
    grid = (_cdiv(M, block_m) * _cdiv(N, block_n),)
    strides = (d2.stride(0), g2.stride(0), u2.stride(0), dg2.stride(0), du2.stride(0))
    _geglu_backward_kernel[grid](
        d2,
        g2,
        u2,
        dg2,
        du2,
        M,
        N,
        *strides,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        EVEN_M=M % block_m == 0,
        EVEN_N=N % block_n == 0,
        INT64=_needs_int64(M, *strides),
        num_warps=num_warps,
    )
    return dgate, dup


# Autograd Function


class GeGLUFunction(torch.autograd.Function):
    """Differentiable ``gelu_tanh(gate) * up``; the backward recomputes the GeLU from ``gate``: memory saved for a
    few flops in a memory-bound kernel."""

    @staticmethod
    def forward(ctx, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        out = geglu(gate, up)
        ctx.save_for_backward(gate, up)
        return out

    @staticmethod
    def backward(ctx, dout: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        gate, up = ctx.saved_tensors
        return geglu_backward(dout, gate, up)
