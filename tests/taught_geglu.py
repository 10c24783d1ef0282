"""The GeGLU Triton kernel lesson 06 teaches, and a launcher for it: what the kernel checker's tests grade."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def taught_kernel(gate_ptr, up_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    g = tl.load(gate_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(up_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    h = g * tl.sigmoid(1.5957691216057308 * (g + 0.044715 * g * g * g)) * u
    tl.store(out_ptr + offsets, h.to(out_ptr.dtype.element_ty), mask=mask)


def launcher(kernel, grid_blocks=None):
    """``launch(gate, up, out)`` running `kernel` over blocks of BLOCK elements (``grid_blocks(n, BLOCK)`` of them)."""

    def launch(gate, up, out, BLOCK=1024):
        n = gate.numel()
        kernel[(grid_blocks(n, BLOCK) if grid_blocks else triton.cdiv(n, BLOCK),)](gate, up, out, n, BLOCK=BLOCK)

    return launch
