"""Lesson 02, `nn.Linear` and the `addmm` epilogue: its exercises, their explanations and hints."""

from __future__ import annotations

import re

from .exercises import Exercise, Exercises

EXERCISES = Exercises(
    "02",
    kernels_matmul_add=Exercise(
        "kernels of x @ W.T + b (H200)",
        explain="One GEMM for the product, one elementwise kernel for + b: the product makes a round trip "
        "through memory.",
        hint="One kernel per operator that computes something.",
    ),
    kernels_linear=Exercise(
        "kernels of nn.Linear(bias=True) (H200)",
        explain="aten::addmm hands the bias to the GEMM, which adds it before writing the result: one kernel "
        "(section 3 shows the other path, and how to tell them apart).",
        hint="Does the bias need its own pass over the output?",
    ),
    add_under_linear=Exercise(
        "aten::add under aten::linear",
        explain="nn.Linear calls aten::addmm, which adds the bias inside the matrix product's call.",
        hint="nn.Linear calls one operator for bias + x @ W.T: which?",
    ),
    ab_layout=Exercise(
        "layout letters of the Linear's GEMM",
        explain="cuBLAS computes y^T = W . x^T: A = W read transposed (T), B = x^T read as stored (N). "
        "The decoded name below has the full derivation.",
        hint="x is [rows, in], W is [out, in]: which of them is read along its rows?",
    ),
    compile_changes_gpu_kernel=Exercise(
        "compile changes the GPU kernel",
        explain="Inductor calls the same extern addmm, so cuBLAS picks the same kernel; only the CPU-side "
        "dispatch changed.",
        hint="Inductor's default mode does not write its own matrix products.",
    ),
    my_product_op=Exercise(
        "the operator computing your Linear",
        explain="{measured} did the work. With a bias, ATen folds the leading dimensions of a contiguous input "
        "into rows and calls addmm (views before and after); without one it goes through matmul to mm.",
        hint="A 3-D input of a Linear is a stack of rows: does ATen need a batched product for it?",
    ),
)
check, hint, summary = EXERCISES.check, EXERCISES.hint, EXERCISES.summary
reveal, answered, evidence = EXERCISES.reveal, EXERCISES.answered, EXERCISES.evidence  # answers once right or asked for
assert_all_correct, reset = EXERCISES.assert_all_correct, EXERCISES.reset


def as_bullets(text: str) -> str:
    """A decoded name's long explanation as a Markdown list, one sentence an item (a sentence starts after a full
    stop followed by a capital), so a learner reads it in steps rather than as one block."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    sentences = [s.strip() for s in re.split(r"(?<=[.])\s+(?=[A-Z])", text) if s.strip()]
    return "\n".join(f"- {s}" for s in sentences)
