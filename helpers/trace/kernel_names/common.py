"""Pieces every kernel-name reader shares: shape tokens, layout letters, dtype words."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from ..dtypes import lookup

# Tokens CUTLASS and cuBLAS kernel names use for element types -> the short name ("f16" -> "fp16").
DTYPE_WORDS: dict[str, str] = {
    t: lookup(t).short
    for t in ("bf16", "f16", "fp16", "f32", "fp32", "tf32", "f64", "fp64", "s8", "u8", "s32", "e4m3", "e5m2")
}
# One-letter BLAS precision prefixes (`sgemm`, `hgemm`) and CUTLASS accumulator letters.
PRECISION_LETTER = {"s": "fp32", "d": "fp64", "h": "fp16", "c": "complex64", "z": "complex128", "i": "int32"}
# nvjet type codes such as `tst`, `hsh`, `tss`: letters read by analogy (t = bf16, h = fp16,
# s = fp32, d = fp64) as input, compute and output types. Undocumented, hence inferred.
NVJET_TYPE_LETTER = {"t": "bf16", "h": "fp16", "s": "fp32", "d": "fp64"}
# CUTLASS's Python DSL (CuTe DSL) names each JIT-compiled kernel `kernel_cutlass_<module><Class>_object_at_...`
CUTE_DSL_PREFIX = "kernel_cutlass_"

Fields = dict[str, Any]


def instruction_shape(digits: str) -> str | None:
    """Split a CUTLASS-style instruction shape: '16816' -> '16x8x16', '161616' -> '16x16x16'.

    The digits are three MMA dimensions written without separators; each is a power of two, and
    the split is used only when exactly one split works.
    """
    allowed = {"1", "2", "4", "8", "16", "32", "64", "128", "256"}
    splits = []
    for i in range(1, len(digits)):
        for j in range(i + 1, len(digits)):
            parts = (digits[:i], digits[i:j], digits[j:])
            if all(p in allowed for p in parts):
                splits.append("x".join(parts))
    return splits[0] if len(splits) == 1 else None


def parse_dims(token: str) -> list[int] | None:
    """'256x128' -> [256, 128]; anything else -> None."""
    if re.fullmatch(r"\d+(?:x\d+)+", token):
        return [int(p) for p in token.split("x")]
    return None


def join(parts: Iterable[str | None]) -> str:
    return ", ".join(p for p in parts if p)


def stages_text(n: int) -> str:
    return f"{n} stage" if n == 1 else f"{n} stages"


LAYOUT_PRIMER = (
    "cuBLAS is column-major. nn.Linear's row-major y = x @ w.T is computed as y^T = w . x^T. "
    "A = w is read transposed (T); B = x^T is read as stored (N). So a Linear forward reads TN. "
    "x @ w with w stored [in, out] reads NN, and so does a Linear's input gradient. "
    "A Linear's weight gradient reads NT."
)


def letter_text(letter: str) -> str:
    return "T (transposed / row-major)" if letter.lower() == "t" else "N (not transposed / column-major)"


def explain_ab(letters: str, documented: bool) -> str:
    a, b = letters[0], letters[1]
    basis = (
        "CUTLASS documents n = column-major, t = row-major."
        if documented
        else "Read by analogy with CUTLASS names and cuBLAS's transa/transb (cuBLAS does not "
        "document its kernel names)."
    )
    return f"Layout letters: A {letter_text(a)}, B {letter_text(b)}. {basis} {LAYOUT_PRIMER}"


# ---------------------------------------------------------------------------------------------
# C++ names: demangled signatures and Itanium-mangled symbols
# ---------------------------------------------------------------------------------------------
_PAIRS = {"<": ">", "(": ")", "{": "}", "[": "]"}
_CLOSERS = frozenset(_PAIRS.values())


def split_signature(text: str) -> tuple[str, list[str] | None]:
    """'void at::native::k<8, F, A>(int, ...)' -> ('at::native::k', ['8', 'F', 'A']).

    The qualified name is everything before the first '<' or '('; template arguments are split at
    top-level commas. An unbalanced (truncated) name gives no template arguments. One pass over
    the text: linear in its length; the last few names are remembered, as every reader asks.
    """
    qual, args = _split_signature(text)
    return qual, None if args is None else list(args)


@lru_cache(maxsize=16)
def _split_signature(text: str) -> tuple[str, tuple[str, ...] | None]:
    # nsys writes an anonymous namespace `<unnamed>`: a namespace, not a template argument list
    body = text.removeprefix("void ").replace("(anonymous namespace)", "{anon}").replace("<unnamed>", "{anon}")
    cut = len(body)
    for ch in "<(":
        pos = body.find(ch)
        if pos != -1:
            cut = min(cut, pos)
    qual = body[:cut].strip()
    if cut >= len(body) or body[cut] != "<":
        return qual, None
    depth, start, args = 0, cut + 1, []
    for pos in range(cut, len(body)):
        ch = body[pos]
        if ch in _PAIRS:
            depth += 1
        elif ch in _CLOSERS:
            depth -= 1
            if depth == 0:
                args.append(body[start:pos].strip())
                return qual, tuple(args)
        elif ch == "," and depth == 1:
            args.append(body[start:pos].strip())
            start = pos + 1
    return qual, None


def function_name(text: str) -> str:
    """The unqualified function name of a demangled signature: 'void a::b::k<1>(int)' -> 'k'."""
    qual, _ = split_signature(text)
    return qual.rsplit("::", 1)[-1]


def namespaces(text: str) -> list[str]:
    """The namespaces of a demangled signature's function: 'void a::{anon}::k<1>()' -> ['a', '{anon}']."""
    qual, _ = split_signature(text)
    return qual.split("::")[:-1]


