"""cuBLAS kernels named by architecture (``ampere_...``, ``volta_...``), xmma kernels
(``sm90_xmma_...``) and the small cuBLAS helpers (gemv, splitK reduction, ...)."""

from __future__ import annotations

import re
from typing import Any

from .common import (
    DTYPE_WORDS,
    PRECISION_LETTER,
    explain_ab,
    instruction_shape,
    join,
    parse_dims,
    readable,
    stages_text,
)

# ---------------------------------------------------------------------------------------------
# cuBLAS names prefixed by an architecture (ampere_..., volta_...) and sm90_xmma_...
# ---------------------------------------------------------------------------------------------


def parse_cublas_arch(text: str) -> dict[str, Any] | None:
    m = re.match(r"(?:void\s+)?((maxwell|volta|turing|ampere)_[A-Za-z0-9_]*gemm[A-Za-z0-9_]*)", text)
    if not m:
        return None
    kname, arch = m.group(1), m.group(2)
    tokens = kname.split("_")[1:]
    info: dict[str, Any] = {"family": "gemm", "source": f"cublas-{arch}", "short_name": kname, "arch": arch}
    inferred = ["dtype", "out_dtype", "accumulate", "instruction", "tile", "stages"]
    unparsed: list[str] = []
    types: list[str] = []
    dims: list[list[int]] = []
    after_stages = False
    for tok in tokens:
        core = re.fullmatch(r"([a-z]?)(\d*)gemm", tok)
        if core:
            acc, digits = core.groups()
            if digits:
                info["accumulate"] = PRECISION_LETTER.get(acc) if acc else None
                shape = instruction_shape(digits)
                if shape:
                    info["instruction"] = shape
                else:
                    unparsed.append(tok)
            elif acc:
                info["dtype"] = PRECISION_LETTER.get(acc)
            continue
        if tok in DTYPE_WORDS:
            types.append(DTYPE_WORDS[tok])
        elif tok == "stages":
            after_stages = True
        elif parse_dims(tok) and len(parse_dims(tok)) == 2 and after_stages:
            k, stages = parse_dims(tok)
            info["stages"] = stages
            info["_k"] = k
        elif parse_dims(tok) and len(parse_dims(tok)) == 2 and not dims:
            dims.append(parse_dims(tok))
        elif re.fullmatch(r"[tn]{2}", tok):
            info["layout"] = tok
        elif tok in ("relu", "gelu"):
            info["activation"] = tok
        elif tok == "bias":
            info["bias"] = True
        else:
            unparsed.append(tok)
    if types:  # same order as CUTLASS 2.x extended names: <C type>_<core>_<A type>
        info["out_dtype"] = types[0]
        info["dtype"] = types[-1]
    k = info.pop("_k", None)
    if dims:
        info["tile"] = f"{dims[0][0]}x{dims[0][1]}" + (f"x{k}" if k is not None else "")
    info["inferred"] = inferred
    info["unparsed"] = unparsed
    bits = [
        f"tile {info['tile']}" if "tile" in info else None,
        stages_text(info["stages"]) if "stages" in info else None,
        info.get("dtype"),
        f"MMA instruction {info['instruction']}" if "instruction" in info else None,
    ]
    info["summary"] = (
        f"cuBLAS GEMM from its {arch} kernel set: {join(bits)}"
        f"{'; layout ' + info['layout'] if 'layout' in info else ''}. cuBLAS does not "
        "document these names: fields are read by analogy with CUTLASS names."
    )
    info["explain"] = explain_ab(info["layout"], documented=False) if "layout" in info else None
    return info


def parse_xmma(text: str) -> dict[str, Any] | None:
    m = re.search(r"\b(sm\d+)_xmma_([A-Za-z0-9_]+)", text)
    if not m:
        return None
    kname = m.group(0)
    rest = m.group(2)
    info: dict[str, Any] = {
        "family": "gemm" if "gemm" in rest else "unknown",
        "source": "cudnn" if "cudnn" in rest else "cublas-xmma",
        "short_name": kname,
        "arch": m.group(1),
    }
    if t := re.search(r"tilesize(\d+x\d+x\d+)", rest):
        info["tile"] = t.group(1)
    if s := re.search(r"_stage(\d+)", rest):
        info["stages"] = int(s.group(1))
    if i := re.search(r"tensor(\d+x\d+x\d+)", rest):
        info["instruction"] = i.group(1)
    if lay := re.search(r"_([tn]{2})_", rest):
        info["layout"] = lay.group(1)
    if d := re.match(r"gemm_([a-z0-9]+?)\1_", rest):
        info["dtype"] = DTYPE_WORDS.get(d.group(1))
    info["inferred"] = ["tile", "stages", "instruction", "dtype"]
    info["summary"] = (
        f"{'cuDNN' if 'cudnn' in rest else 'cuBLAS'} {'GEMM' if 'gemm' in rest else 'kernel'} from the xmma kernel set, "
        f"built for {info['arch']}: "
        + join(
            [
                f"tile {info.get('tile')}" if "tile" in info else None,
                stages_text(info["stages"]) if "stages" in info else None,
                info.get("dtype"),
                f"layout {info.get('layout')}" if "layout" in info else None,
            ]
        )
        + ". NVIDIA does not document these names."
    )
    info["explain"] = explain_ab(info["layout"], documented=False) if "layout" in info else None
    return info


