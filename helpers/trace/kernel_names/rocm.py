"""AMD ROCm kernels: Tensile GEMMs (rocBLAS, hipBLASLt), Composable Kernel, aiter, MIOpen, rocPRIM,
and the HIP runtime's own copy and fill kernels.

* Tensile names (``Cijk_Alik_Bljk_BBS_BH_..._MT256x128x64_MI16x16x1_..._ISA942_...``) spell the
  product in index notation: C[i,j,k] = sum over l of A[i,l,k] B[l,j,k] (k is the batch). ``Ailk``
  is A as stored (N), ``Alik`` A transposed (T); likewise ``Bljk`` (N) and ``Bjlk`` (T): the same
  column-major convention as cuBLAS, so a Linear forward reads TN. ``MT`` is the macro tile
  (M x N x depth), ``MI`` the matrix-core instruction, ``ISA`` the GPU target (942 = MI300X).
  The type code after the indices (``SB``, ``HHS_BH``, ``BBS_BH``) is read by analogy with
  Tensile's data-type letters and listed in ``inferred``; the other ~40 tuning tokens are listed
  in ``unparsed``.
* Composable Kernel (``ck::kernel_gemm_xdl_cshuffle_v3<...>``, ``ck_tile::kentry<...,
  ck_tile::FmhaFwdKernel<...>>``, or Itanium-mangled ``_ZN2ck...``) and aiter name the kernel's
  job in its C++ name: the family is read from those words (inferred).
"""

from __future__ import annotations

import re
from typing import Any

from .common import function_name, mangled_words

TENSILE_TYPES = {"S": "fp32", "D": "fp64", "H": "fp16", "B": "bf16", "C": "complex64", "Z": "complex128"}
TENSILE_TYPES.update({"I8": "int8", "F8": "fp8", "B8": "bf8", "4xi8": "int8"})


def parse_tensile(text: str) -> dict[str, Any] | None:
    m = re.search(r"(?<![A-Za-z0-9])Cijk_A([a-z]{3})C?_B([a-z]{3})C?_(\w+)", text)
    if not m:
        return None
    a_idx, b_idx, rest = m.groups()
    info: dict[str, Any] = {"family": "gemm", "source": "tensile", "short_name": m.group(0)[:120]}
    layout_a = {"ilk": "N", "lik": "T"}.get(a_idx)
    layout_b = {"ljk": "N", "jlk": "T"}.get(b_idx)
    if layout_a and layout_b:
        info["layout"] = layout_a + layout_b
    tokens = rest.split("_")
    inferred: list[str] = []
    unparsed: list[str] = []
    if tokens:
        code = tokens[0]
        t = re.fullmatch(r"(S|D|H|B|C|Z|I8|F8|B8|4xi8)(?:(?:S|H|B|I|F8)*)(B)?", code)
        if t:
            info["dtype"] = TENSILE_TYPES[t.group(1)]
            inferred.append("dtype")
            tokens.pop(0)
    for tok in tokens:
        if mt := re.fullmatch(r"MT(\d+)x(\d+)x(\d+)", tok):
            info["tile"] = "x".join(mt.groups())
        elif mi := re.fullmatch(r"MI(\d+x\d+x\d+)", tok):
            info["instruction"] = mi.group(1)
        elif isa := re.fullmatch(r"ISA(\w+)", tok):
            info["arch"] = "gfx" + isa.group(1)
        elif tok == "Bias":
            info["bias"] = True
            inferred.append("bias")
        elif tok and tok not in ("BH", "UserArgs"):
            unparsed.append(tok)
    info["inferred"] = inferred
    info["unparsed"] = unparsed
    bits = [f"macro tile {info['tile']}" if "tile" in info else None, info.get("dtype"), info.get("arch")]
    lib = "hipBLASLt" if "UserArgs" in rest else "rocBLAS or hipBLASLt"
    info["summary"] = (
        f"Tensile GEMM ({lib}): "
        + ", ".join(b for b in bits if b)
        + (f"; layout {info['layout']}" if "layout" in info else "")
        + "."
    )
    info["explain"] = (
        "Tensile writes the product in index notation: C[i,j,k] = sum_l A[i,l,k] B[l,j,k] (k = batch). "
        "Ailk = A as stored (N), Alik = A transposed (T); Bljk = N, Bjlk = T (column-major, as "
        "cuBLAS). MT = macro tile (M x N x depth of one loop step), MI = matrix-core (MFMA) "
        "instruction, ISA = the GPU target (90a = MI200, 942 = MI300). The many other tokens are "
        "tuning parameters, listed in unparsed."
    )
    return info


