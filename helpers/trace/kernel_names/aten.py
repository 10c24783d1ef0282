"""ATen's CUDA kernels: long demangled C++ signatures of its loop templates."""

from __future__ import annotations

import re
from typing import Any

from ..dtypes import from_cpp
from .common import CUTE_DSL_PREFIX, join, readable, split_signature

_ATEN_TEMPLATES = (
    "vectorized_elementwise_kernel",
    "unrolled_elementwise_kernel",
    "elementwise_kernel",
    "elementwise_kernel_with_index",
    "index_elementwise_kernel",
    "reduce_kernel",
    "vectorized_templated_elementwise_kernel",
    "elementwise_kernel_manual_unroll",
    "unrolled_elementwise_kernel_for_multi_outputs",
)
# ATen's named CUDA kernels (not the generic loop templates), by function name, from PyTorch's
# sources (aten/src/ATen/native/cuda): (pattern, family, op). First match wins.
NAMED_KERNELS = (
    (r"softmax_warp_(?:forward|backward)|cunn_(?:Spatial)?SoftMax|masked_softmax", "softmax", "softmax"),
    (
        r"layer_?norm|LayerNorm|GammaBetaBackward|ComputeInternalGradients|ComputeGradientFusedParams",
        "normalization",
        "layer_norm",
    ),
    (
        r"GroupNorm|group_norm|ComputeFusedParams|Compute1dBackwardFusedParams|ComputeBackwardFusedParams",
        "normalization",
        "group_norm",
    ),
    (r"RowwiseMoments", "normalization", "norm_statistics"),
    (r"batch_?norm|BatchNorm", "normalization", "batch_norm"),
    (r"rms_?norm|RmsNorm|RMSNorm", "normalization", "rms_norm"),
    (r"max_pool|MaxPool", "reduction", "max_pool"),
    (r"avg_pool|AvgPool|adaptive_average|atomic_adaptive_average", "reduction", "avg_pool"),
    (r"adaptive_max|AdaptiveMax", "reduction", "max_pool"),
    (r"nll_loss|NLLCriterion|cross_entropy", "reduction", "nll_loss"),
    # a state-space layer's scan (ssm_scan, selective_scan) is no prefix sum of ATen's
    # a scan's carries (SYCL ATen's AccumulateCarrierKernelFunctor) are its second pass
    (r"(?<!ssm_)(?<!selective_)scan|cumsum|cumprod|AccumulateCarrier", "reduction", "scan"),
    (
        r"embedding|EmbeddingBag|krn_partials_per_segment|partial_segment|compute_grad_weight|sum_and_scatter",
        "embedding",
        "embedding",
    ),
    (r"searchsorted|bucketize", "sort", "searchsorted"),
    (r"[Hh]istogram", "sort", "histogram"),  # bincount / histc: how many tokens each expert gets
    (r"fill_reverse_indices", "sort", "sort"),
    (r"prepare_grouped_gemm_data", "gemm", "grouped_gemm_setup"),  # _grouped_mm's per-group pointers and sizes
    (r"[Ss]ort|bitonic|radixSelect|gatherTopK|[Tt]op[Kk]|KthValue|KthCounts|segment_kernel", "sort", "sort"),
    (r"indexSelect(?:Large|Small)Index", "copy", "index_select"),
    (r"^IndexKernel(?:Functor)?$", "copy", "index"),  # SYCL ATen's gather behind tensor[idx] and index_select
    (r"indexFunc(?:Large|Small)Index", "elementwise", "index_add"),
    (r"scatter_gather|gather_kernel|scatter_kernel", "elementwise", "scatter_gather"),
    (r"index_put|indexing_backward|put_kernel|take_kernel|masked_scatter|masked_select", "elementwise", "index"),
    (r"dropout", "elementwise", "dropout"),
    (r"distribution_\w+|random_\w*kernel|uniform|normal_kernel|bernoulli", "elementwise", "random"),
    (r"multi_tensor_apply", "elementwise", "foreach"),
    (r"amp_update_scale|non_finite_check", "elementwise", "amp_unscale"),
    (r"triu_tril", "elementwise", "triu_tril"),
    (r"conv_depthwise|depthwise_conv|slow_conv|im2col|col2im|vol2col|col2vol", "convolution", "convolution"),
    (r"upsample|interpolat|grid_sampler", "other", "upsample"),
    (r"CatArrayBatchedCopy", "copy", "cat"),
    (r"split_with_sizes_copy|index_copy", "copy", "copy"),  # ATen functions named for the copy they make
    (r"^compute_cuda_kernel$", "copy", "repeat_interleave"),  # Repeat.cu
    (r"kernelPointwiseApply|pointwiseApply", "elementwise", None),
)
_NAMED_PATTERNS = [(re.compile(p), f, o) for p, f, o in NAMED_KERNELS]


