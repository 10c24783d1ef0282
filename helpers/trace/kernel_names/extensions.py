"""Kernels of libraries around PyTorch: FBGEMM (recommendation models' embedding tables), CUB
(sorts, scans), NVIDIA Apex and Transformer Engine, Liger-Kernel's other kernels. (The last-resort
reading of names no library claims is in :mod:`.inference`.)

A name is attributed to a library by its namespace (``fbgemm_gpu::``, ``cub::``) when it has one:
that is a fact. Some of these libraries also define kernels without a namespace
(``split_embedding_codegen_forward_unweighted_kernel`` is FBGEMM's generated embedding code): those
are attributions by name, listed in ``inferred``.
"""

from __future__ import annotations

import re
from typing import Any

from .common import function_name, namespaces, split_signature

# (pattern on the function name, family, op, what)
_FBGEMM = (
    (
        r"^split_embedding\w*backward|^split_embedding\w*grad",
        "embedding",
        "embedding_backward",
        "embedding-table backward with the optimizer step fused in (table-batched embedding, TBE)",
    ),
    (
        r"^split_embedding\w*forward|^split_embedding\w*codegen",
        "embedding",
        "embedding_bag",
        "embedding-bag lookup over many tables at once (table-batched embedding, TBE)",
    ),
    (
        r"^batch_index_select_dim0\w*",
        "embedding",
        "sequence_embedding",
        "batched index-select over embedding tables (FBGEMM's sequence embeddings, forward and backward)",
    ),
    (
        r"^(?:bounds_check_indices|linearize_\w*index|linearize_\w*indices|_offsets_range|compute_cuda|offsets_range)\w*",
        "embedding",
        "embedding_index",
        "index preparation for an embedding lookup",
    ),
    (
        r"^(?:lxu_cache|lru_cache|direct_mapped_lxu|linear_cache|emulate_cache_miss)\w*",
        "embedding",
        "embedding_cache",
        "the software cache in front of an embedding table (FBGEMM's LXU/LRU cache lookups and updates)",
    ),
    (
        r"^jagged\w*_elementwise\w*",
        "elementwise",
        "jagged_elementwise",
        "an elementwise operation between a jagged and a dense tensor",
    ),
    (
        r"^(?:permute|recat|_permute|to_dense|jagged|dense_to_jagged)\w*",
        "copy",
        "permute",
        "a reordering of embedding data (permute / recat / jagged)",
    ),
    (
        r"quantize|dequantize|to_float|hfp8|fp8|_get_\w*qparam|bfloat16|float_to",
        "quantize",
        "quantize",
        "a (de)quantization kernel",
    ),
)
# CUB's device-wide algorithms, and the same ones in rocPRIM (ROCm's CUB, behind hipCUB), which
# names them in snake case inside a versioned namespace (rocprim::ROCPRIM_400000_NS::detail::
# partition_kernel): (CUB pattern, rocPRIM pattern, family, op, what)
_DEVICE_WIDE = (
    (r"RadixSort|MergeSort|SegmentedSort|Sort", r"sort", "sort", "sort", "device-wide sort"),
    (r"Scan", r"scan", "reduction", "scan", "device-wide prefix sum (scan)"),
    (r"ReduceByKey|Reduce", r"reduce", "reduction", "reduce", "device-wide reduction"),
    (
        r"Select|Compact|Partition|Unique|RunLength",
        r"select|partition|unique|run_length",
        "sort",
        "select",
        "device-wide selection / compaction",
    ),
    (r"Histogram", r"histogram", "sort", "histogram", "device-wide histogram"),
    (r"Transform|For|Fill", r"transform|for_each|fill", "elementwise", "transform", "device-wide transform"),
)
# Thrust's CUDA backend names its kernel `_kernel_agent<...__<algorithm>::...>`: (pattern, family, op)
_THRUST = (
    (r"::__(?:uninitialized_)?fill::", "memset", "fill"),
    (r"::__transform::|::__tabulate::", "elementwise", "transform"),
    (r"::__(?:uninitialized_)?copy::", "copy", "copy"),
    (r"::__(?:radix_|merge_)?sort::", "sort", "sort"),
    (r"::__(?:reduce|reduce_by_key)::", "reduction", "reduce"),
    (r"::__scan\w*::", "reduction", "scan"),
    (r"::__(?:copy_if|unique\w*|partition)::", "sort", "select"),
)
# Names without a namespace, by library: (pattern on the full text, source, family, op, what)
_NAMED = (
    (
        r"\bmulti_tensor_apply_kernel\b[^(]*?Adam",
        "apex/aten",
        "elementwise",
        "adam",
        "fused Adam optimizer step over a list of tensors",
    ),
    (r"\bmulti_tensor_apply_kernel\b[^(]*?(?:Lamb|LAMB)", "apex", "elementwise", "lamb", "fused LAMB optimizer step"),
    (
        r"\bmulti_tensor_apply_kernel\b[^(]*?(?:L2Norm|l2norm)",
        "apex",
        "reduction",
        "l2norm",
        "L2 norm over a list of tensors",
    ),
    (
        r"\bmulti_tensor_apply_kernel\b",
        "apex/aten",
        "elementwise",
        "foreach",
        "one launch over a list of tensors (foreach / optimizer)",
    ),
    (
        r"\bcuApplyLayerNorm|\bcuComputePartGradGammaBeta|\bcuComputeGradGammaBeta|\bcuComputeGradInput",
        "apex",
        "normalization",
        "layer_norm",
        "Apex fused layer norm",
    ),
    (r"\bcuApplyRMSNorm|\bcuComputeGradRMS", "apex", "normalization", "rms_norm", "Apex fused RMS norm"),
    (
        r"\btransformer_engine::(?:[\w{}]+::)*\w*(?:rmsnorm|layernorm|norm)",
        "transformer-engine",
        "normalization",
        None,
        "Transformer Engine normalization",
    ),
    (
        r"\btransformer_engine::(?:[\w{}]+::)*\w*(?:cast|quantize)",
        "transformer-engine",
        "quantize",
        "cast_transpose",
        "Transformer Engine cast to FP8 (with a transpose when the name says so)",
    ),
    (
        r"\btransformer_engine::(?:[\w{}]+::)*\w*transpose",
        "transformer-engine",
        "copy",
        "transpose",
        "Transformer Engine transpose",
    ),
    (
        r"\btransformer_engine::(?:[\w{}]+::)*\w*(?:gelu|silu|swiglu|geglu|relu|(?<![A-Za-z])act(?:ivation)?(?![a-z]))",
        "transformer-engine",
        "elementwise",
        None,
        "Transformer Engine activation",
    ),
    (
        r"\btransformer_engine::(?:[\w{}]+::)*\w*softmax",
        "transformer-engine",
        "softmax",
        "softmax",
        "Transformer Engine fused softmax",
    ),
    (
        # Transformer Engine's permutation kernels exist for MoE token dispatch only
        r"\btransformer_engine::(?:[\w{}]+::)*\w*(?:permute|row_?map|sort_?chunks)",
        "transformer-engine",
        "moe-routing",
        "permute",
        "Transformer Engine MoE token (un)permutation",
    ),
    (
        r"\btransformer_engine::(?:[\w{}]+::)*\w*(?:seqlens?_to|to_offsets|offsets_to)",
        "transformer-engine",
        "other",
        "attention_metadata",
        "Transformer Engine sequence offsets for packed (THD) attention",
    ),
    (
        r"\bscaled_(?:upper_triang_)?masked_softmax_warp_(?:forward|backward)|\bscaled_softmax_warp_",
        "megatron/apex",
        "softmax",
        "softmax",
        "fused scaled (masked) softmax",
    ),
)
# Liger-Kernel's other Triton kernels (function names from its source); attribution by name.
LIGER_MORE = {
    "_rms_norm_forward_kernel": ("normalization", "RMS norm forward"),
    "_rms_norm_backward_kernel": ("normalization", "RMS norm backward"),
    "_layer_norm_forward_kernel": ("normalization", "layer norm forward"),
    "_layer_norm_backward_kernel": ("normalization", "layer norm backward"),
    "liger_cross_entropy_kernel": ("fused", "cross entropy (softmax and loss in one pass)"),
    "_triton_rope": ("elementwise", "rotary position embedding"),
    "_softmax_single_block_forward_kernel": ("softmax", "softmax forward"),
    "_softmax_multi_block_forward_kernel": ("softmax", "softmax forward"),
}