_MANGLED_LENGTH = re.compile(r"(\d+)")


def mangled_words(text: str, limit: int = 64) -> list[str] | None:
    """The identifiers of an Itanium-mangled C++ symbol, in order; None when `text` is not one.

    '_ZN19cutlass_cudnn_train6KernelINS_4conv...' -> ['cutlass_cudnn_train', 'Kernel', 'conv', ...].
    Only the length-prefixed identifiers are read (no full demangling): enough to tell a library
    and a kernel's name. At most `limit` words; one pass over the text.
    """
    if not text.startswith("_Z"):
        return None
    # a profiler's table cuts long symbols ("..._22FmhaBwdOGradDotOKer..."): the cut identifier is still a word
    cut = text.endswith(("...", "\u2026"))
    text = text.rstrip(".\u2026") if cut else text
    words: list[str] = []
    pos, n = 2, len(text)
    while pos < n and len(words) < limit:
        m = _MANGLED_LENGTH.search(text, pos)
        if m is None:
            break
        start = m.end()
        before = text[max(m.start() - 2, 0) : m.start()]
        # not a length: an integer literal (L<type><n>E), a substitution (S<n>_, T<n>_) or a vector (Dv<n>_)
        literal = len(before) == 2 and before[0] == "L" and before[1].islower()
        reference = before[-1:] in ("S", "T", "v") and text[start : start + 1] == "_"
        length = int(m.group(1)) if len(m.group(1)) <= 6 and not literal and not reference else 0
        word = text[start : start + length]
        if length and len(word) == length and re.fullmatch(r"[A-Za-z_]\w*", word):
            words.append(word)
            pos = start + length
        elif cut and length and start + len(word) == n and len(word) >= 3 and re.fullmatch(r"[A-Za-z_]\w*", word):
            words.append(word)
            break
        else:
            pos = m.end()
    return words or None


_SUBSTITUTION = re.compile(r"S[0-9A-Z]*_|St|Sa|Sb|Ss|Si|So|Sd")


@lru_cache(maxsize=16)
def mangled_parts(text: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(namespaces + function, the other identifiers) of an Itanium-mangled symbol; None when not one.

    '_ZN10flashinfer8sampling12TopKKernelILj8EEEvPf' -> (('flashinfer', 'sampling', 'TopKKernel'), ()):
    the nested name _ZN ... E ends at its template arguments (I) or its end (E), so the function is
    its last identifier, not the second one. '_ZL7mul_f32PKf' (internal linkage) -> (('mul_f32',), ()).
    """
    words = mangled_words(text)
    if words is None:
        return None
    pos = 3 if text.startswith(("_ZN", "_ZL")) else 2
    nested = text.startswith("_ZN")
    qual: list[str] = []
    while pos < len(text):
        while nested and pos < len(text) and text[pos] in "KVrL":  # cv-qualifiers
            pos += 1
        sub = _SUBSTITUTION.match(text, pos) if nested else None
        if sub:
            pos = sub.end()
            continue
        m = re.match(r"(\d+)", text[pos:])
        if m is None:
            break
        start, length = pos + m.end(), int(m.group(1))
        word = text[start : start + length]
        if len(word) != length or not re.fullmatch(r"[A-Za-z_]\w*", word):
            break
        qual.append(word)
        pos = start + length
        if not nested or pos >= len(text) or text[pos] in "IE":
            break
    if not qual or qual != words[: len(qual)]:
        qual = words[:1]  # a length that does not fit its identifier: the first identifier only
    return tuple(qual), tuple(words[len(qual) :])


def readable(text: str) -> str:
    """A mangled symbol written as 'ns::function<identifiers ...>' for word readers; any other name as it is."""
    parts = mangled_parts(text)
    if parts is None:
        return text
    qual, rest = parts
    return "::".join(qual) + (f"<{', '.join(rest)}>" if rest else "")


def camel_words(word: str) -> list[str]:
    """'AllReduceRingLLKernel' -> ['All', 'Reduce', 'Ring', 'LL', 'Kernel']."""
    return re.findall(r"[A-Z]+(?=[A-Z][a-z]|\b|\d)|[A-Z]?[a-z]+|[A-Z]+|\d+", word)
