"""Element types, block-scale types, scale layouts and GPU architectures written in a kernel name.

Read for any decoding that lacks them (see :func:`.inference.enrich`), always as an inference: a
name's spelling of a type is a convention of its library, not a documented field. Sources for the
spellings: CUTLASS (``float_e4m3_t``, ``ue8m0``, ``ue4m3xe2m1``, ``bstensorop``), cuBLAS nvjet names
in public traces (``Avec16UE4M3``), TensorRT-LLM's generated GEMM and attention names (``E4m3``,
``E2m1``, ``Bfloat16``, ``sm100a``), Composable Kernel (``bhalf_t``, ``_Float16``), PyTorch
(``c10::Float8_e4m3fn``, ``c10::BFloat16``), the OCP Microscaling spec (MXFP8, MXFP4: E8M0 scales per
32 elements) and NVIDIA's NVFP4 (E2M1 with UE4M3 scales per 16).
"""

from __future__ import annotations

import re

from .common import readable, split_signature
from .tokens import name_words

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
    ("a16w4", "w4a16"),
    ("w4a8", "w4a8"),
    ("a8w4", "w4a8"),
    ("int4", "int4"),
    ("e4m3", "fp8_e4m3"),
    ("e4nv", "fp8_e4m3"),
    ("e5m2", "fp8_e5m2"),
    ("fp8e5", "fp8_e5m2"),
    ("float8", "fp8"),
    ("fp8", "fp8"),
    ("w8a8", "w8a8"),
    ("a8w8", "w8a8"),
    ("w8a16", "w8a16"),
    ("a16w8", "w8a16"),
    ("int8", "int8"),
    ("bfloat16", "bf16"),
    ("bhalf", "bf16"),
    ("bf16", "bf16"),
    ("float16", "fp16"),
    ("fp16", "fp16"),
    ("tf32", "tf32"),
    ("fp32", "fp32"),
)
_TYPES_WHOLE = {
    "f4": "fp4_e2m1",
    "f8": "fp8",
    "s8": "int8",
    "i8": "int8",
    "s4": "int4",
    "f16": "fp16",
    "half": "fp16",
    "f32": "fp32",
}
# `_s4_` / `_s8_` are also stage counts in generated GEMM names (``t128x128x128u2_s4``): read as
# int4 / int8 only when the name spells no other type
_STAGE_LIKE = frozenset({"s4", "s8"})
_SCALES = ("ue8m0", "ue4m3", "e8m0")
_TYPE_RE = re.compile("|".join((*_SCALES, *(t for t, _ in _TYPES_IN_CHUNK))))
_RANK = {short: i for i, (_, short) in enumerate(_TYPES_IN_CHUNK)}
# `sm90`, `SM_90` as a word, or `Sm100` at a camelCase boundary (``fmhaSm100aKernel``,
# ``fwd_sm100FlashAttention``): what follows may be a capital, never a letter or digit of the same word
_ARCH_RE = re.compile(
    r"(?:(?<![A-Za-z0-9])(?:sm|SM|Sm)|(?<=[a-z0-9])Sm)_?((?:[5-9]\d|1[0-2]\d)[a-f]?)(?![a-z0-9])"
    r"|(?<![A-Za-z0-9])(gfx\d{2,4}[a-z]?)(?![a-z0-9])"
)

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
_ENUM_CAST = re.compile(r"\((?:\w+::)*\w+\)-?\d+")
# CUTLASS writes a block-scaled operand as `<scale type>x<data type>`; its type-erased runtime types
# f4 and f8 (``ue4m3xf4``: FP4 data with UE4M3 scales, NVFP4)
_SCALED_PAIR = re.compile(r"(?<=ue4m3x|ue8m0x)f([48])(?![a-z0-9])")
_ERASED = {"4": "fp4_e2m1", "8": "fp8"}


def read_types(text: str) -> tuple[str | None, str | None]:
    """(element dtype, block-scale dtype) written in a name, each None when the name says none."""
    # an enum value cast to its type, (vllm::Fp8KVCacheDataType)0, is a setting: its type's name is no element type
    text = _ENUM_CAST.sub(lambda m: " " * len(m.group(0)), readable(text))
    low = text.lower()
    qual_end = len(split_signature(text)[0]) + (5 if low.startswith("void ") else 0)
    vectors = {
        m.start() for m in _WHOLE_RE.finditer(low, qual_end) if m.group(0) in _VECTOR_TYPES
    }  # positions of `int4` and friends outside the function's own name
    found: list[tuple[int, str]] = []  # (position, type)
    stage_like: list[tuple[int, str]] = []
    scale = None
    for m in _SCALED_PAIR.finditer(low):
        found.append((m.start(), _ERASED[m.group(1)]))
    for m in _WHOLE_RE.finditer(low):
        if m.group(0) in _TYPES_WHOLE:
            (stage_like if m.group(0) in _STAGE_LIKE else found).append((m.start(), _TYPES_WHOLE[m.group(0)]))
    for m in _TYPE_RE.finditer(low):
        word = m.group(0)
        if m.start() in vectors:
            continue
        if word in _SCALES:
            scale = scale or ("ue8m0" if word == "e8m0" else word)
        else:
            found.append((m.start(), _TYPE_OF[word]))
    found = found or stage_like
    if not found:
        return None, scale
    # the function's own name speaks first (`qk_int8_sv_f8_attn<..., __nv_bfloat16>` is an int8/fp8
    # kernel, whatever its output type); template arguments and parameters only when it says none
    own = [t for pos, t in found if pos < qual_end] or [t for _, t in found]
    best = min(own, key=lambda s: _RANK.get(s, len(_RANK)))
    if best == "fp8":  # prefer the exact FP8 format when the name also gives it
        best = next((t for _, t in found if t.startswith("fp8_")), best)
    return best, scale


def read_arch(text: str) -> str | None:
    """'sm90' / 'sm100a' / 'gfx942' when the name writes one (``sm_90``, ``Sm90``, ``nvjet_sm100_``)."""
    m = _ARCH_RE.search(readable(text))
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
