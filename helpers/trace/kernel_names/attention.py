"""Fused attention kernels: FlashAttention 2/3/4 (and PyTorch's copy of FA2), memory-efficient
attention (xFormers' CUTLASS kernels, PyTorch's copy), FlexAttention, FlashInfer, vLLM and
TensorRT-LLM kernels. cuDNN's SDPA kernels are read in :mod:`.cudnn`, AMD's (CK, aiter) in
:mod:`.rocm`.

What the names say, from the projects' sources:

* FlashAttention 2 (``flash_fwd_kernel<Flash_fwd_kernel_traits<kHeadDim, kBlockM, kBlockN,
  kNWarps, ..., elem_type>, ...>``): head dimension, the query x key tile, the element type.
  PyTorch ships the same kernels in the ``pytorch_flash`` namespace (its flash SDPA backend).
* Memory-efficient attention (``fmha_cutlassF_bf16_aligned_64x128_rf_sm80``): F = forward,
  B = backward, element type, aligned inputs, queries x keys per block, ``rf`` = output kept in
  registers, built for sm80 and later.
* FlexAttention: Inductor template kernels ``triton_tem_fused_..flex_attention.._<n>`` (read in
  :mod:`.inductor`).
"""

from __future__ import annotations

import re
from typing import Any

from ..dtypes import from_cpp
from .common import split_signature

_FLASH_EXPLAIN = (
    "FlashAttention computes softmax(Q K^T) V in tiles held on chip, never writing the attention "
    "matrix to memory. FA2's template parameters are the head dimension, the tile (queries x keys "
    "per block), the number of warps, and the element type."
)


def _attention(source: str, short: str, what: str, phase: str | None = None, **extra: Any) -> dict[str, Any]:
    info: dict[str, Any] = {"family": "attention", "source": source, "short_name": short}
    if phase:
        info["phase"] = phase
    info.update({k: v for k, v in extra.items() if v is not None})
    info["summary"] = what + (f", {phase} pass" if phase else "") + "."
    return info


def _phase_of(name: str) -> str | None:
    low = name.lower()
    if "bwd" in low or "backward" in low:
        return "backward"
    if "fwd" in low or "forward" in low or "fprop" in low:
        return "forward"
    return None


def _flash2(text: str) -> dict[str, Any] | None:
    m = re.search(r"\b(?:(pytorch_flash)::)?(flash_(?:fwd|bwd)\w*?_kernel)\b", text)
    if not m:
        return None
    namespace, fn = m.groups()
    source = "pytorch-flash" if namespace else "flash-attn"
    what = (
        "PyTorch's FlashAttention-2 kernel (the flash backend of scaled_dot_product_attention)"
        if namespace
        else "FlashAttention-2 kernel"
    )
    info = _attention(source, f"{namespace + '::' if namespace else ''}{fn}", what, _phase_of(fn))
    if "splitkv" in fn:
        info["summary"] = info["summary"][:-1] + " (split-KV: the keys are split across blocks, then combined)."
    traits = re.search(r"Flash_(?:fwd|bwd)_kernel_traits<\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)", text)
    if traits:
        info["head_dim"] = int(traits.group(1))
        info["tile"] = f"{traits.group(2)}x{traits.group(3)}"
    if d := re.search(r"cutlass::(bfloat16_t|half_t|float_e4m3_t)", text):
        info["dtype"] = {"bfloat16_t": "bf16", "half_t": "fp16", "float_e4m3_t": "fp8_e4m3"}[d.group(1)]
    if not namespace and "flash::" not in text:
        info["inferred"] = ["source"]  # a bare flash_fwd_kernel: by name only
    info["explain"] = _FLASH_EXPLAIN
    return info


def _flash3(text: str) -> dict[str, Any] | None:
    # FA3 (Hopper) and FA4 (Blackwell, CuTe DSL): flash::FlashAttnFwdSm90, flash::FlashAttentionForwardSm100 ...
    m = re.search(r"\bflash::(Flash\w*?(Fwd|Bwd|Forward|Backward)\w*?(Sm\d+)\w*)", text)
    if not m:
        m2 = re.search(r"\bflash::(\w*(?:fwd|bwd|attn|Attn)\w*)", text)
        if not m2:
            return None
        return _attention("flash-attn", f"flash::{m2.group(1)}", "FlashAttention kernel", _phase_of(m2.group(1)))
    name, _, arch = m.groups()
    version = (
        "FlashAttention-3" if arch == "Sm90" else "FlashAttention-4" if arch.startswith("Sm10") else "FlashAttention"
    )
    return _attention("flash-attn", f"flash::{name}", f"{version} kernel", _phase_of(name), arch=arch.lower())