def _entry(family: str, source: str, what: str, op: str | None, inferred: list[str], short: str) -> dict[str, Any]:
    info: dict[str, Any] = {"family": family, "source": source, "short_name": short, "inferred": inferred}
    if op:
        info["op"] = op
    info["summary"] = f"{what} ({source})."
    return info


def _device_wide(fn: str, source: str, library: str) -> dict[str, Any]:
    """A CUB or rocPRIM kernel, by the algorithm its function name spells in that library's case."""
    column = 0 if source == "cub" else 1
    for row in _DEVICE_WIDE:
        if re.search(row[column], fn):
            family, op, what = row[2:]
            return _entry(family, source, what, op, [], fn)
    return _entry("other", source, f"a {library} device-wide algorithm ({fn})", None, [], fn)


def parse_extensions(text: str) -> dict[str, Any] | None:
    fn = function_name(text)
    spaces = namespaces(text)
    if "fbgemm_gpu" in spaces or fn.startswith(("split_embedding", "batch_index_select_dim0")):
        named = "fbgemm_gpu" in spaces or "fbgemm_gpu::" in text
        for pattern, family, op, what in _FBGEMM:
            if re.search(pattern, fn):
                return _entry(family, "fbgemm", what, op, [] if named else ["source"], fn)
        if named:
            return _entry("unknown", "fbgemm", f"an FBGEMM kernel ({fn})", None, [], fn)
    if spaces and spaces[-1] == "cub" or re.match(r"(?:void\s+)?(?:at_cuda_detail::)?cub::", text):
        return _device_wide(fn, "cub", "CUB")
    if spaces and spaces[0] == "rocprim":
        return _device_wide(fn, "rocprim", "rocPRIM")
    qual = split_signature(text)[0]
    if qual.startswith("thrust::") and (m := re.search(r"::__(\w+?)::", text)):
        family, op = next(((f, o) for p, f, o in _THRUST if re.search(p, text)), ("elementwise", m.group(1)))
        return _entry(family, "thrust", f"a Thrust algorithm ({op})", op, [], fn)
    for pattern, source, family, op, what in _NAMED:
        if "at::native::" in text:
            break  # ATen's own multi_tensor_apply and friends: read by the ATen reader
        # a library's namespace in a template argument (&transformer_engine::silu<...>) names no kernel
        if re.search(pattern, qual if pattern.startswith(r"\btransformer_engine") else text):
            return _entry(family, source, what, op, ["source"] if "/" in source or "::" not in text else [], fn)
    if text in LIGER_MORE:
        family, what = LIGER_MORE[text]
        return _entry(family, "liger", f"Liger-Kernel Triton kernel: {what}", None, ["source"], text)
    # FBGEMM's TBE helpers keep no namespace: recognise the few that show up beside split_embedding
    if re.fullmatch(
        r"(?:bounds_check_indices|linearize_index|permute_pooled_embs|recat_copy_async)_kernel(?:_v\d+)?", fn
    ):
        for pattern, family, op, what in _FBGEMM:
            if re.search(pattern, fn):
                return _entry(family, "fbgemm", what, op, ["source"], fn)
    return None
