"""ATen's CUDA kernels: long demangled C++ signatures of its loop templates."""

from __future__ import annotations

import re
from typing import Any

from ..dtypes import from_cpp
from .common import join

_ATEN_TEMPLATES = (
    "vectorized_elementwise_kernel",
    "unrolled_elementwise_kernel",
    "elementwise_kernel",
    "elementwise_kernel_with_index",
    "index_elementwise_kernel",
    "reduce_kernel",
    "vectorized_templated_elementwise_kernel",
)
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


def _split_signature(text: str) -> tuple[str, list[str] | None]:
    """'void at::native::k<8, F, A>(int, ...)' -> ('at::native::k', ['8', 'F', 'A'])."""
    body = text.removeprefix("void ").replace("(anonymous namespace)", "{anon}")
    cut = len(body)
    for ch in "<(":
        pos = body.find(ch)
        if pos != -1:
            cut = min(cut, pos)
    qual = body[:cut].strip()
    if cut >= len(body) or body[cut] != "<":
        return qual, None
    depth, start, args = 0, cut + 1, []
    pairs = {"<": ">", "(": ")", "{": "}", "[": "]"}
    closers = set(pairs.values())
    for pos in range(cut, len(body)):
        ch = body[pos]
        if ch in pairs:
            depth += 1
        elif ch in closers:
            depth -= 1
            if depth == 0:
                args.append(body[start:pos].strip())
                return qual, args
        elif ch == "," and depth == 1:
            args.append(body[start:pos].strip())
            start = pos + 1
    return qual, None  # unbalanced (a truncated name): no template arguments read


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
    for m in re.finditer(r"\b([A-Za-z][A-Za-z0-9_]*?)(?:CUDAKernelImpl|_kernel_cuda|_kernel_impl|_kernel)\(", text):
        word = m.group(1)
        if word.startswith(_INFRA_PREFIXES) or word in ("gpu", "kernel"):
            continue
        word = _snake(word)
        return "copy" if word == "direct_copy" else word
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
    qual, args = _split_signature(text)
    base = qual.rsplit("::", 1)[-1]
    qualified = qual.startswith("at::native::")
    if not qualified and base not in _ATEN_TEMPLATES:
        return None
    info: dict[str, Any] = {"source": "aten"}
    if not qualified:
        info["inferred"] = ["source"]  # a bare template name without at::native::
    op = _aten_op(text)
    dtype = _cpp_dtype(text)
    if base in ("vectorized_elementwise_kernel", "vectorized_templated_elementwise_kernel"):
        family = "elementwise"
        if args and re.fullmatch(r"\d+", args[0]):
            info["vector_width"] = int(args[0])
    elif base in ("elementwise_kernel", "elementwise_kernel_with_index"):
        family = "elementwise"
        if args and len(args) >= 2 and all(re.fullmatch(r"\d+", a) for a in args[:2]):
            info["block_threads"], info["items_per_thread"] = int(args[0]), int(args[1])
    elif base == "unrolled_elementwise_kernel":
        family = "elementwise"
        if args and len(args) >= 3 and re.fullmatch(r"\d+", args[2]):
            info["items_per_thread"] = int(args[2])
    elif base == "index_elementwise_kernel":
        family = "elementwise"
        op = op or "index"
    elif base == "reduce_kernel":
        family = "reduction"
        if args and len(args) >= 2 and all(re.fullmatch(r"\d+", a) for a in args[:2]):
            info["block_threads"], info["output_vec_size"] = int(args[0]), int(args[1])
    elif base.startswith("CatArrayBatchedCopy"):
        family, op = "copy", "cat"
    elif re.search(r"softmax", base, re.IGNORECASE):
        family, op = "reduction", "softmax"
    elif re.search(r"layer_?norm|RowwiseMoments", base, re.IGNORECASE):
        family, op = "reduction", "layer_norm"
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