# Words of a kernel's C++ name -> family, first match wins (attention before GEMM: attention
# kernels are built from GEMM pieces and say so in their template arguments).
_WORD_FAMILIES = (
    (r"fmha|(?<![a-z])mha|gemm_softmax_gemm|attention|paged_attn|(?<![a-z])pa_|mla_", "attention"),
    (r"conv", "convolution"),
    # aiter's custom all-reduce (cross_device_reduce_1stage / _2stage) is vLLM's, ported to ROCm
    (r"all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|cross_?device_?reduce", "communication"),
    (r"moe_?align|moe_?sort|topk_?softmax|moe_?sum|moe_?routing|grouped_?topk", "moe-routing"),
    (r"gemm|(?<![a-z])mm_|(?<![a-z])wv_splitk|gemv", "gemm"),
    (r"rmsnorm|layernorm|layer_norm|rms_norm|groupnorm|batchnorm|norm2d|(?<![a-z])rms(?![a-z])", "normalization"),
    (r"quant", "quantize"),
    (r"moe", "gemm"),  # a MoE kernel that says neither routing nor quantization: the expert GEMM
    (r"softmax", "softmax"),
    (r"topk|sort", "sort"),
    (r"reduce|reduction", "reduction"),
    (r"transpose|permute|copy", "copy"),
    (r"elementwise|rope|activation|silu|gelu|(?<![a-z])(?:add|mul)(?![a-z])", "elementwise"),
)


def family_from_words(words: str) -> str | None:
    low = words.lower()
    for pattern, family in _WORD_FAMILIES:
        if re.search(pattern, low):
            return family
    return None


def _library_kernel(source: str, kernel_word: str, what: str) -> dict[str, Any]:
    family = family_from_words(kernel_word)
    info: dict[str, Any] = {
        "family": family or "unknown",
        "source": source,
        "short_name": kernel_word[:120],
        "inferred": ["family"] if family else [],
    }
    info["summary"] = f"{what}: {kernel_word[:80]}" + (
        f" (read as {family} from its name)." if family else "; its name does not say what it computes."
    )
    return info


def parse_composable_kernel(text: str) -> dict[str, Any] | None:
    words = mangled_words(text)
    if words and words[0] in ("ck", "ck_tile", "aiter"):
        kernel = next((w for w in words[1:] if w not in ("kentry", "kernel", "detail", "ck_tile", "ck")), words[-1])
        if words[0] == "ck_tile":
            kernel = next((w for w in words if w.endswith(("Kernel", "Kernel_"))), kernel)
        source = "aiter" if words[0] == "aiter" else "composable-kernel"
        return _library_kernel(source, kernel, "Composable Kernel kernel" if source != "aiter" else "aiter kernel")
    if m := re.search(r"\bck_tile::(\w*Kernel\w*)", text):
        return _library_kernel("composable-kernel", m.group(1), "Composable Kernel (ck_tile) kernel")
    if re.search(r"\bck::", text):
        return _library_kernel("composable-kernel", function_name(text), "Composable Kernel kernel")
    if m := re.search(r"\baiter::(\w+)", text):
        return _library_kernel("aiter", m.group(1), "aiter kernel")
    return None


