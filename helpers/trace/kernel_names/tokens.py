"""Which words of a kernel name mean what: the table behind the decoder's last-resort reading.

A name no library's parser claims is split into words (C++ namespaces and template arguments,
snake_case, camelCase, letters and digits: ``vllm::moe::topkGatingSoftmax<8, ...>`` gives
``vllm, moe, topk, gating, softmax``), and the first rule of :data:`FAMILY_RULES` whose pattern
matches names the family. Every such reading is an inference (listed in ``inferred``), however
plain the word: libraries name kernels as they like.

Precedence (first rule wins), and why:

1. convolution before attention and GEMM: convolutions are implicit GEMMs and say so
   (``GridwiseGemm`` inside a Composable Kernel grouped convolution).
2. attention before GEMM, quantize and softmax: attention kernels are built from GEMM pieces,
   softmax and, in quantized attention (SageAttention's ``qk_int8_sv_f8_..._attn``), casts.
3. GEMM before communication, quantize and MoE routing: an ``fp8_gemm``, a ``w8a8`` quantized
   matmul, a ``fused_moe`` expert GEMM or a GEMM with a fused all-gather spend their time in the
   matrix product, so they are GEMMs (with the dtype and scale layout read separately).
4. communication: collectives, and ``dispatch`` / ``combine`` only beside an expert-parallel or
   MoE word (DeepEP's ``deep_ep::intranode::dispatch``): alone those words mean nothing.
5. an L2 norm is a reduction (optimizers' gradient clipping), any other ``norm`` a normalization;
   normalization before quantize (a norm with a fused FP8 quantization is still a norm).
6. gated activations (``silu_and_mul``, ``swiglu``) are the family ``fused`` with their
   ``fused_ops``, as Liger's GeGLU already is; a single activation is ``elementwise``.
7. quantize before MoE routing and softmax; MoE routing before softmax and sort
   (``topkGatingSoftmax``, ``count_and_sort_expert_tokens`` route tokens to experts).
8. embedding (not rotary "embeddings", which are elementwise), sampling, sort.
9. optimizer steps (Adam, SGD, LAMB ...) are ``elementwise`` with ``op`` naming the optimizer,
   as the ATen and Apex fused optimizers already are: what bounds them is memory traffic.
10. reduction, elementwise, copy: the plainest words last.

Sources for the words (names only, read in the public repositories): PyTorch ATen and Inductor;
CUTLASS (``GemmUniversal``, ``GroupProblemShape``, ``blockscaled``, ``bstensorop``, ``ue4m3``,
``ue8m0``); cuBLAS nvjet names in traces (``nvjet_sm100_...Avec16UE4M3``); DeepGEMM
(``fp8_gemm_kernel``, ``sm90_fp8_gemm_1d2d_impl``); DeepEP (``intranode::dispatch``,
``internode::combine``); vLLM and SGLang (``fused_add_rms_norm_kernel``, ``topkGatingSoftmax``,
``moe_align_block_size_kernel``, ``count_and_sort_expert_tokens_kernel``, ``act_and_mul_kernel``,
``per_token_group_quant_fp8``, ``scaled_fp8_quant_kernel``, ``reshape_and_cache``); TensorRT-LLM
(``expandInputRowsKernel``, ``finalizeMoeRoutingKernel``); FlashInfer (``BatchPrefillWithPagedKV
CacheKernel``, ``FusedAddRMSNormKernel``, sampling kernels); FBGEMM (``split_embedding_*``,
``batch_index_select_dim0_*``); Transformer Engine (``cast_transpose``, ``rmsnorm_fwd``);
SageAttention; Composable Kernel. The data types follow the OCP Microscaling (MX) spec (MXFP8,
MXFP4: E8M0 block scales per 32 elements) and NVIDIA's NVFP4 (E2M1 with UE4M3 scales per 16).
"""

from __future__ import annotations

import re
from functools import lru_cache

from .common import mangled_words, split_signature