def _mem_efficient(text: str) -> dict[str, Any] | None:
    m = re.search(r"\bfmha_cutlass([FB])_(\w+)", text)
    if m:
        direction, rest = m.groups()
        tokens = rest.split("_")
        info = _attention(
            "pytorch-mem-efficient" if "PyTorchMemEffAttention" in text else "xformers-cutlass",
            m.group(0),
            "Memory-efficient attention kernel (xFormers' CUTLASS FMHA"
            + (", as shipped in PyTorch's efficient SDPA backend)" if "PyTorchMemEffAttention" in text else ")"),
            "forward" if direction == "F" else "backward",
        )
        unparsed = []
        for tok in tokens:
            if tok in ("bf16", "f16", "f32"):
                info["dtype"] = {"f16": "fp16", "f32": "fp32"}.get(tok, tok)
            elif re.fullmatch(r"\d+x\d+", tok):
                info["tile"] = tok
            elif re.fullmatch(r"k\d+", tok):
                info["head_dim"] = int(tok[1:])  # the maximum head dimension the kernel supports
            elif re.fullmatch(r"sm\d+", tok):
                info["arch"] = tok
            elif tok not in ("aligned", "notaligned", "rf", "gmem", "dropout", "seqlen"):
                unparsed.append(tok)
        if "PyTorchMemEffAttention" not in text:
            info["inferred"] = ["source"]  # the same names exist in xFormers and PyTorch
        info["unparsed"] = unparsed
        info["explain"] = (
            "Memory-efficient attention names say: F = forward, B = backward, the element type, "
            "aligned (inputs aligned for vector loads), queries x keys per block, rf (output kept "
            "in registers) or gmem (in global memory), and the oldest architecture it runs on. "
            "In backward names kN is the largest head dimension the kernel handles."
        )
        return info
    if re.search(r"\bPyTorchMemEffAttention::|\befficient_attention_(?:forward|backward)\w*", text):
        return _attention(
            "pytorch-mem-efficient",
            "PyTorchMemEffAttention",
            "PyTorch memory-efficient attention kernel",
            _phase_of(text),
        )
    if re.search(r"\battention_kernel_batched_impl|\bAttentionKernel<|\bAttentionBackwardKernel<", text):
        info = _attention(
            "xformers-cutlass",
            "AttentionKernel",
            "Memory-efficient attention kernel (xFormers' CUTLASS FMHA)",
            "backward" if "Backward" in text else "forward",
        )
        info["inferred"] = ["source"]
        return info
    return None


# Other projects' attention kernels, by name: (pattern, source, what)
_OTHERS = (
    (
        r"\bflashinfer::\w*?(?:Prefill|Decode|Attention)\w*|\b(?:Batch|Single)(?:Prefill|Decode)With\w*Kernel\b",
        "flashinfer",
        "FlashInfer attention kernel",
    ),
    (
        r"\bvllm::paged_attention_v[12]_\w*kernel|\bpaged_attention_v[12]_\w*kernel",
        "vllm",
        "vLLM paged-attention kernel",
    ),
    (
        r"\bvllm::reshape_and_cache\w*|\breshape_and_cache(?:_flash)?_kernel",
        "vllm",
        "vLLM KV-cache write (reshape_and_cache)",
    ),
    (
        r"\bfmha_v2_\w+|\bfmhaSm\d+Kernel\w*|\bxqa_kernel\w*|\bmmha::\w+",
        "trt-llm",
        "TensorRT-LLM fused attention kernel",
    ),
    (r"\bmha_(?:fwd|bwd|varlen_fwd)\w*", "unknown", "an attention kernel (mha_ by name)"),
)


def _others(text: str) -> dict[str, Any] | None:
    for pattern, source, what in _OTHERS:
        m = re.search(pattern, text)
        if m:
            info = _attention(source, m.group(0), what, _phase_of(m.group(0)))
            info["inferred"] = ["family"] if source == "unknown" else ["source"]
            if "reshape_and_cache" in m.group(0):
                info["family"], info["op"] = "copy", "kv_cache_write"
            return info
    return None


def parse_attention(text: str) -> dict[str, Any] | None:
    """Attention kernels of the libraries above; None when the name is not one of them."""
    for reader in (_flash2, _flash3, _mem_efficient, _others):
        info = reader(text)
        if info is not None:
            if "dtype" not in info:
                qual, args = split_signature(text)
                if args:
                    d = from_cpp(args[0]) if args else None
                    if d is not None and d.floating:
                        info["dtype"] = d.short
            return info
    return None
