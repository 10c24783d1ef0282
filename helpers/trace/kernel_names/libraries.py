"""Names that are facts of one library: CUDA memory operations, Liger-Kernel, and names registered by their owner."""

from __future__ import annotations

import re
from typing import Any

from ..registry import REGISTERED

# Liger-Kernel's Triton kernels that the course meets. Other projects copy these kernels under the
# same names, so the attribution to Liger is itself listed as inferred.
LIGER_KERNELS: dict[str, tuple[str, list[str], str]] = {
    "_geglu_tanh_forward_kernel": ("fused", ["gelu", "mul"], "GeGLU forward: gelu_tanh(gate) * up"),
    "_geglu_tanh_backward_kernel": ("fused", ["gelu", "mul"], "GeGLU backward"),
    "_swiglu_forward_kernel": ("fused", ["silu", "mul"], "SwiGLU forward: silu(gate) * up"),
    "_swiglu_backward_kernel": ("fused", ["silu", "mul"], "SwiGLU backward"),
}


def parse_memory(text: str) -> dict[str, Any] | None:
    if re.fullmatch(r"Memset \(\w+\)", text):
        where = text[len("Memset (") : -1]
        return {
            "family": "memset",
            "source": "cuda",
            "dst_memory": where,
            "summary": f"A memset of {where.lower()} memory: a CUDA memory operation "
            "(cudaMemsetAsync and relatives), not a kernel. Who issued it (cuBLAS, ATen, "
            "...) is not in the name: look at the CPU op that launched it.",
        }
    m = re.fullmatch(r"Memcpy (\w+) \((\w+) -> (\w+)\)", text)
    if m:
        direction, src, dst = m.groups()
        info = {
            "family": "copy",
            "source": "cuda",
            "direction": direction,
            "src_memory": src,
            "dst_memory": dst,
        }
        note = ""
        if src == "Pageable" or dst == "Pageable":
            note = (
                " Pageable host memory: the driver stages the data through a pinned buffer, so "
                "the copy cannot overlap host work the way a copy from pinned memory can."
            )
        info["summary"] = f"A {direction} memory copy, {src.lower()} -> {dst.lower()} memory.{note}"
        info["explain"] = (
            "HtoD = host to device, DtoH = device to host, DtoD = device to device; "
            "Pageable / Pinned / Device name the memory on each side."
        )
        return info
    return None


def parse_liger(text: str) -> dict[str, Any] | None:
    if text in LIGER_KERNELS:
        family, ops, what = LIGER_KERNELS[text]
        return {
            "family": family,
            "source": "liger",
            "fused_ops": ops,
            "inferred": ["source"],
            "summary": f"Liger-Kernel Triton kernel: {what}, one pass over memory.",
            "explain": "Liger-Kernel's hand-written Triton kernels keep their Python function "
            "names. Other projects copy these kernels under the same names, so the "
            "source is an attribution by name.",
        }
    if text.startswith("liger_"):
        return {"family": "unknown", "source": "liger", "summary": "A Liger-Kernel kernel this decoder does not know."}
    return None


def parse_registered(text: str) -> dict[str, Any] | None:
    fields = REGISTERED.get(text)
    if fields is None:
        return None
    return {**fields, "inferred": ["source"]}