_CHUNK = re.compile(r"[A-Za-z0-9]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
T = "[a-z0-9]"  # one character of a word (words are joined by "_" in the flat form)


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


def _w(alternatives: str) -> re.Pattern[str]:
    """A pattern of whole words in the flat form."""
    return re.compile(rf"_(?:{alternatives})(?=_)")


@lru_cache(maxsize=16)
def name_words(text: str) -> tuple[str, str]:
    """(words of the qualified function name, words of everything else), both in the flat form.

    The function's own name and namespaces speak first; template arguments (``device_kernel<
    GemmUniversal<...>>``) only when those say nothing. An Itanium-mangled name gives its identifiers.
    """
    mangled = mangled_words(text)
    if mangled is not None:
        return flat_words(" ".join(mangled[:3])), flat_words(" ".join(mangled[3:]))
    qual, _ = split_signature(text)
    rest = text.replace(qual, " ", 1) if qual else text
    return flat_words(qual), flat_words(rest)


# (family, op or None, pattern, unless pattern or None, what the words mean): first match wins.
_CONTEXT_EP = r"deep_?ep|deepep|ep|intranode|internode|low_?latency|nvshmem|rdma|nvl|a_?2_?a|moe|experts?"
FAMILY_RULES: tuple[tuple[str, str | None, re.Pattern[str], re.Pattern[str] | None, str], ...] = (
    (
        "convolution",
        None,
        _w(rf"conv|convolution|conv{T}*d|{T}*conv_?fwd|{T}*conv_?bwd|grouped_?conv{T}*|winograd{T}*|im_?2_?col"),
        None,
        "convolution words (conv, conv2d, grouped_conv, winograd, im2col)",
    ),
    (
        "attention",
        None,
        _w(
            rf"{T}*attn{T}*|{T}*attention{T}*|fmha{T}*|mha|mqa|gqa|mla|{T}*sdpa{T}*|flash_?(?:fwd|bwd|decoding|mla)"
            r"|(?:prefill|decode|decoding)(?=_(?:\w+_)?(?:paged|kv|ragged|qk))|paged_?kv{T}*|merge_?states?"
        ),
        None,
        "attention words (attn, attention, fmha, mha, mla, sdpa, flash_fwd, prefill/decode with a paged KV cache)",
    ),
    (
        "gemm",
        None,
        _w(
            rf"{T}*gemm{T}*|gemv{T}*|{T}*matmul{T}*|bmm|mm|scaled_?mm|grouped_?mm|{T}*wgmma{T}*|hgmma|umma|mma"
            rf"|tcgen_?0?5|mfma|fused_?moe{T}*|wv_?split_?k{T}*|bstensorop|w_?[48]_?a_?(?:8|16)"
        ),
        None,
        "matrix-product words (gemm, gemv, matmul, bmm, mm, GemmUniversal, wgmma/tcgen05/umma tensor-core "
        "instructions, fused_moe expert GEMMs)",
    ),
    (
        "gemm",
        None,
        _w(rf"block_?scaled|blockscaled{T}*"),
        _w(rf"{T}*quant{T}*"),
        "block-scaled (a low-precision tensor-core product), unless the name says it only quantizes",
    ),
    (
        "communication",
        None,
        _w(
            r"all_?reduce|allreduce|all_?gather|allgather|reduce_?scatter|reducescatter|all_?to_?all|alltoall"
            rf"|all_?2_?all|send_?recv|sendrecv|nccl{T}*|rccl{T}*|nvshmem{T}*|multimem{T}*|deep_?ep|pplx{T}*"
            rf"|(?:dispatch|combine)(?=_(?:\w+_)?(?:{_CONTEXT_EP})_)|(?:{_CONTEXT_EP})(?=_(?:\w+_)?(?:dispatch|combine)_)"
        ),
        None,
        "collectives (all_reduce, all_gather, reduce_scatter, all_to_all, send/recv, NVSHMEM) and MoE "
        "expert-parallel dispatch/combine",
    ),
    ("reduction", "l2_norm", _w(r"l_?2_?norm|norm_?l_?2|l2norm"), None, "an L2 norm (a reduction)"),
    (
        "normalization",
        None,
        _w(rf"{T}*norm(?!al(?!i))[a-z0-9]*"),
        None,
        "normalization words (norm, rms_norm, layernorm, groupnorm, batchnorm)",
    ),
    (
        "fused",
        None,
        _w(r"(?:silu|gelu|relu|act|swiglu|geglu|gelu_?tanh|fatrelu|swigluoai)_and_mul|swiglu\w*?|geglu|reglu"),
        None,
        "a gated activation (act(x) * y: silu_and_mul, gelu_and_mul, swiglu, geglu)",
    ),
    (
        "quantize",
        None,
        _w(
            rf"{T}*quant{T}*|{T}*dequant{T}*|(?:cast|convert|to)_(?:to_)?(?:fp_?8|fp_?4|int_?8|int_?4|mxfp_?\d|nvfp_?4)"
        ),
        None,
        "(de)quantization words (quant, dequant, a cast to fp8/fp4/int8)",
    ),
    (
        "moe-routing",
        None,
        _w(
            rf"moe{T}*|{T}*moe|experts?|gating|router|routing|top_?k_?gating|topkgating{T}*|unpermute|"
            r"expand_?input_?rows|finalize_?moe\w*?"
        ),
        None,
        "mixture-of-experts routing (moe, expert, gating, router/routing, unpermute, expand rows, finalize)",
    ),
    ("softmax", "softmax", _w(rf"{T}*softmax{T}*"), None, "softmax"),
    (
        "embedding",
        None,
        _w(rf"{T}*embedding{T}*|embed|embeddings|tbe|embedding_?bag"),
        _w(r"rotary|rope|pos|position|positional"),
        "embedding-table lookups (embedding, embedding_bag, TBE); rotary 'embeddings' are elementwise",
    ),
    ("other", "sampling", _w(rf"{T}*sampling{T}*|sampler|top_?p|min_?p"), None, "sampling from a distribution"),
    (
        "sort",
        None,
        _w(rf"{T}*sort{T}*|radix{T}*|top_?k|topk{T}*|histogram{T}*|bucketize|searchsorted|kth_?value|unique"),
        None,
        "sorting and selection (sort, radix, topk, argsort, histogram, unique)",
    ),
    (
        "elementwise",
        "optimizer",
        _w(rf"{T}*adam{T}*|adamw|sgd|lamb|adagrad|lion|rmsprop|adafactor|muon|novograd"),
        None,
        "an optimizer step (adam, sgd, lamb ...): elementwise over the parameters",
    ),
    (
        "reduction",
        None,
        _w(rf"{T}*reduce{T}*|reduction|sum|mean|amax|amin|argmax|argmin|cross_?entropy|loss|scan|cumsum|prefix_?sum"),
        None,
        "reductions (reduce, sum, mean, amax, argmax, scan, cross entropy)",
    ),
    (
        "elementwise",
        None,
        _w(
            rf"{T}*elementwise{T}*|pointwise|rotary|rope|add|mul|div|sub|fill|zero|zeros|relu|gelu|silu|sigmoid"
            r"|tanh|swish|mish|dropout|clamp|where|scale|scaled|cast|convert|abs|neg|sqrt|rsqrt|pow|exp|bias_?add"
        ),
        None,
        "elementwise words (add, mul, gelu, rotary, dropout, cast ...)",
    ),
    (
        "copy",
        None,
        _w(
            rf"copy|memcpy|transpose|permute|reshape_?and_?cache{T}*|kv_?cache|concat|cat|pack|unpack|pad|gather"
            r"|scatter|index_?select|slice|flip|roll|repeat|copy_?blocks"
        ),
        None,
        "data movement (copy, transpose, permute, kv-cache writes, gather/scatter, concat)",
    ),
)
_OPTIMIZERS = re.compile(r"_(adamw|adam|sgd|lamb|adagrad|lion|rmsprop|adafactor|muon|novograd)(?=_)")
_GATED = re.compile(r"_(silu|gelu|relu|act|swiglu|geglu|reglu|fatrelu|swigluoai|gelu_?tanh)")


def infer_family(text: str) -> tuple[str, str | None, str] | None:
    """(family, op, what the words meant) from a name's words, or None when no rule matches."""
    own, rest = name_words(text)
    for words in (own, rest):
        for family, op, pattern, unless, what in FAMILY_RULES:
            if pattern.search(words) and not (unless is not None and unless.search(words)):
                if op == "optimizer":
                    found = _OPTIMIZERS.search(words)
                    op = found.group(1) if found else None
                return family, op, what
    return None


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


# --------------------------------------------------------------------------- dtype, arch, scales
# Element types in the order of preference when a name holds several: the narrowest first (an FP8
# GEMM with a bf16 output is an FP8 GEMM). Long spellings are found inside a chunk (``Avec16UE4M3``,
# ``ue4m3xe2m1``); short ones (f16, s8, half) only as a whole chunk, where they cannot be part of
# another word.
_TYPES_IN_CHUNK = (
    ("nvfp4", "nvfp4"),
    ("mxfp4", "mxfp4"),
    ("mxfp6", "mxfp6"),
    ("mxfp8", "mxfp8"),
    ("e2m1", "fp4_e2m1"),
    ("float4", "fp4_e2m1"),
    ("fp4", "fp4_e2m1"),
    ("w4a16", "w4a16"),
    ("w4a8", "w4a8"),
    ("int4", "int4"),
    ("e4m3", "fp8_e4m3"),
    ("e5m2", "fp8_e5m2"),
    ("float8", "fp8"),
    ("fp8", "fp8"),
    ("w8a8", "w8a8"),
    ("w8a16", "w8a16"),
    ("int8", "int8"),
    ("bfloat16", "bf16"),
    ("bf16", "bf16"),
    ("float16", "fp16"),
    ("fp16", "fp16"),
    ("tf32", "tf32"),
    ("fp32", "fp32"),
)
_TYPES_WHOLE = {"f8": "fp8", "s8": "int8", "i8": "int8", "s4": "int4", "f16": "fp16", "half": "fp16", "f32": "fp32"}
_SCALES = ("ue8m0", "ue4m3", "e8m0")
_TYPE_RE = re.compile("|".join((*_SCALES, *(t for t, _ in _TYPES_IN_CHUNK))))
_RANK = {short: i for i, (_, short) in enumerate(_TYPES_IN_CHUNK)}
_ARCH_RE = re.compile(r"(?<![a-z0-9])(?:sm_?(\d{2,3}[a-f]?)|(gfx\d{2,4}[a-z]?))(?![a-z0-9])")

# Scale layouts of low-precision GEMMs and quantizers, as the names write them (first match wins).
_SCALE_LAYOUTS = (
    (r"block_?scaled|blockscaled|bstensorop|mxf8f6f4|mxf4|_a?vec_?(?:16|32)|_vs_?(?:16|32)_", "block-scaled"),
    (r"_1_?d_?2_?d_|1d2d", "1d2d (per-token-group activations, per-block weights)"),
    (r"_1_?d_?1_?d_|1d1d", "1d1d (per-token-group activations and weights)"),
    (r"blockwise|block_?wise|per_?block", "blockwise"),
    (r"per_?token_?group|token_?group", "per-token-group"),
    (r"rowwise|row_?wise|per_?row", "rowwise"),
    (r"per_?token", "per-token"),
    (r"per_?channel|channelwise|channel_?wise", "per-channel"),
    (r"per_?tensor|tensorwise|tensor_?wise", "per-tensor"),
)


# CUDA's vector types (int4 = four ints, float4 = four floats) share spellings with 4-bit types:
# in template arguments and parameters (`int4*`) they are vector types, never read as dtypes.
_VECTOR_TYPES = frozenset(f"{t}{n}" for t in ("int", "uint", "float", "char", "uchar", "short", "half") for n in (2, 4))
_WHOLE_RE = re.compile(r"(?<![a-z0-9])(?:" + "|".join(_TYPES_WHOLE) + r"|[a-z]*[24])(?![a-z0-9])")
_TYPE_OF = dict(_TYPES_IN_CHUNK)


def read_types(text: str) -> tuple[str | None, str | None]:
    """(element dtype, block-scale dtype) written in a name, each None when the name says none."""
    low = text.lower()
    qual_end = len(split_signature(text)[0]) + (5 if low.startswith("void ") else 0)
    vectors = {
        m.start() for m in _WHOLE_RE.finditer(low, qual_end) if m.group(0) in _VECTOR_TYPES
    }  # positions of `int4` and friends outside the function's own name
    found: list[str] = []
    scale = None
    for m in _WHOLE_RE.finditer(low):
        if m.group(0) in _TYPES_WHOLE:
            found.append(_TYPES_WHOLE[m.group(0)])
    for m in _TYPE_RE.finditer(low):
        word = m.group(0)
        if m.start() in vectors:
            continue
        if word in _SCALES:
            scale = scale or ("ue8m0" if word == "e8m0" else word)
        else:
            found.append(_TYPE_OF[word])
    if not found:
        return None, scale
    best = min(found, key=lambda s: _RANK.get(s, len(_RANK)))
    if best == "fp8":  # prefer the exact FP8 format when the name also gives it
        best = next((s for s in found if s.startswith("fp8_")), best)
    return best, scale


def read_arch(text: str) -> str | None:
    """'sm90' / 'sm100a' / 'gfx942' when the name writes one (``sm_90``, ``Sm90``, ``nvjet_sm100_``)."""
    m = _ARCH_RE.search(text.lower())
    if m is None:
        return None
    return f"sm{m.group(1)}" if m.group(1) else m.group(2)


def read_scale_layout(text: str) -> str | None:
    """How a low-precision GEMM or quantizer scales its operands, when the name says (block-scaled, 1d2d ...)."""
    words = "".join(name_words(text))
    for pattern, layout in _SCALE_LAYOUTS:
        if re.search(pattern, words):
            return layout
    return None