def _named(base: str) -> tuple[str, str | None] | None:
    for pattern, family, op in _NAMED_PATTERNS:
        if pattern.search(base):
            return family, op
    return None


_INFRA_PREFIXES = (
    "gpu_",
    "launch_",
    "opmath_",
    "vectorized",
    "unrolled",
    "elementwise",
    "reduce",
    "index_elementwise",
    "jitted_gpu",
    "_",
)


def _snake(camel: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", camel).lower()


def _aten_op(text: str) -> str | None:
    """The op an ATen kernel computes, from its functor or its implementing function."""
    if m := re.search(r"CUDAFunctor(?:OnSelf|OnOther)?_(\w+?)\b", text):
        return m.group(1)
    for m in re.finditer(r"\b([A-Za-z0-9]+?)Functor\b", text):
        if m.group(1) not in ("Binary", "AUnary", "BUnary", "Unary", "CUDA"):
            return _snake(m.group(1))
    if m := re.search(r"\b([a-z][a-z0-9_]*?)_functor\b", text):
        return m.group(1)
    if m := re.search(r"\b([A-Z][A-Za-z]*?)Ops<", text):
        return _snake(m.group(1))
    # a demangled lambda's enclosing function is followed by its arguments; a mangled one read as words by a comma
    implementing = (
        r"\b([A-Za-z][A-Za-z0-9_]*?)(?:CUDAKernelImpl|_kernel_cuda|_kernel_impl|_kernel)\("
        r"|\b([A-Za-z][A-Za-z0-9_]*?)_kernel_(?:cuda|impl)(?=[,<>])"
    )
    for m in re.finditer(implementing, text):
        word = m.group(1) or m.group(2)
        if word.startswith(_INFRA_PREFIXES) or word in ("gpu", "kernel"):
            continue
        word = _snake(word)
        return "copy" if word.endswith("copy") else word
    # a name cut by a profiler's table keeps the start of its functor: `..._copy_ker`
    if re.search(r"_copy_ker(?:n(?:e(?:l)?)?)?$", text):
        return "copy"
    return None


def _float_cpp(type_name: str) -> str | None:
    d = from_cpp(type_name)
    return d.short if d is not None and d.floating else None


def _cpp_dtype(text: str) -> str | None:
    """Element type from a functor's first template argument or a `lambda(c10::BFloat16)`.

    Only floating types are taken from lambdas: `lambda(int)` in these names is a loop index.
    """
    m = re.search(r"(?:BinaryFunctor|AUnaryFunctor|BUnaryFunctor|CUDAFunctor\w*|FillFunctor)<([^,>]+)", text)
    if m:
        d = from_cpp(m.group(1))
        return d.short if d is not None else None
    for m in re.finditer(r"\{lambda\(([^,)]+)", text):
        dtype = _float_cpp(m.group(1))
        if dtype is not None:
            return dtype
    return None


def parse_aten(text: str) -> dict[str, Any] | None:
    if text.startswith(CUTE_DSL_PREFIX):
        return None  # a CuTe DSL JIT kernel (FlashInfer's RMSNormKernel) is never ATen's, whatever its class is called
    if text.startswith("_ZN2at"):
        text = readable(text)  # ATen's mangled symbols (Proton, NVBit) in the words the readers below know
    qual, args = split_signature(text)
    base = qual.rsplit("::", 1)[-1]
    qualified = qual.startswith(("at::native::", "at::cuda::"))
    # a bare name (or one in an anonymous namespace only) can still be ATen's; any other namespace is not
    bare = all(part in ("", "{anon}") for part in qual.split("::")[:-1])
    # ...but not a mangled symbol of another namespace, nor a `_private` Python (Triton) function
    if (text.startswith("_Z") and not text.startswith("_ZN2at")) or (bare and not qualified and qual.startswith("_")):
        return None
    named = _named(base) if base not in _ATEN_TEMPLATES and (qualified or bare) else None
    if not qualified and base not in _ATEN_TEMPLATES and named is None:
        return None
    info: dict[str, Any] = {"source": "aten"}
    if not qualified:
        info["inferred"] = ["source"]  # a bare template or kernel name without at::native::
    op = _aten_op(text)
    dtype = _cpp_dtype(text)
    if base in ("vectorized_elementwise_kernel", "vectorized_templated_elementwise_kernel"):
        family = "elementwise"
        if args and re.fullmatch(r"\d+", args[0]):
            info["vector_width"] = int(args[0])
    elif base in ("elementwise_kernel", "elementwise_kernel_with_index", "elementwise_kernel_manual_unroll"):
        family = "elementwise"
        if args and len(args) >= 2 and all(re.fullmatch(r"\d+", a) for a in args[:2]):
            info["block_threads"], info["items_per_thread"] = int(args[0]), int(args[1])
    elif base == "unrolled_elementwise_kernel":
        family = "elementwise"
        if args and len(args) >= 3 and re.fullmatch(r"\d+", args[2]):
            info["items_per_thread"] = int(args[2])
    elif base == "unrolled_elementwise_kernel_for_multi_outputs":
        # several outputs per element: what it computes is in the lambda's enclosing function
        family, op = _named(text) or ("elementwise", op)
        if family == "normalization":
            op = "batch_norm" if "batch_norm" in text else op
    elif base == "index_elementwise_kernel":
        # gpu_index_kernel behind tensor[idx] gathers (a copy); index_put, index_add and index_fill write into
        # the indexed places (elementwise, as the host operator table reads them)
        family = "elementwise" if op and re.search(r"put|add|fill", op) else "copy"
        op = op or "index"
    elif base == "reduce_kernel":
        family = "reduction"
        if args and len(args) >= 2 and all(re.fullmatch(r"\d+", a) for a in args[:2]):
            info["block_threads"], info["output_vec_size"] = int(args[0]), int(args[1])
    elif named is not None:
        family, named_op = named
        if named_op == "foreach":
            op = "adam" if re.search(r"Adam", text) else "foreach"
        elif named_op == "random":
            op = op if op in ("uniform", "normal", "bernoulli", "random", "exponential") else "random"
        elif named_op is not None:
            op = named_op
    else:
        family = "unknown"
    if op == "copy" and family == "elementwise":
        family = "copy"
    info["family"] = family
    if op:
        info["op"] = op
    if dtype and family in ("elementwise", "copy"):
        info["dtype"] = dtype
    info["short_name"] = f"{base}<{op}>" if op else base

    bits = []
    if "vector_width" in info:
        bits.append(f"{info['vector_width']} elements per vectorised load/store")
    if "block_threads" in info:
        bits.append(f"{info['block_threads']} threads per block")
    if "items_per_thread" in info:
        bits.append(f"{info['items_per_thread']} elements per thread")
    if "dtype" in info:
        bits.append(info["dtype"])
    what = {
        "elementwise": "elementwise kernel",
        "reduction": "reduction kernel",
        "copy": "copy kernel",
        "softmax": "softmax kernel",
        "normalization": "normalization kernel",
        "convolution": "convolution kernel",
        "embedding": "embedding kernel",
        "sort": "sort / top-k kernel",
        "gemm": "matrix-product kernel",
        "other": "kernel",
        "unknown": "CUDA kernel",
    }[family]
    info["summary"] = (
        f"ATen (eager PyTorch) {what}"
        + (f" computing {op}" if op and op != "copy" else "")
        + (f": {join(bits)}" if bits else "")
        + "."
    )
    if base in _ATEN_TEMPLATES:
        info["explain"] = (
            f"{base} is one of ATen's generic CUDA loop templates "
            "(ATen/native/cuda/CUDALoops.cuh, Reduce.cuh); the op is the functor or "
            "lambda passed to it, and the leading integers are its template "
            "parameters (vector width; threads per block, elements per thread)."
        )
    return info
