"""The course's kernel names, registered with the engine so its traces name the course's kernels."""

from __future__ import annotations

# The course's own Triton kernels (helpers/kernels, notebook 06), by the name Triton gives them: the
# @triton.jit function's name. A learner's kernel could share a name, so the source is an
# attribution by name, as for Liger.
COURSE_KERNELS: dict[str, tuple[str, str]] = {
    "_geglu_kernel": ("fused", "GeGLU forward, gelu_tanh(gate) * up in one pass (helpers/kernels/geglu_pointwise.py)"),
    "_geglu_backward_kernel": ("fused", "GeGLU backward in one pass (helpers/kernels/geglu_pointwise.py)"),
    "_gate_up_geglu_kernel": (
        "gemm",
        "gate+up GEMM with a GeGLU epilogue (bf16/fp16/fp32, or e4m3 with row scales), pointer path (helpers/kernels/gate_up.py)",
    ),
    "_gate_up_geglu_tma_kernel": (
        "gemm",
        "gate+up GEMM with a GeGLU epilogue (bf16/fp16/fp32, or e4m3 with row scales), Hopper TMA path (helpers/kernels/gate_up.py)",
    ),
    "_fp8_quantize_rows_kernel": (
        "quantize",
        "rows of x to e4m3 with one float32 scale per row, FP8 gate+up path (helpers/kernels/fp8_gate_up_fused.py)",
    ),
    "_geglu_backward_gemm_kernel": (
        "gemm",
        "dy @ W_down GEMM with the GeGLU backward in its epilogue, pointer path (helpers/kernels/mlp_function.py)",
    ),
    "_geglu_backward_gemm_tma_kernel": (
        "gemm",
        "dy @ W_down GEMM with the GeGLU backward in its epilogue, Hopper TMA path (helpers/kernels/mlp_function.py)",
    ),
    "_gemv_kernel": (
        "gemm",
        "batch-1 GEMV for decode, x @ W^T with an optional residual add (helpers/kernels/decode_gemv.py)",
    ),
    "_rmsnorm_gemv_kernel": (
        "gemm",
        "batch-1 GEMV for decode with RMSNorm of x as its prologue (helpers/kernels/decode_gemv.py)",
    ),
    "_geglu_gemv_kernel": (
        "gemm",
        "batch-1 GEMV for decode with gelu_tanh(gate) * up as its prologue and a residual add (helpers/kernels/decode_gemv.py)",
    ),
    "_decode_attn_split_kernel": (
        "attention",
        "split-KV decode attention, one query token against the cache up to its position, one split of the "
        "cache per program (helpers/kernels/decode_attention.py)",
    ),
    "_decode_attn_merge_kernel": (
        "attention",
        "split-KV decode attention's merge of the splits by log-sum-exp (helpers/kernels/decode_attention.py)",
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
