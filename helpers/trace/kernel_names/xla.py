"""XLA's GPU kernels as JAX and PyTorch/XLA profiles show them: fusions and HLO instruction names.

XLA names a fused kernel after its fusion kind and root instruction (``loop_add_fusion``,
``input_reduce_fusion``, ``input_transpose_fusion``), wraps a lone instruction as
``wrapped_<op>``, names its Triton and cuBLAS-backed GEMM fusions ``gemm_fusion_dot`` /
``triton_gemm_dot`` and, in xprof tables, shows other work under the HLO instruction's own name
(``all-reduce-start``, ``fft.0.0``). A clone adds ``.N`` or ``_N``.
"""

from __future__ import annotations

import re
from typing import Any

# HLO opcodes, as XLA spells them inside fusion names (underscores) and instruction names (hyphens)
_MOVE = (
    "transpose|copy|concatenate|slice|dynamic_slice|dynamic_update_slice|pad|gather|scatter|reshape"
    "|bitcast|broadcast|iota|reverse|copy_start|copy_done"
)
_COLLECTIVE = (
    r"all_reduce|all_gather|reduce_scatter|all_to_all|collective_permute|collective_broadcast|send|recv"
    r"|ragged_all_to_all"
)
_HLO_FAMILY: tuple[tuple[str, str, str | None], ...] = (
    (rf"(?:{_COLLECTIVE})(?:_start|_done)?", "communication", None),
    (r"dot|convolution_?dot|gemm|cublas_?gemm|cublas_?lt_?matmul|triton_?gemm|cutlass_?gemm", "gemm", None),
    (r"convolution|cudnn_?conv\w*", "convolution", None),
    (r"reduce|reduce_window|reduce_precision_reduce|argmax|argmin", "reduction", None),
    (r"softmax|triton_?softmax", "softmax", None),
    (r"sort|top_?k", "sort", None),
    (r"fft", "other", "fft"),
    (r"triangular_solve|cholesky|custom_call_cholesky", "other", "linear_algebra"),
    (rf"{_MOVE}", "copy", None),
)
# arithmetic roots: a fusion named after one without a kind is still XLA's
_ARITH = re.compile(
    r"add|subtract|multiply|divide|remainder|power|exponential|exponential_minus_one|log|log_plus_one|sqrt|rsqrt"
    r"|cbrt|tanh|logistic|negate|abs|sign|maximum|minimum|clamp|select|compare|convert|complex|real|imag|and|or"
    r"|xor|not|floor|ceil|round_nearest_even|erf|sine|cosine|atan2|is_finite|shift_left|shift_right_logical"
)
# a fused kernel: <kind>_<root op>_fusion; the kind alone says a loop is elementwise
_FUSION = re.compile(r"(?:(loop|input|output|wrapped|triton|custom|kernel)_)?(?:(\w+?)_)?fusion")
_NUMBERING = re.compile(r"(?:[._]\d+)*")


def _strip_numbering(text: str) -> str:
    """'input_reduce_fusion_92' -> 'input_reduce_fusion'; 'fft.0.0' -> 'fft'."""
    m = re.fullmatch(r"(.*?[a-z])((?:[._]\d+)*)", text)
    return m.group(1) if m else text


def _hlo_family(op: str) -> tuple[str, str | None] | None:
    for pattern, family, name in _HLO_FAMILY:
        if re.fullmatch(pattern, op):
            return family, name
    return None


def parse_xla(text: str) -> dict[str, Any] | None:
    """An XLA GPU fusion or HLO instruction name; None for any other name."""
    if not re.fullmatch(r"[a-z][a-z0-9_.\-]*", text) or len(text) > 120:
        return None
    base = _strip_numbering(text)
    hyphenated = "-" in base
    flat = base.replace("-", "_")
    m = _FUSION.fullmatch(flat)
    if m and not hyphenated:
        kind, op = m.groups()
        return _fusion(text, kind, op)
    m = re.fullmatch(r"(gemm_fusion|triton_gemm|cutlass_gemm|cublas_gemm)(?:_dot)?", flat)
    if m:
        return _read(text, "gemm", None, "XLA GEMM fusion (Triton-emitted or a cuBLAS/CUTLASS call)", "fusion")
    m = re.fullmatch(r"wrapped_(\w+)", flat)
    if m and not hyphenated:
        return _fusion(text, "wrapped", m.group(1))
    # an HLO instruction name as xprof shows it: hyphens and a numbering say it is XLA's
    if hyphenated or base != text:
        found = _hlo_family(flat)
        if found:
            family, op = found
            return _read(text, family, op, f"the HLO instruction {base}", "instruction")
    return None


def _fusion(text: str, kind: str | None, op: str | None) -> dict[str, Any] | None:
    """The family of an XLA fusion from its kind and root instruction."""
    found = _hlo_family(op) if op else None
    if found:
        family, name = found
    elif op and kind == "input":
        family, name = "fused", None  # an input fusion whose root is not a reduction or a move
    elif kind in ("loop", "wrapped") or (kind is None and op and _ARITH.fullmatch(op)):
        family, name = "elementwise", None  # a loop fusion (or wrapped op) of an arithmetic root
    elif kind is None and op is None:
        family, name = "fused", None
    else:
        return None
    what = f"an XLA {kind or ''} fusion".replace("  ", " ")
    if op:
        what += f" rooted at {op}"
    return _read(text, family, name, what, "fusion", op)


def _read(text: str, family: str, op: str | None, what: str, form: str, root: str | None = None) -> dict[str, Any]:
    info: dict[str, Any] = {"family": family, "source": "xla", "inferred": ["family"]}
    if op:
        info["op"] = op
    if root:
        info["fused_ops"] = [root]
    info["summary"] = f"A kernel compiled by XLA (JAX, PyTorch/XLA): {what}."
    info["explain"] = (
        "XLA names a fused GPU kernel <kind>_<root instruction>_fusion (kind loop = elementwise, input = "
        "reduction or transpose emitter, wrapped = one instruction); .N or _N numbers clones. The family "
        "is read from the root instruction, so work fused under it is not named."
        if form == "fusion"
        else "xprof shows XLA work that is not a fusion under its HLO instruction name (numbered .N)."
    )
    return info
