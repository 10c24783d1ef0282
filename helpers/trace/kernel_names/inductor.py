"""torch.compile's generated kernels: ``triton_<kind>_fused_<ops>_<n>`` and ``[graph_<g>_]cpp_fused_<ops>_<n>``."""

from __future__ import annotations

import re
from typing import Any

from ..aten_ops import op_class, op_vocabulary

_TRITON_KINDS = {
    "poi": "pointwise",
    "red": "reduction",
    "per": "persistent reduction",
    "tem": "template",
    "for": "foreach",
    "spl": "split scan",
    "unk": "unknown",
}


# Longest run of `_`-separated tokens considered as one op name (registered ATen names have at
# most 9; unknown words are grouped up to this length too). Bounds the split to linear time.
MAX_OP_TOKENS = 12


def _split_ops(joined: str) -> list[str]:
    """Split Inductor's `_`-joined op names back into ops.

    Op names contain `_` themselves (`_unsafe_view`, `native_layer_norm`), so ways of grouping the
    `_`-separated tokens are scored: fewest tokens outside known op names first, then fewest
    breaks of alphabetical order (Inductor sorts the names), then fewest ops (prefer the longer
    known name). Dynamic programming over token positions with groups of at most
    ``MAX_OP_TOKENS`` tokens and back-pointers: time linear in the length of the name.
    """
    tokens = joined.split("_")
    vocab = op_vocabulary()
    n = len(tokens)
    # best[i] = (unknown tokens, order breaks, groups) for tokens[:i]; back[i] = (start, op)
    best: list[tuple[int, int, int] | None] = [None] * (n + 1)
    back: list[tuple[int, str] | None] = [None] * (n + 1)
    best[0] = (0, 0, 0)
    for i in range(n):
        if best[i] is None:
            continue
        unk, breaks, groups = best[i]
        prev = back[i][1] if back[i] is not None else None
        for j in range(i + 1, min(n, i + MAX_OP_TOKENS) + 1):
            group = tokens[i:j]
            # an empty token only marks the leading underscore of an op (`_unsafe_view`)
            if "" in group[1:] or not any(group):
                continue
            op = "_".join(group)
            cand = (
                unk + (0 if op in vocab else len(group)),
                breaks + (1 if prev is not None and op < prev else 0),
                groups + 1,
            )
            if best[j] is None or cand < best[j]:
                best[j], back[j] = cand, (i, op)
    if best[n] is None:
        return [joined]
    ops: list[str] = []
    j = n
    while j > 0:
        start, op = back[j]  # type: ignore[misc]
        ops.append(op)
        j = start
    return ops[::-1]


def _is(op: str, *classes: str) -> bool:
    return op_class(op) in classes


def _inductor_family(kind: str | None, ops: list[str]) -> str:
    """Family from the kind (documented) or, for C++ kernels that carry no kind, from the ops."""
    compute = [o for o in ops if not _is(o, "view", "wrapper", "copy")]
    if kind in ("reduction", "persistent reduction"):
        # what the reduction is for, when the ops say it: a softmax, a norm
        if any(_is(o, "softmax") for o in ops):
            return "softmax"
        # a mean (or variance) and an rsqrt in one reduction is a decomposed RMS/layer norm
        if any(_is(o, "normalization") for o in ops) or ("rsqrt" in ops and {"mean", "var_mean"} & set(ops)):
            return "normalization"
        return "reduction"
    if kind == "template":
        if any(_is(o, "attention") for o in ops):
            return "attention"  # FlexAttention: Inductor's flex_attention templates
        if any(_is(o, "convolution") for o in ops):
            return "convolution"
        return "gemm" if any(_is(o, "gemm") or o in ("matmul", "linear") for o in ops) else "unknown"
    if kind in ("split scan", "unknown"):
        return "unknown"
    if kind is None and any(_is(o, "softmax") for o in ops):
        return "softmax"
    if kind is None and any(_is(o, "normalization") for o in ops):
        return "normalization"
    if kind is None and any(_is(o, "reduction") for o in ops):
        return "reduction"
    if ops and not compute:
        return "copy"
    if any(o.startswith("embedding") for o in ops):
        return "embedding"
    # a scale, a clamp to the target range and a cast: the decomposed quantizer (Float8 training)
    if "_to_copy" in ops and {"clamp", "clamp_min", "clamp_max"} & set(ops) and {"mul", "div", "reciprocal"} & set(ops):
        return "quantize"
    if len(compute) >= 2:
        return "fused"
    return "elementwise"


# what follows `triton_<kind>_` / `cpp_`: `fused_<ops>_<n>`, `fused_<n>` or (names off) `_<n>`
_INDUCTOR_TAIL = re.compile(r"fused(?:_\w*)?_\d+|_?\d+")


def _fused_part(rest: str) -> tuple[list[str] | None, int | None]:
    """'fused__unsafe_view_gelu_mul_0' -> (['_unsafe_view', 'gelu', 'mul'], 0)."""
    m = re.fullmatch(r"(.*?)_?(\d+)", rest)
    head, index = (m.group(1), int(m.group(2))) if m else (rest, None)
    if head.startswith("fused"):
        joined = head[len("fused") :]
        joined = joined[1:] if joined.startswith("_") else joined
        return (_split_ops(joined) if joined else None), index
    return None, index


