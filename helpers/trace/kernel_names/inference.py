"""Reading a name that no library's parser claims from its words, and adding the dtype,
architecture and scale layout a name writes to any decoding that lacks them.

Every key read here is listed in ``inferred``: the words come from :mod:`.tokens`, whose table
says which word means what and why one rule wins over another.
"""

from __future__ import annotations

import re
from typing import Any

from .common import CUTE_DSL_PREFIX, namespaces
from .dtypes import read_arch, read_scale_layout, read_types
from .tokens import CONVENTION_ATTENTION, gated_ops, infer_family, name_words

# Namespaces that name a project (a fact, unlike the family read from words)
_ANONYMOUS = (
    "",
    "{anon}",
    "std",
    "void",
    "at",
    "c10",
    "detail",
    "internal",
    "kernels",
    "kernel",
    "native",
    "moe",
    "dev",
    "cuda",  # libcu++'s namespace, and one a project may reuse for its own kernels: no project's name
)
# Words that put a name in a mixture-of-experts context: such names are read by words before the
# ATen and extension readers, which would otherwise take `count_and_sort_expert_tokens` for a sort
_MOE_CONTEXT = re.compile(
    r"_(?:moe[a-z0-9]*|[a-z0-9]*moe|experts?|gating|router|routing|topkgating[a-z0-9]*|unpermute|deep_?ep|deepep"
    r"|expand_?input_?rows|finalize_?moe[a-z0-9]*|grouped_?topk|group_?(?:limited_|idx_and_)?topk)(?=_)"
)
# `namespace::op` is a dispatcher operator (a CPU row of the profiler), not a kernel, when the namespace
# is an operator library's: PyTorch's own (aten, prim, c10d, quantized ...) and the extensions that
# register ops (vLLM's _C, _moe_C and vllm, SGLang's sgl_kernel, TensorRT-LLM's trtllm, FBGEMM, torchao,
# xFormers, torchvision). A kernel's C++ namespace (sglang::fused_qknorm_rope_warp) is read by its words.
_OP_NAMESPACE = re.compile(
    r"(?:aten|prims?|c10d|_?c10d_functional\w*|profiler|quantized|_quantized|mkldnn|_?inductor|torchvision|torchaudio"
    r"|fbgemm|_C|_moe_C|_rocm_C|_vllm_\w+_C|_custom_ops|vllm|sgl_kernel|trtllm|torchao|xformers)::\w+(?:\.\w+)?"
)
_FAMILY_TEXT = {
    "moe-routing": "mixture-of-experts routing",
    "quantize": "(de)quantization",
    "fused": "fused gated activation",
}


def parse_by_tokens(text: str) -> dict[str, Any] | None:
    """The last resort: a family from the words of the name (see :mod:`.tokens`), always inferred."""
    if _OP_NAMESPACE.fullmatch(text):
        return None  # a dispatcher op (aten::matmul): the op tables read those, not kernel names
    found = infer_family(text)
    if found is None and CONVENTION_ATTENTION.fullmatch(text):
        found = ("attention", None, "no word says its job; `_fwd_kernel` is the Triton attention kernels' name")
    if found is None:
        return None
    family, op, what = found
    spaces = [n for n in namespaces(text) if n not in _ANONYMOUS] if not text.startswith("_Z") else []
    if text.startswith(CUTE_DSL_PREFIX):
        spaces = ["cute_dsl"]
    info: dict[str, Any] = {
        "family": family,
        "source": spaces[0].replace("_", "-") if spaces else "unknown",
        "inferred": ["family"],
    }
    if family == "fused":
        info["fused_ops"] = gated_ops(text)
        info["inferred"].append("fused_ops")
    if op and family != "softmax":
        info["op"] = op
        info["inferred"].append("op")
    label = _FAMILY_TEXT.get(family, family)
    info["summary"] = (
        f"A kernel no known library claims; its name reads as {label} (a guess from the words in the name, not a fact)."
    )
    info["explain"] = (
        f"Read from the words of the name: {what}. The table of words and the order in which they are "
        "tried is in helpers/trace/kernel_names/word_rules.py."
    )
    return info


def parse_moe_context(text: str) -> dict[str, Any] | None:
    """Names that speak of experts, gating or routing: read by words before ATen's and FBGEMM's readers."""
    if text.startswith(("triton_", "cpp_fused", "at::native::", "void at::native::")):
        return None
    own, _ = name_words(text)
    if not _MOE_CONTEXT.search(own):
        return None
    return parse_by_tokens(text)


def fill_family(text: str, fields: dict[str, Any]) -> dict[str, Any]:
    """A library's kernel whose job its reader did not know (family unknown): the family from the words, inferred."""
    if fields.get("family") != "unknown" or fields.get("source", "unknown") == "unknown":
        return fields
    found = infer_family(text)
    if found is None:
        return fields
    family, _, what = found
    return {
        **fields,
        "family": family,
        "inferred": [*fields.get("inferred", []), "family"],
        "summary": f"{fields['summary'].rstrip('.')}; its name reads as {_FAMILY_TEXT.get(family, family)} "
        f"(a guess from the words: {what}).",
    }


# Readers that read the type field of their names themselves and leave it out on purpose (NCCL's
# send/receive kernels carry a placeholder type): nothing is added to theirs
_OWN_TYPES = ("nccl",)


def enrich(text: str, fields: dict[str, Any]) -> dict[str, Any]:
    """Add `dtype`, `arch`, `scale_dtype` and `scale_layout` a name writes, when a decoding lacks them.

    `dtype` and `arch` for every known family (a norm or an embedding lookup in bf16 moves half the
    bytes of one in fp32); the scale fields for low-precision products, quantizers and MoE kernels.
    Each key added is listed in `inferred`. An existing key is never changed.
    """
    family = fields.get("family")
    if family in (None, "unknown") or fields.get("source") in _OWN_TYPES:
        return fields
    added: dict[str, Any] = {}
    dtype, scale = read_types(text)
    if dtype and not fields.get("dtype"):
        added["dtype"] = dtype
    if not fields.get("arch"):
        arch = read_arch(text)
        if arch:
            added["arch"] = arch
    if family in ("gemm", "quantize", "fused", "moe-routing"):
        if scale and not fields.get("scale_dtype"):
            added["scale_dtype"] = scale
        layout = read_scale_layout(text)
        if layout and not fields.get("scale_layout"):
            added["scale_layout"] = layout
        elif scale and not fields.get("scale_layout"):
            added["scale_layout"] = "block-scaled"
    if not added:
        return fields
    out = {**fields, **added}
    out["inferred"] = [*fields.get("inferred", []), *(k for k in added if k not in fields.get("inferred", []))]
    return out