# cuBLAS helpers and small kernels, by function name: (pattern, family, op, what). cuBLAS does not
# document them; the function names are its own (visible in every profile of a cuBLAS call).
_CUBLAS_FUNCTIONS = (
    (
        r"\b(?:cublasLt::)?splitKreduce_kernel\b",
        "gemm",
        "split-K reduction",
        "cuBLAS split-K reduction: sums the partial products of a GEMM whose K dimension was split across "
        "thread blocks (part of the GEMM's work; the product itself is a separate kernel)",
    ),
    (
        r"\b(?:cublasLt::)?epilogue::impl::\w+|\bcublasLt::epilogue\w*",
        "gemm",
        "epilogue",
        "cuBLASLt epilogue run as its own kernel (bias / activation applied after the GEMM)",
    ),
    (
        r"\b(?:gemv2?[NT]?_kernel\w*|gemvNSP_kernel|gemvx?::kernel|gemv\w*_kernel)\b",
        "gemm",
        "gemv",
        "cuBLAS GEMV (matrix-vector product)",
    ),
    (
        r"\b(?:dot_kernel|reduce_1Block_kernel|asum_kernel|nrm2_kernel)\b",
        "gemm",
        "dot",
        "cuBLAS dot product (or its final reduction step)",
    ),
    (
        r"\b(?:gemmk1_kernel|gemmSN_[TN]{2}_kernel|gemmSN\w*|sgemm_largek\w*|[sdhc]gemm_\w*kernel\w*)\b",
        "gemm",
        None,
        "cuBLAS GEMM kernel",
    ),
    (r"\bmagma_\w*gemm\w*", "gemm", None, "GEMM kernel from MAGMA (shipped inside cuBLAS)"),
    (
        r"\b(?:scal_kernel|axpy_kernel|copy_kernel|swap_kernel)\b",
        "elementwise",
        None,
        "cuBLAS level-1 vector kernel (scale, axpy, copy)",
    ),
)


def parse_cublas_other(text: str) -> dict[str, Any] | None:
    for pattern, family, op, what in _CUBLAS_FUNCTIONS:
        m = re.search(pattern, text)
        if m:
            info: dict[str, Any] = {
                "family": family,
                "source": "cublas",
                "short_name": m.group(0),
                "summary": what + ".",
            }
            if op:
                info["op"] = op
            if "magma" in m.group(0):
                info["inferred"] = ["source"]
            return info
    # CUTLASS 3 and later: cutlass::device_kernel<...gemm::kernel::GemmUniversal...> or a convolution; a mangled
    # symbol (_ZN7cutlass13device_kernelI...) is read in the same words
    text = readable(text)
    m = re.search(r"\bcutlass::(?:device_kernel|Kernel2?)<", text)
    if m:
        if re.search(r"conv(?:::|, )kernel|ImplicitGemmConvolution|Conv[23]d", text):
            return {
                "family": "convolution",
                "source": "cutlass",
                "short_name": "cutlass convolution",
                "summary": "CUTLASS implicit-GEMM convolution kernel.",
            }
        if re.search(r"gemm(?:::|, )kernel|Gemm\w*Universal", text):
            if re.search(r"GroupProblemShape|PtrArray", text):
                return {
                    "family": "gemm",
                    "source": "cutlass",
                    "op": "grouped_gemm",
                    "short_name": "cutlass grouped GemmUniversal",
                    "summary": "CUTLASS grouped GEMM kernel (one launch multiplies every group, e.g. every expert of a "
                    "mixture of experts; tile and types are in the template arguments, not read here).",
                }
            return {
                "family": "gemm",
                "source": "cutlass",
                "short_name": "cutlass GemmUniversal",
                "summary": "CUTLASS GEMM kernel (a CUTLASS 3 GemmUniversal; tile and types are in the template "
                "arguments, not read here).",
            }
        # a wrapper whose kernel type is hidden (an anonymous namespace, a name cut by the profiler's table):
        # CUTLASS's kernels are mostly GEMMs, so a GEMM unless another word speaks
        if not re.search(r"reduction::|fmha|attention|attn|flash|mla|softmax|conv", text, re.IGNORECASE):
            return {
                "family": "gemm",
                "source": "cutlass",
                "short_name": "cutlass kernel",
                "inferred": ["family"],
                "summary": "A CUTLASS kernel whose kernel type the name does not show; most are GEMMs, so read as one.",
            }
    return None