# MIOpen kernels by name: (pattern, family, what)
_MIOPEN = (
    (r"\bigemm_(fwd|bwd|wrw)_\w+", "convolution", "MIOpen implicit-GEMM convolution"),
    (
        r"\bnaive_conv_\w+|\bMIOpenConv\w+|\bmiopenSp3AsmConv\w*|\bgcnAsmConv\w*|\bMIOpenCvD\w+",
        "convolution",
        "MIOpen convolution",
    ),
    (r"\b(?:Conv_Winograd|sp3AsmConv)\w*", "convolution", "MIOpen Winograd convolution"),
    (r"\bMIOpen(?:BatchNorm|LayerNorm|GroupNorm)\w*", "normalization", "MIOpen normalization"),
    (r"\bMIOpen(?:Softmax|SoftMax)\w*|\bSoftmax(?:Forward|Backward)\w*", "softmax", "MIOpen softmax"),
    (r"\bMIOpen(?:Pooling|Pool)\w*|\bmloPooling\w*", "reduction", "MIOpen pooling"),
    (
        r"\b(?:SubTensorOp\w*|Op[1-5]dTensor\w*|OpTensor\w*|MIOpenActive\w*|MIOpenNeuron\w*|ScaleTensor\w*|SetTensor\w*)",
        "elementwise",
        "MIOpen tensor operation",
    ),
    (
        r"\bbatched_transpose_\w+|\btranspose_(?:NCHW2CNHW|CNHW2NCHW|NCHW2NHWC|NHWC2NCHW)\w*|\bgeneral_4d_reorder\w*",
        "copy",
        "MIOpen layout transpose",
    ),
    (r"\bMIOpenIm2Col\w*|\bIm2Col\w*", "convolution", "MIOpen im2col (part of a convolution)"),
)


def parse_miopen(text: str) -> dict[str, Any] | None:
    for pattern, family, what in _MIOPEN:
        m = re.search(pattern, text)
        if m:
            info: dict[str, Any] = {"family": family, "source": "miopen", "short_name": m.group(0)[:120]}
            if family == "convolution" and (p := re.search(r"igemm_(fwd|bwd|wrw)", m.group(0))):
                info["phase"] = {
                    "fwd": "forward",
                    "bwd": "backward (input gradient)",
                    "wrw": "backward (weight gradient)",
                }[p.group(1)]
            info["inferred"] = [] if "MIOpen" in m.group(0) or "igemm_" in m.group(0) else ["source"]
            info["summary"] = what + (f", {info['phase']} pass" if "phase" in info else "") + "."
            return info
    return None


def parse_rocm_runtime(text: str) -> dict[str, Any] | None:
    m = re.search(r"\b__amd_rocclr_(\w+)", text)
    if m:
        fill = "fill" in m.group(1).lower()
        return {
            "family": "memset" if fill else "copy",
            "source": "hip",
            "short_name": m.group(0),
            "summary": f"The HIP runtime's own {'fill (memset)' if fill else 'copy'} kernel.",
        }
    m = re.search(r"\brocprim::\w*?(sort|scan|reduce|select|histogram|transform|merge)\w*", text)
    if m:
        family = {
            "sort": "sort",
            "select": "sort",
            "histogram": "sort",
            "scan": "reduction",
            "reduce": "reduction",
            "transform": "elementwise",
        }.get(m.group(1), "other")
        return {
            "family": family,
            "source": "rocprim",
            "op": m.group(1),
            "short_name": f"rocprim {m.group(1)}",
            "summary": f"rocPRIM (AMD's CUB) device-wide {m.group(1)} kernel.",
        }
    m = re.search(r"\brocblas_(\w+?)_kernel\w*", text)
    if m:
        word = m.group(1)
        family = (
            "gemm"
            if re.search(r"gem[mv]|dot|trsm|ger", word)
            else "elementwise"
            if re.search(r"scal|axpy|copy", word)
            else "unknown"
        )
        return {
            "family": family,
            "source": "rocblas",
            "short_name": m.group(0)[:80],
            "summary": f"A rocBLAS kernel ({word}).",
        }
    return None


def parse_rocm(text: str) -> dict[str, Any] | None:
    for reader in (parse_tensile, parse_composable_kernel, parse_miopen, parse_rocm_runtime):
        info = reader(text)
        if info is not None:
            return info
    return None
