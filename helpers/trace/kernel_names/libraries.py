"""Names that are facts of one library: CUDA memory operations, Liger-Kernel, the course's kernels."""

from __future__ import annotations

import re
from typing import Any

# The course's own Triton kernels (helpers/fused, notebook 06), by the name Triton gives them: the
# @triton.jit function's name. A learner's kernel could share a name, so the source is an
# attribution by name, as for Liger.
COURSE_KERNELS: dict[str, tuple[str, str]] = {
    "_geglu_kernel": ("fused", "GeGLU forward, gelu_tanh(gate) * up in one pass (helpers/kernels/geglu_pointwise.py)"),
    "_geglu_backward_kernel": ("fused", "GeGLU backward in one pass (helpers/kernels/geglu_pointwise.py)"),
    "_gate_up_geglu_kernel": ("gemm", "gate+up GEMM with a GeGLU epilogue, pointer path (helpers/kernels/gate_up.py)"),
    "_gate_up_geglu_tma_kernel": (
        "gemm",
        "gate+up GEMM with a GeGLU epilogue, Hopper TMA path (helpers/kernels/gate_up.py)",
    ),
    "_geglu_backward_gemm_kernel": (
        "gemm",
        "dy @ W_down GEMM with the GeGLU backward in its epilogue, pointer path (helpers/kernels/mlp_function.py)",
    ),
    "_geglu_backward_gemm_tma_kernel": (
        "gemm",
        "dy @ W_down GEMM with the GeGLU backward in its epilogue, Hopper TMA path (helpers/kernels/mlp_function.py)",
    ),
    "_flash_attn_fwd_kernel": (
        "attention",
        "flash-attention forward, online softmax over streamed K/V tiles, pointer path "
        "(helpers/kernels/flash_attention_kernels.py)",
    ),
    "_flash_attn_fwd_tma_kernel": (
        "attention",
        "flash-attention forward, online softmax over streamed K/V tiles, Hopper TMA path "
        "(helpers/kernels/flash_attention_kernels.py)",
    ),
}

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


def parse_course(text: str) -> dict[str, Any] | None:
    if text not in COURSE_KERNELS:
        return None
    family, what = COURSE_KERNELS[text]
    info: dict[str, Any] = {"family": family, "source": "course-triton", "inferred": ["source"]}
    if "geglu" in text:
        info["fused_ops"] = ["gelu", "mul"]
    info["summary"] = f"The course's own Triton kernel: {what}."
    return info
