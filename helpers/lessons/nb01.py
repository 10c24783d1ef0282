"""Lesson 01, strides and views: its exercises, their explanations and hints."""

from __future__ import annotations

from ..trace.queries import op_costs  # noqa: F401  (used by the notebook as helpers.nb01.<name>)
from .exercises import Exercise, Exercises
from .strides import layout_table, storage_index, strides_figure  # noqa: F401  (used by the notebook as helpers.nb01.<name>)

EXERCISES = Exercises(
    "01",
    t_stride=Exercise(
        "stride of x.t()",
        explain="t() swaps the shape and the strides: moving along a row of x.t() steps 4 elements "
        "in the buffer (down a column of x), moving down a column steps 1.",
        hint="Swap what x has.",
    ),
    copies=Exercise(
        "which results are copies",
        explain="t, transpose, view, reshape of a contiguous tensor and as_strided only write a new shape/stride. "
        "contiguous() of a transposed tensor must reorder the data; so must flatten() of it.",
        hint="A view reads x's buffer; a copy has its own.",
    ),
    kernels_per_call=Exercise(
        "kernels per call of views_then_copies",
        explain="One copy kernel for contiguous(), one for flatten(); the five views launch nothing.",
        hint="Count only the calls that need a new buffer.",
    ),
    my_expression_copies=Exercise(
        "your expression copies",
        explain="Your result {shares} t's buffer; its profile {wrote}. A single stride per dimension over the "
        "same buffer is a view; anything else must copy.",
        hint="Can the result's elements be reached from t's buffer with one stride per dimension?",
    ),
)
check, hint, summary = EXERCISES.check, EXERCISES.hint, EXERCISES.summary
reveal, answered, evidence = EXERCISES.reveal, EXERCISES.answered, EXERCISES.evidence  # answers once right or asked for
assert_all_correct, reset = EXERCISES.assert_all_correct, EXERCISES.reset
