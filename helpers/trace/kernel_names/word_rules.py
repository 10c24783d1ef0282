"""Which word of a kernel name means which family: the table :func:`.tokens.infer_family` reads.

Precedence (first rule wins), and why:

1. convolution before attention and GEMM: convolutions are implicit GEMMs and say so
   (``GridwiseGemm`` inside a Composable Kernel grouped convolution).
   KV-cache writes and reads (``concat_and_cache_mla``, ``set_kv_buffer``, a gather out of a
   cache) before attention: they move data.
2. attention before GEMM, quantize and softmax: attention kernels are built from GEMM pieces,
   softmax and, in quantized attention (SageAttention's ``qk_int8_sv_f8_..._attn``), casts.
   State-space and linear-recurrence layers (Mamba's selective scan and SSD chunks, the gated
   delta rule) right after: ``other`` with op ``state_space``, before the scan and cumsum words;
   then FFTs, box suppression (NMS), redzone checks and TMA-descriptor writes (``other``) and
   GroupNorm's ``gn``, before the fill, padding, gather and finalize words their names also carry.
   A re-layout of weights for a later GEMM (``interleave_..._for_..._gemm``) is a copy before
   the GEMM words; token index maps (``src2dst``, ``row_id_map``), the MoE auxiliary loss and the
   finalize after an expert GEMM are MoE routing before them.
3. GEMM before communication, quantize and MoE routing: an ``fp8_gemm``, a ``w8a8`` quantized
   matmul, a ``fused_moe`` expert GEMM or a GEMM with a fused all-gather spend their time in the
   matrix product, so they are GEMMs (with the dtype and scale layout read separately).
4. communication: collectives, and ``dispatch`` / ``combine`` only beside an expert-parallel or
   MoE word (DeepEP's ``deep_ep::intranode::dispatch``): alone those words mean nothing.
5. an L2 norm is a reduction (optimizers' gradient clipping) unless it has a pass of its own (a
   layer's ``l2norm_fwd``), any other ``norm`` a normalization;
   normalization before quantize (a norm with a fused FP8 quantization is still a norm).
6. gated activations (``silu_and_mul``, ``swiglu``) are the family ``fused`` with their
   ``fused_ops``, as Liger's GeGLU already is; a single activation is ``elementwise``.
7. quantize before MoE routing and softmax; MoE routing before softmax and sort
   (``topkGatingSoftmax``, ``count_and_sort_expert_tokens`` route tokens to experts).
8. embedding (not rotary "embeddings", which are elementwise), beam-search bookkeeping and
   sampling (with the logit penalties before it), both ``other``, before sort (a beam stage is a
   top-k); a ``chunk_..._fwd`` stage of a chunked linear-attention layer before the plain words; then re-layouts of data or block scales (swizzle, interleave,
   shuffle, padding) as copies, before the plain elementwise words a ``scale`` or an ``add`` would match.
9. optimizer steps (Adam, SGD, LAMB ...) are ``elementwise`` with ``op`` naming the optimizer,
   as the ATen and Apex fused optimizers already are: what bounds them is memory traffic.
10. rendering (``other``), then reduction, elementwise, copy: the plainest words last.

Two conventions stand before and after the table: an activation kernel in a mixture of experts is
gated (``fused``), and a Triton name made only of ``_fwd_kernel`` / ``_bwd_kernel`` and stage or
split-K suffixes is attention; both are inferred like every other reading here. Expert-GEMM layout
words (``computeStrides``, ``seg_indptr``, an EP ``scatter``/``gather``) are MoE routing before any
GEMM word in the template arguments, and ``deep_gemm`` names a project, not a product.

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

T = "[a-z0-9]"  # one character of a word (words are joined by "_" in the flat form)


def word_pattern(alternatives: str) -> re.Pattern[str]:
    """A pattern of whole words in the flat form."""
    return re.compile(rf"_(?:{alternatives})(?=_)")


# A grouped GEMM with a TMA descriptor per group writes them on the device first (CUTLASS's
# tensormaps_init / _perform_update, DeepSeek's fill_tensormaps_kernel): setup, not a fill of data
_TMA_DESCRIPTORS = word_pattern(
    r"(?:fill|init|initiali[sz]e|update|prepare|make|create|setup)_?tensor_?maps?"
    r"|tensor_?maps?_(?:init|initiali[sz]e|update|perform_update|fill|prepare)"
)
# An L2 norm with a pass of its own (FLA's l2norm_fwd/_bwd on q and k) normalizes a layer's rows
_L2NORM_LAYER = word_pattern(r"(?:l_?2_?norm|l2norm)(?=_(?:fwd|bwd|forward|backward)_)")
# (family, op or None, pattern, unless pattern or None, what the words mean): first match wins.
_CONTEXT_EP = r"deep_?ep|deepep|ep|intranode|internode|low_?latency|nvshmem|rdma|nvl|a_?2_?a|moe|experts?"
FAMILY_RULES: tuple[tuple[str, str | None, re.Pattern[str], re.Pattern[str] | None, str], ...] = (
    (
        "convolution",
        None,
        word_pattern(
            rf"conv|convolution|conv{T}*d|{T}*conv_?fwd|{T}*conv_?bwd|grouped_?conv{T}*|winograd{T}*|im_?2_?col"
        ),
        # a re-layout named after the layer it serves (oneDNN's conv_reorder) moves data
        word_pattern(r"conv(?=_(?:weights?_|filter_)?(?:reorder|transpose|relayout)_)"),
        "convolution words (conv, conv2d, grouped_conv, winograd, im2col)",
    ),
    (
        "copy",
        None,
        word_pattern(
            rf"(?:reshape|concat|cat|quant)_?and_?cache{T}*|append_?paged_?kv_?(?:mla_?)?cache{T}*"
            rf"|appendpagedkv(?:mla)?cache{T}*|(?:set|store|write|save)(?=_(?:[a-z0-9]+_)?kv_?(?:buffer|cache)_)"
            r"|(?:set|store|write|save|assign)(?=_(?:[a-z0-9]+_){0,3}(?:pool|cache)_)"
            r"|gather(?=_(?:[a-z0-9]+_){0,4}cache_)"
        ),
        None,
        "a KV-cache write or read (reshape_and_cache, concat_and_cache_mla, AppendPagedKV(Mla)Cache, set/store "
        "a KV buffer, a write into a token pool or cache, a gather out of a cache): data movement, even beside "
        "an attention word",
    ),
    (
        "attention",
        None,
        word_pattern(
            rf"{T}*attn{T}*|{T}*attention{T}*|fmha{T}*|mha|mqa|gqa|mla|{T}*sdpa{T}*|flash_?(?:fwd|bwd|decoding|decode|prefill|mla)|alibi"
            r"|with_(?:paged_|ragged_)?kv_?cache"
            rf"|(?:prefill|decode|decoding)(?=_(?:\w+_)?(?:paged|kv|ragged|qk))|paged_?kv{T}*|merge_?states?"
            r"|flash|nsa|dsa|cascade(?=_(?:[a-z0-9]+_)?(?:prefix|suffix|decode|prefill|mqa|mha|merge)_)"
        ),
        word_pattern(rf"(?:attn|attention)_?(?:score_?)?softmax{T}*"),
        "attention words (attn, attention, fmha, mha, mla, sdpa, flash_fwd, flash_decode, alibi position biases, "
        "prefill/decode with a paged KV cache, FlashInfer's ...WithKVCache, FlashAttention's flash:: namespace, "
        "native/DeepSeek sparse attention nsa/dsa, cascade attention over a shared prefix)",
    ),
    (
        "other",
        "state_space",
        word_pattern(
            rf"mamba{T}*|ssm|ssd|selective_?(?:scan|state){T}*|chunk_?(?:scan|state){T}*|state_?passing"
            rf"|delta_?rule|gated_?delta{T}*|gdn|delta_?net|solve_?tril|recompute_?w_?u|wy_?fast|kkt"
        ),
        None,
        "a state-space or linear-recurrence layer (Mamba selective scan / SSD chunks, gated delta rule): "
        "neither attention nor a plain scan",
    ),
    (
        "other",
        "hadamard_transform",
        word_pattern(r"hadamard_?transform"),
        None,
        "a Hadamard transform (rotating activations or weights before a low-bit quantization)",
    ),
    # transforms and vision ops with a known job of their own, before the copy words their
    # padding or gather arguments would match (regular_fft_pad, fused_vision_..._nms)
    (
        "other",
        "fft",
        word_pattern(rf"{T}*fft|fft{T}*|bluestein{T}*"),
        None,
        "a fast Fourier transform (cuFFT's regular, vector, Bluestein and prime-factor stages; rfft, irfft)",
    ),
    (
        "other",
        "nms",
        word_pattern(r"nms|batched_?nms|non_?max(?:imum)?_?suppression"),
        None,
        "non-maximum suppression of detection boxes",
    ),
    (
        "other",
        "redzone_check",
        word_pattern(rf"redzone{T}*"),
        None,
        "a redzone check: the guard bytes around buffers an autotuned kernel wrote (XLA, TensorFlow)",
    ),
    (
        "other",
        "tma_descriptor",
        _TMA_DESCRIPTORS,
        None,
        "writing TMA descriptors (CUtensorMap) for a later GEMM's loads",
    ),
    # gn is GroupNorm's usual abbreviation; its finalize pass is no MoE finalize
    (
        "normalization",
        "group_norm",
        word_pattern(r"gn"),
        None,
        "group norm by its abbreviation (gn_accum, gn_finalize)",
    ),
    (
        "reduction",
        None,
        word_pattern(r"nvfuser(?=_(?:(?:inner|outer)_)*persistent_)"),
        None,
        "an nvFuser persistent kernel (its scheduler's name: a normalization or softmax whose reduction stays on chip)",
    ),
    (
        "moe-routing",
        None,
        word_pattern(
            rf"compute_?strides{T}*|seg_?indptr|ids_?helper|expert_?ids|src_?2_?dst|dst_?2_?src|row_?id_?map|aux_?loss|load_?balanc{T}*"
            r"|finalize(?=_(?:[a-z0-9]+_){0,2}(?:scatter|matmul|gemm|moe|routing)_)"
            r"|(?:ep|deep_?ep|deepep|moe|experts?)(?=_(?:(?!all_)[a-z0-9]+_)?(?:scatter|gather)_)"
        ),
        None,
        "the layout of an expert (grouped) GEMM: its strides (TensorRT-LLM's computeStrides...), the token "
        "segments per expert (seg_indptr), the expert id lists of a MoE GEMM (ids_helper), token index maps (src2dst, row_id_map), an expert-parallel "
        "scatter/gather of tokens, the load-balancing auxiliary loss, the finalize after an expert GEMM",
    ),
    (
        "copy",
        None,
        word_pattern(
            r"(?:interleave|swizzle|shuffle|preshuffle|rearrange|reorder|pack)(?=_(?:[a-z0-9]+_)*?for_)"
            r"|sort(?=_(?:[a-z0-9]+_){0,2}by_(?:map|index|indices|idxs?)_)"
        ),
        None,
        "a re-layout of weights or scales for a later GEMM (interleave ... for ... gemm), a 'sort' by a given "
        "map (a reorder: nothing is compared)",
    ),
    (
        "gemm",
        None,
        word_pattern(
            rf"(?!fbgemm)(?<!deep_){T}*gemm(?!a){T}*|gemv{T}*|mat_?vec{T}*|{T}*matmul{T}*|bmm|mm|scaled_?mm|grouped_?mm|{T}*wgmma{T}*|hgmma"
            rf"|umma|mma|tcgen_?0?5|mfma|fused_?moe{T}*|wv_?spli?t_?k{T}*|bstensorop|w_?[48]_?a_?(?:8|16)|marlin{T}*"
            r"|mul_?mat(?:_?vec)?|mmv?q|mmv?f|lora(?=_(?:[a-z0-9]+_)?(?:shrink|expand)_)|(?:shrink|expand)(?=_(?:[a-z0-9]+_)?lora_)"
            rf"|machete{T}*|bgmv|sgmv|gptq|awq|(?:bf16|f16|fp16|f8|fp8|i4|i8|f32){{2,3}}"
        ),
        None,
        "matrix-product words (gemm, gemv, MatVec, matmul, bmm, mm, GemmUniversal, wgmma/tcgen05/umma tensor-core "
        "instructions, fused_moe expert GEMMs, LoRA shrink/expand and bgmv/sgmv, ggml's mul_mat/mmq, GPTQ/AWQ, FBGEMM's type chains f8f8bf16 / bf16i4); "
        "not the project name deep_gemm",
    ),
    (
        "gemm",
        None,
        word_pattern(rf"block_?scaled|blockscaled{T}*"),
        word_pattern(rf"{T}*quant{T}*"),
        "block-scaled (a low-precision tensor-core product), unless the name says it only quantizes",
    ),
    (
        "moe-routing",
        None,
        word_pattern(
            rf"(?:get_)?dispatch_?layout|(?:{_CONTEXT_EP})(?=_(?:\w+_)?(?:permute|unpermute|reorder)_)"
            r"|grouped_?topk|group_(?:\w+_)?topk|topk_?with_?score\w*?|score_?function"
        ),
        None,
        "MoE token layout and permutation beside an expert-parallel word (DeepEP's get_dispatch_layout, "
        "deepep_permute), group-limited expert top-k (grouped_topk) and a top-k over router scores (topk_with_score_function)",
    ),
    (
        "communication",
        None,
        word_pattern(
            r"all_?reduce|allreduce|all_?gather|allgather|reduce_?scatter|reducescatter|all_?to_?all|alltoall"
            rf"|all_?2_?all|send_?recv|sendrecv|nccl{T}*|rccl{T}*|nvshmem{T}*|multimem{T}*|deep_?ep|pplx{T}*"
            r"|symmetric_?memory|symm_?mem|lamport[a-z0-9]*|ar_?fusion|allreduce_?fusion|cross_?device_?reduce"
            r"|a_?2_?a|comm|barrier|ipc|(?:one|two)_?shot(?=_(?:ar|all_?reduce|allreduce)_)"
            rf"|(?:dispatch|combine)(?=_(?:\w+_)?(?:{_CONTEXT_EP})_)|(?:{_CONTEXT_EP})(?=_(?:\w+_)?(?:dispatch|combine)_)"
        ),
        None,
        "collectives (all_reduce, all_gather, reduce_scatter, all_to_all / a2a, send/recv, NVSHMEM, Lamport-flag "
        "all-reduce buffers, a comm namespace, cross-GPU barriers, IPC, one-/two-shot all-reduce) and MoE "
        "expert-parallel dispatch/combine",
    ),
    ("reduction", "l2_norm", word_pattern(r"l_?2_?norm|norm_?l_?2|l2norm"), _L2NORM_LAYER, "an L2 norm (a reduction)"),
    (
        "normalization",
        None,
        word_pattern(rf"{T}*norm(?!al(?!i))[a-z0-9]*|rms|dyt|dynamic_?tanh"),
        word_pattern(rf"renorm{T}*"),
        "normalization words (norm, rms_norm, layernorm, groupnorm, batchnorm, DyT the norm replacement); not a renorm of probabilities",
    ),
    (
        "fused",
        None,
        word_pattern(
            r"(?:silu|gelu|relu|act|swiglu|geglu|gelu_?tanh|fatrelu|swigluoai)_(?:and_)?mul|swiglu\w*?|geglu|reglu"
            r"|glu|glu_?adaptor|unary_?gated|gated_?(?:op|act|activation|unary|silu|gelu|mlp)"
        ),
        None,
        "a gated activation (act(x) * y: silu_and_mul, silu_mul, gelu_and_mul, swiglu, geglu, a GLU adaptor)",
    ),
    (
        "quantize",
        None,
        word_pattern(
            rf"{T}*quant{T}*|{T}*dequant{T}*|(?:cast|convert|to)_(?:to_)?(?:fp_?8|fp_?4|int_?8|int_?4|mxfp_?\d|nvfp_?4)"
            r"|(?:into|to)_u?e8m0|(?:fp|f)_?[468]_to_(?:bf_?16|fp_?16|f16|fp_?32|f32|half|float)"
            rf"|(?:mean|amax|absmax)_?scale{T}*|scale_?from_?amax|reconstruct(?=_(?:[a-z0-9]+_)*?\d+_?bit_)"
        ),
        None,
        "(de)quantization words (quant, dequant, a cast to fp8/fp4/int8, a scale from a mean or amax)",
    ),
    (
        "moe-routing",
        None,
        word_pattern(
            rf"moe{T}*|{T}*moe|experts?|gating|router|routing|top_?k_?gating|topkgating{T}*|unpermute|"
            rf"expand_?input_?rows|finalize_?moe\w*?|finalize{T}*"
        ),
        None,
        "mixture-of-experts routing (moe, expert, gating, router/routing, unpermute, expand rows, finalize)",
    ),
    (
        "softmax",
        "softmax",
        word_pattern(rf"{T}*softmax{T}*|soft_max|sparsemax|entmax{T}*"),
        None,
        "softmax and its sparse relatives (sparsemax, entmax)",
    ),
    (
        "embedding",
        None,
        word_pattern(rf"{T}*embedding{T}*|embed|embeddings|tbe|embedding_?bag"),
        word_pattern(r"rotary|rope|mrope|pos|position|positional"),
        "embedding-table lookups (embedding, embedding_bag, TBE); rotary 'embeddings' are elementwise",
    ),
    (
        "other",
        "beam_search",
        word_pattern(rf"beam_?search{T}*|beam_?stage{T}*|beam|gather_?tree|unfinished{T}*"),
        None,
        "beam-search bookkeeping (beam stages, the final gather of paths, unfinished beams)",
    ),
    (
        "other",
        "sampling",
        word_pattern(rf"{T}*sampling{T}*|sampler|top_?p|min_?p|renorm_?probs?{T}*|{T}*penalt{T}*"),
        None,
        "sampling from a distribution (and the logit penalties before it)",
    ),
    (
        "sort",
        None,
        word_pattern(rf"{T}*sort{T}*|radix{T}*|top_?k|topk{T}*|histogram{T}*|bucketize|searchsorted|kth_?value|unique"),
        None,
        "sorting and selection (sort, radix, topk, argsort, histogram, unique)",
    ),
    (
        "copy",
        None,
        word_pattern(rf"{T}*swizzle{T}*|interleave{T}*|deinterleave|shuffle{T}*|pad|padding|unpad|unpadding"),
        None,
        "a re-layout (swizzle, interleave, shuffle, padding added or removed) of data or block scales, also "
        "after an arithmetic verb (add_padding)",
    ),
    (
        "elementwise",
        "optimizer",
        word_pattern(
            rf"adam{T}*|{T}*adam|adamw|sgd|lamb|adagrad|lion|rmsprop|adafactor|muon|novograd|optimizer{T}*|optim"
        ),
        None,
        "an optimizer step (adam, sgd, lamb ...): elementwise over the parameters",
    ),
    (
        "other",
        "state_space",
        word_pattern(r"chunk(?=_(?:[a-z0-9]+_){0,3}(?:fwd|bwd)_)"),
        None,
        "a stage of a chunked linear-attention or state-space layer (chunk_..._fwd)",
    ),
    (
        "other",
        "render",
        word_pattern(rf"render{T}*|rasteri[sz]e{T}*|rasteri[sz]ation"),
        None,
        "rendering: rasterizing splats or triangles into an image (3D Gaussian splatting, differentiable renderers)",
    ),
    (
        "elementwise",
        None,
        word_pattern(rf"sub_?mean|submean{T}*"),
        None,
        "subtracting a mean (centering), not computing it",
    ),
    (
        "reduction",
        None,
        word_pattern(
            rf"{T}*reduce{T}*|reduction|sum|mean|amax|amin|argmax|argmin|cross_?entropy|loss|scan|cumsum|prefix_?sum"
            rf"|kl_?div{T}*|kldiv{T}*|lse|logsumexp|jsd|tv_?distance|{T}*divergence|nll"
        ),
        None,
        "reductions (reduce, sum, mean, amax, argmax, scan, log-sum-exp) and losses (cross entropy, KL, JSD, TV)",
    ),
    (
        "elementwise",
        None,
        word_pattern(
            rf"{T}*elementwise{T}*|pointwise|rotary|rope|mrope|add|mul|div|sub|fill|zero|zeros|relu|gelu|silu|sigmoid"
            r"|tanh|swish|mish|dropout|clamp|where|scale|scaled|cast|convert|abs|neg|sqrt|rsqrt|pow|exp|bias_?add"
            rf"|init|initiali[sz]e{T}*"
        ),
        None,
        "elementwise words (add, mul, gelu, rotary, dropout, cast ...)",
    ),
    (
        "copy",
        None,
        word_pattern(
            rf"copy|memcpy|cpy|get_?rows|transpose|permute|permutation|duplicate{T}*|expand|reorder|reshape_?and_?cache{T}*|kv_?cache|concat|cat|pack|unpack|pad|gather"
            r"|scatter|index_?select|slice|flip|roll|repeat|copy_?blocks|to_?dense|to_?padded_?dense|swap(?=_dim)"
        ),
        None,
        "data movement (copy, transpose, permute, duplicate or expand rows, kv-cache writes, gather/scatter, concat)",
    ),
)
