"""Read what a GPU/CPU kernel name says, and only what it says.

A profile lists kernels by name: `nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT`,
`triton_poi_fused__unsafe_view_gelu_mul_0`, or a 600-character C++ signature for an ATen
elementwise kernel. `decode_kernel(name)` turns one name into a dict; `decode_kernels(names)` turns
many into a DataFrame for a notebook table.

The rule: never show a guess as fact.

* Core keys, always present: `name`, `short_name`, `family` (see `FAMILIES`: gemm, convolution,
  attention, communication, normalization, softmax, reduction, elementwise, fused, memset, copy,
  embedding, sort (sort, top-k, histogram, selection), moe-routing (router, gating, align,
  permute/unpermute, expand/finalize), quantize (quantize, dequantize, casts to FP8/FP4/int8),
  other = a known job that is none of these, named in `op`; unknown), `source` (the library:
  cublas-nvjet / cutlass / cublas-ampere (and cublas-volta ...) / cublas-xmma / cublas / cudnn /
  nccl / flash-attn / pytorch-flash / pytorch-mem-efficient / xformers-cutlass / triton-inductor /
  cpp-inductor / aten / tensile / composable-kernel / aiter / miopen / fbgemm / cub / rocprim / liger /
  a registered project's own name (see `register_kernel_names`) / cuda (memsets and memcpys) / unknown ...),
  `summary` (one sentence), `explain` (what the letters and numbers mean, or None when there is
  nothing to explain), `inferred` (the keys whose reading is an inference, see below) and
  `unparsed` (tokens of the name that were read but not interpreted).
* Every other key is *absent* when the name does not say it: `arch`, `layout`, `tile`, `dtype`,
  `out_dtype`, `accumulate`, `stages`, `instruction`, `alignment`, `bias`, `activation`,
  `cluster`, `type_code`, `opcode_class`, `kind`, `kind_code`, `fused_ops`, `op`, `vector_width`,
  `block_threads`, `items_per_thread`, `output_vec_size`, `direction`, `src_memory`,
  `dst_memory`, `index`, `collective`, `reduce_op`, `algorithm`, `protocol` (NCCL), `phase`
  (forward / backward passes of convolutions and attention), `head_dim`. In `decode_kernels` an
  absent key is a missing value (None/NaN).
  `bias` is only ever True: a name without a bias token does not prove the GEMM has no bias.
  `scale_dtype` (ue8m0 / ue4m3 block scales) and `scale_layout` (block-scaled, 1d2d, blockwise,
  rowwise, per-token-group, per-tensor ...) describe low-precision GEMMs and quantizers.
* `inferred` lists keys whose *meaning* comes from analogy rather than from a documented naming
  scheme or a library's own source: `family` when it is read from words in the name (a cuDNN
  `scudnn` kernel is a convolution; `_my_attn_fwd` reads as attention), `source` when a library is
  recognised by a function name other projects copy. The unknown family/source pair carries no
  other key at all. A name longer than `MAX_NAME_CHARS` is not read ("too long to decode").
* Modules, one per group of libraries: `nvidia_gemm` (cuBLAS nvjet, CUTLASS), `cublas` (cuBLAS's
  other kernels), `cudnn`, `communication` (NCCL, RCCL, MSCCL), `attention`, `rocm`, `inductor`,
  `aten`, `xla` (XLA fusions and HLO names), `extensions` (FBGEMM, CUB, rocPRIM, Apex, Transformer Engine), `libraries` (memcpy/memset, Liger,
  names a project registers for its own kernels), `tokens`, `word_rules` and `inference` (the
  reading from words: the function's own name first, then its namespaces, then its template
  arguments; an Itanium-mangled symbol by the identifiers of its nested name), `dtypes`
  (dtype, architecture, scale layout).

Names no library claims: the reading from words
-----------------------------------------------
The last reader (:mod:`.inference`, words in :mod:`.tokens`, table in :mod:`.word_rules`) splits a
name into words (namespaces, template arguments, snake_case, camelCase, digits) and takes the
family of the first rule that matches: convolution, KV-cache copies, attention, state-space layers
(`other`), MoE token layout, GEMM, communication, normalization, gated activation (`fused`),
quantize, MoE routing, softmax, embedding, sampling, sort, re-layouts (copy), optimizer
(elementwise), reduction, elementwise, copy. The order settles overlaps: an `fp8_gemm` or a `w8a8`
matmul is a GEMM whose dtype is FP8, a norm with a fused quantization a norm, `topkGatingSoftmax`
MoE routing, `dispatch`/`combine` communication only beside an expert-parallel word. Three
readings then weigh the whole name: a MoE kernel with a tile shape or a weight/activation precision
is an expert GEMM, a top-k in a router's namespace routes tokens, and a conversion that spells a
low-precision type quantizes. The family (and `op`,
`fused_ops`) is always in `inferred`. Names that speak of experts or routing are read this way
before the ATen and FBGEMM readers; a library kernel whose reader knew no job gets its family from
words (inferred); every kernel of a known family gets the `dtype` and `arch` (sm80 ... sm120,
gfx90a/gfx942/gfx950) a name writes, and low-precision GEMM, quantize and MoE kernels its scale
fields, inferred (NCCL's reader reads its own type field and is left as it is).
Decodings are cached per distinct name (callers get a copy); only the first `READ_CHARS`
characters of a name are read (the summary says so when a name is longer).

What is documented and what is inferred
----------------------------------------
* CUTLASS 2.x names (`cutlass_80_tensorop_bf16_s16816gemm_bf16_128x128_32x4_tn_align8`) and
  CUTLASS 3.x names (`cutlass3x_sm90_tensorop_s64x128x16gemm_..._ntn_align8`) are generated by
  CUTLASS's own scripts and documented in its profiler docs (`media/docs/profiler.md`): tile MxN,
  then K-step x stages; `n` = column-major, `t` = row-major for A, B (and C in 3.x); `alignN`
  = the operands' maximum alignment in elements; the letter before the instruction shape is the
  accumulator type (`s` = fp32). Decoded as fact.
* Inductor names are built by PyTorch (`torch/_inductor/codegen/triton.py`, `utils.py`):
  `triton_<kind>_fused_<ops>_<n>`, kind from the kernel's heuristic (poi = pointwise, red =
  reduction, per = persistent reduction, tem = template, for = foreach, spl = split scan), ops =
  the ATen operators the kernel was generated from, de-duplicated and sorted alphabetically
  (default `descriptive_names="original_aten"`): sorted, not in execution order. Splitting the
  joined ops back apart is best effort (op names contain `_` themselves), done by matching
  PyTorch's registered operator names.
* ATen template parameters are PyTorch's own (ATen/native/cuda/CUDALoops.cuh, Reduce.cuh):
  `vectorized_elementwise_kernel<vec_size, ...>`, `elementwise_kernel<nt, vt, ...>`,
  `unrolled_elementwise_kernel<func, array, elems_per_thread, ...>`, `reduce_kernel<nt,
  output_vec_size, ...>`. The op is read from the functor (`MulFunctor` -> mul) or the
  implementing function (`GeluCUDAKernelImpl` -> gelu).
* cuBLAS's own names (`nvjet_...`, `ampere_...`, `sm90_xmma_...`) are NOT documented; NVIDIA has
  declined to explain them (NVIDIA/TensorRT-LLM issue 1541). Their tile, K-step/stages, cluster,
  dtype and instruction are read by analogy with CUTLASS and listed in `inferred`. For nvjet the
  analogy is supported by arithmetic: (tile_m + tile_n) x K-step x 2 bytes x stages lands near the
  ~200 KB of shared memory per SM for every Hopper name we checked (256x128_64x4, 192x128_64x5,
  64x8_64x16, 144x128_64x6 ...), as a multi-stage pipeline would.
* Layout letters. cuBLAS is column-major. PyTorch's row-major `y = x @ w.T` (`nn.Linear`) is
  computed as the column-major product `y^T = w . x^T`: A = w, whose row-major [out, in] storage
  is a column-major [in, out] matrix, read transposed (T); B = x^T, which is exactly how a
  row-major x looks to a column-major library, read as stored (N). So a Linear forward shows up
  as `tn` / `TN...`. By the same derivation `x @ w` with w stored [in, out] (and a Linear's input
  gradient) is NN, and a Linear's weight gradient is NT. This is derived from the BLAS convention
  and agrees with the A100 names of the course's blog (`..._tn`) and the H200 nvjet names
  (`..._TNT`) measured for the same MLP. nvjet's third letter is undocumented: by analogy with
  CUTLASS 3.x (`ntn` = A, B, C) it is often read as the output's layout, but public benchmark
  tables show the *same* projection on the same contiguous output switching from `..._TNT`
  (M <= 32 tokens) to `..._TNN` (M >= 64), so it is not simply the output's memory layout; it is
  reported as undocumented.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from types import MappingProxyType
from typing import Any

import pandas as pd

from ..registry import register_kernel_names
from .aten import parse_aten
from .attention import parse_attention
from .communication import parse_custom_collective, parse_nccl
from .cublas import parse_cublas_arch, parse_cublas_other, parse_xmma
from .cudnn import parse_cudnn
from .extensions import parse_extensions
from .inductor import parse_cpp_inductor, parse_triton_inductor
from .inference import enrich, fill_family, parse_by_tokens, parse_moe_context
from .libraries import parse_liger, parse_memory, parse_registered
from .nvidia_gemm import parse_cutlass, parse_nvjet
from .rocm import parse_rocm
from .xla import parse_xla

__all__ = [
    "decode_kernel",
    "decode_kernels",
    "register_kernel_names",
    "FAMILIES",
    "FIELDS",
    "MAX_NAME_CHARS",
    "READ_CHARS",
]

# What a kernel is for, as a user compares traces by. `other` is a kernel whose job is known (an
# upsampling, an RNN cell: see `op`) but is none of the others; `unknown` says nothing is known.
FAMILIES: tuple[str, ...] = (
    "gemm",
    "convolution",
    "attention",
    "communication",
    "normalization",
    "softmax",
    "reduction",
    "elementwise",
    "fused",
    "memset",
    "copy",
    "embedding",
    "sort",
    "moe-routing",
    "quantize",
    "other",
    "unknown",
)
# Longer names are not read (the longest real C++ kernel names, CUTLASS 3 / CuTe templates, are
# around 10-20 thousand characters): a name past this is reported as too long to decode.
MAX_NAME_CHARS = 32_768
# Only the first READ_CHARS characters of a name are read: a C++ name keeps its function,
# namespaces and outer template arguments there, and reading 30k characters with every library's
# patterns costs tens of milliseconds a name. The summary says when a name was cut.
READ_CHARS = 512
# Distinct names decoded and kept (a trace has a few hundred to a few thousand distinct names).
_CACHE_NAMES = 8_192

# Keys in the order a table shows them; the optional ones are absent unless the name says them.
_CORE_HEAD = ("name", "short_name", "family", "source")
_OPTIONAL = (
    "arch",
    "layout",
    "tile",
    "dtype",
    "out_dtype",
    "scale_dtype",
    "scale_layout",
    "accumulate",
    "stages",
    "instruction",
    "alignment",
    "bias",
    "activation",
    "cluster",
    "type_code",
    "opcode_class",
    "kind",
    "kind_code",
    "fused_ops",
    "op",
    "vector_width",
    "block_threads",
    "items_per_thread",
    "output_vec_size",
    "direction",
    "src_memory",
    "dst_memory",
    "index",
    "collective",
    "reduce_op",
    "algorithm",
    "protocol",
    "phase",
    "head_dim",
)
_CORE_TAIL = ("summary", "explain", "inferred", "unparsed")
FIELDS: tuple[str, ...] = _CORE_HEAD + _OPTIONAL + _CORE_TAIL

# Tried in order; the first that recognises a name decodes it.
# (Libraries that name their kernels after another's come first: cuDNN's convolutions are built
# from xmma and CUTLASS kernels, attention kernels from CUTLASS pieces.)
_PARSERS = (
    parse_memory,
    parse_nccl,
    parse_attention,
    parse_cudnn,
    parse_nvjet,
    parse_cutlass,
    parse_cublas_arch,
    parse_xmma,
    parse_cublas_other,
    parse_rocm,
    parse_triton_inductor,
    parse_cpp_inductor,
    parse_xla,
    parse_liger,
    parse_registered,
    parse_moe_context,
    parse_extensions,
    parse_aten,
    parse_custom_collective,
    parse_by_tokens,
)


def decode_kernel(name: str) -> dict[str, Any]:
    """Decode one kernel name into a dict of what the name says (see the module docstring).

    Raises TypeError for a non-string and ValueError for an empty or blank string. Unknown names
    are not an error: they come back as family "unknown", source "unknown", with no other field.
    Each distinct name is decoded once and cached; the dict returned is the caller's own copy.
    """
    if not isinstance(name, str):
        raise TypeError(f"decode_kernel expects a kernel name as str, got {type(name).__name__}: {name!r}")
    text = name.strip()
    if not text:
        raise ValueError("decode_kernel got an empty kernel name")
    if len(text) > MAX_NAME_CHARS:
        return _finish(text, _too_long(len(text)))
    return {k: list(v) if isinstance(v, tuple) else v for k, v in _decode_cached(text).items()}


@lru_cache(maxsize=_CACHE_NAMES)
def _decode_cached(text: str) -> MappingProxyType:
    """The decoding of one stripped name, read-only (lists stored as tuples) so no caller can change the cache."""
    # rocprof prints a kernel by its code-object symbol, the kernel descriptor `<name>.kd`: the name is before it
    read = text[:READ_CHARS].removesuffix(".kd")
    fields = next((f for parser in _PARSERS if (f := parser(read)) is not None), None)
    fields = _unknown() if fields is None else enrich(read, fill_family(read, fields))
    if len(text) > READ_CHARS:
        cut = f" Only the first {READ_CHARS:,} of its {len(text):,} characters were read."
        fields = {**fields, "summary": fields["summary"] + cut}
    out = _finish(text, fields)
    return MappingProxyType({k: tuple(v) if isinstance(v, list) else v for k, v in out.items()})


def decode_kernels(names: Iterable[str]) -> pd.DataFrame:
    """One row per distinct name (first-seen order), one column per field of `decode_kernel`.

    Columns that no row fills are dropped, except the core ones. Accepts any iterable of strings
    (a list, a Series, a DataFrame column); a non-string element raises TypeError.
    """
    if isinstance(names, str):
        raise TypeError("decode_kernels expects an iterable of names, not a single str: use decode_kernel")
    seen: dict[str, None] = {}
    for item in names:
        if not isinstance(item, str):
            raise TypeError(f"decode_kernels expects kernel names as str, got {type(item).__name__}: {item!r}")
        seen.setdefault(item, None)
    rows = [decode_kernel(n) for n in seen]
    present = {key for row in rows for key in row}
    core = set(_CORE_HEAD + _CORE_TAIL)
    columns = [f for f in FIELDS if f in core or f in present]
    # object columns with None for absent fields: stages stay ints (not 4.0 next to a NaN), and
    # `is None` checks behave the same on a row as on the dict
    return pd.DataFrame([{c: row.get(c) for c in columns} for row in rows], columns=columns, dtype=object)


# ---------------------------------------------------------------------------------------------
# shared helpers
# ---------------------------------------------------------------------------------------------


def _finish(text: str, fields: dict[str, Any]) -> dict[str, Any]:
    """Order the keys, fill the core ones, and check that nothing unexpected slipped in."""
    unknown_keys = set(fields) - set(FIELDS)
    if unknown_keys:  # a programming error in a parser, not a user error
        raise AssertionError(f"decoder produced unexpected keys {sorted(unknown_keys)}")
    if fields.get("family") not in FAMILIES:
        raise AssertionError(f"decoder produced family {fields.get('family')!r}")
    out: dict[str, Any] = {"name": text, "short_name": fields.get("short_name", text)}
    out["family"] = fields["family"]
    out["source"] = fields["source"]
    for key in _OPTIONAL:
        if fields.get(key) is not None:
            out[key] = fields[key]
    out["summary"] = fields["summary"]
    out["explain"] = fields.get("explain")
    out["inferred"] = [k for k in fields.get("inferred", []) if k in out]
    out["unparsed"] = list(fields.get("unparsed", []))
    return out


def _unknown() -> dict[str, Any]:
    return {
        "family": "unknown",
        "source": "unknown",
        "summary": "Not a kernel name this decoder knows: nothing is read from it.",
    }


def _too_long(length: int) -> dict[str, Any]:
    return {
        "family": "unknown",
        "source": "unknown",
        "short_name": "(name too long to decode)",
        "summary": f"Too long to decode: {length:,} characters (names past {MAX_NAME_CHARS:,} are not read); "
        "nothing is read from it.",
    }
