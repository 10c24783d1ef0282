"""Lesson 03, the GeGLU MLP, eager: its exercises, their explanations and hints."""

from __future__ import annotations

from ..measure.roofline import elementwise_bytes, gemm_flops  # noqa: F401  (used by the notebook as helpers.nb03.<name>)
from ..mlp.model import CPU_SHAPE  # noqa: F401  (used by the notebook as helpers.nb03.<name>)
from ..trace.memory_view import memory_over_time_figure, peak_memory_by_op  # noqa: F401  (helpers.nb03.<name>)
from ..trace.queries import device_properties, mm_dims  # noqa: F401  (used by the notebook as helpers.nb03.<name>)
from .exercises import Exercise, Exercises

EXERCISES = Exercises(
    "03",
    kernels_per_forward=Exercise(
        "compute kernels per forward",
        explain="Three GEMMs (gate, up, down), one GeLU, one multiply.",
        hint="Count the matrix products and the pointwise operations in forward().",
    ),
    device_events_per_forward=Exercise(
        "device events per forward (H200)",
        explain="Five compute kernels plus two `Memset (Device)`, each issued inside aten::mm by cuBLAS just "
        "before a GEMM.",
        hint="Libraries under our operators may put work of their own on the GPU.",
    ),
    distinct_tiles=Exercise(
        "distinct GEMM tiles per forward (H200)",
        explain="Gate and up share a shape and a kernel; down has a 4x narrower output and gets another tile.",
        hint="Same shape, same choice: how many shapes are there?",
    ),
    intermediate_mb=Exercise(
        "MB of one [tokens, hidden] tensor",
        explain="{numel:,} elements x {itemsize} bytes ({dtype}), from the recorded input shape of aten::gelu.",
        hint="tokens x hidden elements, times the bytes of one element of the recorded dtype.",
        rel_tol=0.05,
    ),
    pointwise_mb=Exercise(
        "MB moved by gelu + mul (eager)",
        explain="gelu: 1 read + 1 write; mul: 2 reads + 1 write: five passes over one intermediate tensor. "
        "A fused kernel (notebook 04) needs three: read gate and up, write the product.",
        hint="Count tensor reads and writes, then multiply by one tensor's size.",
        rel_tol=0.05,
    ),
    my_pointwise_mb=Exercise(
        "MB moved by gelu + mul at your shape",
        explain="aten::gelu's recorded input is {shape} {dtype}: {mb:.3f} MB; gelu moves it twice, mul three "
        "times. dim does not appear: it sizes the GEMMs, not the intermediate.",
        hint="tokens = batch x seq; one intermediate is tokens x hidden x bytes per element.",
        rel_tol=0.05,
    ),
)
check, hint, summary = EXERCISES.check, EXERCISES.hint, EXERCISES.summary
assert_all_correct, reset = EXERCISES.assert_all_correct, EXERCISES.reset
