"""Which words of a kernel name mean what: the table behind the decoder's last-resort reading.

A name no library's parser claims is split into words (C++ namespaces and template arguments,
snake_case, camelCase, letters and digits: ``vllm::moe::topkGatingSoftmax<8, ...>`` gives
``vllm, moe, topk, gating, softmax``), and the first rule of :data:`FAMILY_RULES` whose pattern
matches names the family. Every such reading is an inference (listed in ``inferred``), however
plain the word: libraries name kernels as they like.

The table of words and its order is in :mod:`.word_rules`; after it, :func:`infer_family` applies
a few readings that weigh the whole name (see its docstring).
"""

from __future__ import annotations

import re
from functools import lru_cache

from .common import mangled_parts, split_signature
from .word_rules import FAMILY_RULES, T, word_pattern

_CHUNK = re.compile(r"[A-Za-z0-9]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


@lru_cache(maxsize=16)
def flat_words(text: str) -> str:
    """'vllm::moe::topkGatingSoftmax<8>' -> '_vllm_moe_topk_gating_softmax_8_': lower-case words joined by '_'.

    Each chunk of letters and digits is split at camelCase and letter/digit boundaries; a chunk
    that splits is also kept whole ('topkgatingsoftmax'), so a rule can match either form.
    """
    out: list[str] = []
    for chunk in _CHUNK.findall(text):
        parts = _CAMEL.findall(chunk)
        low = chunk.lower()
        if len(parts) > 1:
            out.append(low)
            out.extend(p.lower() for p in parts)
        else:
            out.append(low)
    return "_" + "_".join(out) + "_"


@lru_cache(maxsize=16)
def name_words(text: str) -> tuple[str, str]:
    """(words of the qualified function name, words of everything else), both in the flat form.

    The function's own name and namespaces speak first; template arguments (``device_kernel<
    GemmUniversal<...>>``) only when those say nothing. An Itanium-mangled name gives its identifiers:
    those of its nested name (namespaces and function), then the others.
    """
    mangled = mangled_parts(text)
    if mangled is not None:
        return flat_words(" ".join(mangled[0])), flat_words(" ".join(mangled[1]))
    qual, _ = split_signature(text)
    rest = text.replace(qual, " ", 1) if qual else text
    return flat_words(qual), flat_words(rest)


@lru_cache(maxsize=16)
def function_words(text: str) -> str:
    """The words of the function's own name, without its namespaces ('deep_gemm::transpose_fp32' -> '_transpose_fp32_').

    The most specific words a name has: a namespace names a project (``deep_gemm``, ``fbgemm_gpu``),
    not the job of each of its kernels. A mangled name's function is the last identifier of its nested name.
    """
    mangled = mangled_parts(text)
    if mangled is not None:
        return flat_words(mangled[0][-1])
    qual, _ = split_signature(text)
    return flat_words(qual.rsplit("::", 1)[-1] if qual else text)


# An activation kernel of a mixture of experts (TensorRT-LLM's doActivationKernel, FlashInfer's
# moe::dev::activation): experts' activations are gated (SwiGLU and relatives), so act(gate) * up
_ACTIVATION = word_pattern(r"activation|do_?activation|act")
_MOE = rf"moe{T}*|{T}*moe|experts?"
_MOE_WORDS = word_pattern(_MOE)
# Triton attention kernels keep the name of the Triton tutorial's fused attention, `_fwd_kernel`
# (vLLM's prefix prefill, SGLang's and LightLLM's decode stages, xFormers' split-K): a name made of
# nothing but these words is attention by that convention; any other word decides first
# (and the backward's preprocess, dO . O per row, in the tutorial's and AOTriton's names)
CONVENTION_ATTENTION = re.compile(
    r"_(?:fwd|bwd)(?:_grouped)?_kernel(?:_(?:stage_?\d|split_?k|\d+|asm))*|_?(?:attn_)?bwd_preprocess(?:_varlen)?",
    re.IGNORECASE,
)
_OPTIMIZERS = re.compile(r"_(adamw|adam|sgd|lamb|adagrad|lion|rmsprop|adafactor|muon|novograd)(?=_)")
# An expert GEMM's name carries a tile (t32x32x256), a weight/activation precision (a8w4, afp4_wfp4,
# g1u1), a GGUF weight type (q4_K, q8_0: llama.cpp's MoE matmuls), a whole-layer fusion (mega_moe,
# fmoe, bgmv), a backward product (dW1, dX, wgrad) or a projection in a low precision (down_fp4, gate_up_fp8):
# aiter's, DeepGEMM's, vLLM's and Liger's MoE kernels
_EXPERT_GEMM = re.compile(
    r"_(?:t?\d+x\d+x\d+|a_?(?:fp)?\d+_?w_?(?:fp)?\d+|afp\d+|wfp\d+|g1u1|q_?\d_(?:k|[01])|mega|fmoe|bgmv|sgmv|d[wx]\d*"
    r"|[wd]grad|(?:down|up|gate_?up|gu)_(?:mx|nv)?fp_?[48])(?=_)"
)
# CUTLASS and CuTe (DSL) kernels are mostly matrix products: the library's name alone, when no other word speaks
_CUTLASS = word_pattern(r"cutlass|cute(?:_?dsl)?")
_ROUTER = word_pattern(rf"{T}*router{T}*|routing|gating|{_MOE}")
# Low-precision element and scale types as kernel names spell them (Triton writes fp8e4nv)
_NARROW = word_pattern(rf"fp_?8{T}*|fp_?4|e4m3|e5m2|e2m1|e4nv|mxfp_?\d|nvfp_?4|ue8m0|e8m0|float8{T}*|int_?[48]")
_SCALE_OR_CAST = word_pattern(r"scales?|scaling|cast|convert")
# A function name that starts with a quantize verb (quantize_mmq_q8_1, kdequant_mm_int32) prepares or
# finishes a matrix product's operands: the verb says the job, the GEMM word only whom it serves
_QUANT_VERB = re.compile(r"_k?_?(?:de)?quant(?:ize|ized)?_")
_GATED = re.compile(r"_(silu|gelu|relu|act|swiglu|geglu|reglu|fatrelu|swigluoai|gelu_?tanh)")


def infer_family(text: str) -> tuple[str, str | None, str] | None:
    """(family, op, what the words meant) from a name's words, or None when no rule matches.

    After the table, three readings weigh the whole name: a MoE kernel whose function name carries a
    tile shape or a weight/activation precision is an expert GEMM; a top-k or softmax in a router's or
    experts' namespace routes tokens; a conversion whose function name spells a low-precision type
    (or a scale / cast kernel writing one) quantizes.
    """
    own, rest = name_words(text)
    fn = function_words(text)
    if _ACTIVATION.search(fn) and _MOE_WORDS.search(own + rest):
        return "fused", None, "an activation kernel of mixture-of-experts layers (gated: act(gate) * up)"
    for words in (fn, own, rest):
        for family, op, pattern, unless, what in FAMILY_RULES:
            if pattern.search(words) and not (unless is not None and unless.search(words)):
                if op == "optimizer":
                    found = _OPTIMIZERS.search(words)
                    op = found.group(1) if found else None
                return _weigh(family, op, what, fn, own, rest)
    return _weigh(None, None, "", fn, own, rest)


def _weigh(
    family: str | None, op: str | None, what: str, fn: str, own: str, rest: str
) -> tuple[str, str | None, str] | None:
    """The readings of :func:`infer_family` that look past the first matching word."""
    if family == "gemm" and _QUANT_VERB.match(fn):
        return "quantize", None, "a (de)quantization before or after a matrix product (the verb leads the name)"
    if family == "moe-routing" and _MOE_WORDS.search(fn) and _EXPERT_GEMM.search(fn):
        return "gemm", None, "an expert GEMM of a mixture of experts (a tile shape or a weight/activation precision)"
    if family in ("sort", "softmax") and _ROUTER.search(own):
        return "moe-routing", None, "a top-k or softmax in a router's or experts' namespace (token routing)"
    if family in (None, "elementwise") and (
        _NARROW.search(fn) or (family == "elementwise" and _SCALE_OR_CAST.search(fn) and _NARROW.search(rest))
    ):
        return "quantize", None, "a conversion to or from a low-precision type (FP8, FP4, MX, int8/int4)"
    if family is None and _CUTLASS.search(own):
        return "gemm", None, "a CUTLASS / CuTe kernel with no other word (the library's kernels are mostly GEMMs)"
    return None if family is None else (family, op, what)


def gated_ops(text: str) -> list[str]:
    """The fused_ops of a gated activation: 'silu_and_mul' -> ['silu', 'mul']; 'swiglu' -> ['silu', 'mul']."""
    own, _ = name_words(text)
    m = _GATED.search(own)
    word = m.group(1) if m else "act"
    act = {"swiglu": "silu", "swigluoai": "silu", "geglu": "gelu", "reglu": "relu", "act": "activation"}.get(word, word)
    ops = [act.replace("_", ""), "mul"]
    if re.search(r"quant", own):
        ops.append("quantize")
    return ops