def _inductor_explain(prefix: str) -> str:
    return (
        f"Inductor names a generated kernel {prefix}fused_<ops>_<n>: <ops> are the ATen "
        "operators it was generated from, de-duplicated and sorted alphabetically (not in "
        "execution order; view ops such as _unsafe_view appear although they move no data), "
        "and <n> is a counter within the compiled graph."
    )


# Triton 2.0/2.1 appended the argument specialisation to a kernel's name: `_0d1d2de` says arguments
# 0, 1, 2 are 16-byte aligned (d) and argument 2 equals 1 (e). torch 2.0's Inductor named its
# kernels `triton_` (+ that suffix: `triton__0d1d2d`), without kind or ops.
def _specialisation(text: str) -> tuple[str, str] | None:
    """'triton__0d1d2de' -> ('triton_', '0d1d2de'); None without such a suffix (no regex: linear time)."""
    base, _, suffix = text.rpartition("_")
    if base.startswith("triton_") and re.fullmatch(r"\d[\dde]*", suffix) and ("d" in suffix or "e" in suffix):
        return base, suffix
    return None


def parse_triton_inductor(text: str) -> dict[str, Any] | None:
    sig = _specialisation(text)
    if sig:
        base, suffix = sig
        if base == "triton_":
            return {
                "family": "unknown",
                "source": "triton-inductor",
                "inferred": ["source"],
                "unparsed": [suffix],
                "summary": "A Triton kernel generated by torch.compile in torch 2.0 (named triton_ plus its "
                "argument specialisation): the name says neither its kind nor its ops.",
                "explain": "Triton 2.0/2.1 appended the argument specialisation to kernel names: in "
                f"_{suffix}, each number is an argument, d = 16-byte aligned, e = equal to 1.",
            }
        inner = parse_triton_inductor(base)
        if inner is not None:
            inner["unparsed"] = list(inner.get("unparsed", [])) + [suffix]
            return inner
    m = re.fullmatch(r"(?:\w+?_)?triton_(poi|red|per|tem|for|spl|unk)_(\w+)", text)
    if not m:
        return None
    code, rest = m.groups()
    if not _INDUCTOR_TAIL.fullmatch(rest):
        return None
    kind = _TRITON_KINDS[code]
    ops, index = _fused_part(rest)
    family = _inductor_family(kind, ops or [])
    info: dict[str, Any] = {
        "family": family,
        "source": "triton-inductor",
        "kind": kind,
        "kind_code": code,
        "fused_ops": ops,
        "index": index,
    }
    core = ("gemm", "attention", "convolution", "view", "wrapper", "copy")
    extra = [o for o in ops or [] if not (_is(o, *core) or o in ("matmul", "linear"))]
    template = "template kernel" + {
        "gemm": " (a Triton GEMM template)",
        "attention": " (FlexAttention's Triton attention template)",
        "convolution": " (a Triton convolution template)",
    }.get(family, "")
    if extra:
        template += f" with {', '.join(extra)} fused in"
    what = {
        "pointwise": "pointwise kernel",
        "reduction": "reduction kernel",
        "persistent reduction": "persistent reduction kernel (one block holds a whole row)",
        "template": template,
        "foreach": "foreach kernel (one launch over a list of tensors)",
        "split scan": "split-scan kernel",
        "unknown": "kernel of unknown kind",
    }[kind]
    opstxt = f" from {', '.join(ops)}" if ops else ""
    info["summary"] = f"Triton {what}, generated by torch.compile (Inductor){opstxt}."
    info["explain"] = (
        _inductor_explain(f"triton_{code}_") + " Kinds: poi = pointwise, red = "
        "reduction, per = persistent reduction, tem = template (GEMM), for = "
        "foreach, spl = split scan."
    )
    return info


def parse_cpp_inductor(text: str) -> dict[str, Any] | None:
    m = re.fullmatch(r"(?:graph_(\d+)_)?cpp_(\w+)", text)
    if not m or not _INDUCTOR_TAIL.fullmatch(m.group(2)):
        return None
    ops, index = _fused_part(m.group(2))
    family = _inductor_family(None, ops or [])
    info: dict[str, Any] = {"family": family, "source": "cpp-inductor", "fused_ops": ops, "index": index}
    # C++ kernel names carry no kind: the family is read from the op names.
    info["inferred"] = ["family"] if ops else []
    opstxt = f" from {', '.join(ops)}" if ops else ""
    graph = f" (graph {m.group(1)}, as recorded with cpp.enable_kernel_profile)" if m.group(1) else ""
    info["summary"] = f"C++ kernel generated by torch.compile (Inductor) for the CPU{opstxt}{graph}."
    info["explain"] = (
        _inductor_explain("cpp_") + " The name does not say pointwise or reduction: the family is read from the ops."
    )
    return info
