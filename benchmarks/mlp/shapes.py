"""The problems the variants benchmark measures: named shape presets (``--shapes`` of
``benchmarks/mlp_variants.py``).

The blog post's shape first (every variant, training too), then MLP sizes of open models at a
prefill-sized M (4096 tokens) and at decode-sized M (one token per sequence), the blog shape in
float16, and a hidden size that is no multiple of 8. ``tiny`` is the CPU smoke test.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from helpers.mlp import variants as V
from helpers.mlp.model import MLPShape

from .training_variants import TRAINING_VARIANTS

# The variants measured away from the main shape (the course's GeGLU-only variants add little there).
CORE_VARIANTS: tuple[str, ...] = ("eager", "compile", "liger", "course-geglu-cat", "course-fused")
TRAINING_NAMES: tuple[str, ...] = tuple(TRAINING_VARIANTS)


@dataclass(frozen=True)
class ShapePreset:
    """A named problem the benchmark measures: sizes, dtype, which variants, whether training too."""

    name: str
    shape: MLPShape
    dtype: str
    why: str
    variants: tuple[str, ...] = CORE_VARIANTS
    training: tuple[str, ...] = ()
    tags: tuple[str, ...] = field(default_factory=tuple)

    def describe(self) -> dict[str, Any]:
        s = self.shape
        return {
            "name": self.name,
            "why": self.why,
            "dtype": self.dtype,
            "shape": {"batch": s.batch, "seq": s.seq, "dim": s.dim, "hidden": s.hidden, "tokens": s.tokens},
        }


SHAPES: dict[str, ShapePreset] = {
    p.name: p
    for p in (
        ShapePreset(
            "blog",
            MLPShape(64, 128, 768, 3072),
            "bfloat16",
            "the blog post's shape: batch 64 x seq 128, 768 -> 3072",
            variants=V.VARIANT_NAMES,
            training=TRAINING_NAMES,
        ),
        ShapePreset(
            "model-2048x16384",
            MLPShape(32, 128, 2048, 16384),
            "bfloat16",
            "a 2048 -> 16384 MLP (Gemma 2B's sizes) at M = 4096 tokens",
            tags=("model",),
        ),
        ShapePreset(
            "model-4096x14336",
            MLPShape(32, 128, 4096, 14336),
            "bfloat16",
            "a 4096 -> 14336 MLP (Llama 3 8B's and Mistral 7B's sizes) at M = 4096 tokens",
            tags=("model",),
        ),
        ShapePreset(
            "model-4096x14336-m16384",
            MLPShape(128, 128, 4096, 14336),
            "bfloat16",
            "the 4096 -> 14336 MLP at M = 16384 tokens (the top of the issue's range)",
            variants=("eager", "compile", "course-geglu-cat", "course-fused"),
            tags=("model",),
        ),
        ShapePreset(
            "decode-4096x14336-m128",
            MLPShape(128, 1, 4096, 14336),
            "bfloat16",
            "decoding: 128 sequences, one token each, through the 4096 -> 14336 MLP (weights dominate)",
            tags=("model", "decode"),
        ),
        ShapePreset(
            "decode-4096x14336-m512",
            MLPShape(512, 1, 4096, 14336),
            "bfloat16",
            "decoding: 512 sequences, one token each, through the 4096 -> 14336 MLP",
            tags=("model", "decode"),
        ),
        ShapePreset(
            "blog-fp16",
            MLPShape(64, 128, 768, 3072),
            "float16",
            "the blog's shape in float16",
            tags=("dtype",),
        ),
        ShapePreset(
            "blog-unaligned",
            MLPShape(64, 128, 768, 3068),
            "bfloat16",
            "the blog's shape with hidden 3068 (no multiple of 8): padded rows keep the TMA path",
            variants=("eager", "compile", "course-fused"),
            tags=("unaligned",),
        ),
        ShapePreset(
            "tiny",
            MLPShape(1, 16, 32, 64),
            "float32",
            "a CPU smoke test: the Triton interpreter at a tiny shape",
            variants=("eager", "compile", "liger", "course-geglu", "course-geglu-cat", "course-fused"),
            training=("eager", "course-geglu-cat", "course-fused-save", "course-fused-recompute"),
        ),
    )
}
GPU_SHAPES: tuple[str, ...] = tuple(n for n in SHAPES if n != "tiny")


def check_shapes(names: Sequence[str]) -> list[str]:
    """Validate preset names (ValueError naming unknown ones); ``"model"`` etc. expand to their tag."""
    out: list[str] = []
    for n in names:
        tagged = [p.name for p in SHAPES.values() if n in p.tags]
        if n in SHAPES:
            out.append(n)
        elif tagged:
            out += tagged
        else:
            raise ValueError(f"unknown shape preset {n!r}; choose from {', '.join(SHAPES)} or the tags model, decode")
    return list(dict.fromkeys(out))
