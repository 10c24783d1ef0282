"""Lesson 03, the GeGLU MLP, eager: its exercises, their explanations and hints."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from ..measure.roofline import elementwise_bytes, gemm_flops  # noqa: F401  (used by the notebook as helpers.nb03.<name>)
from ..mlp.model import CPU_SHAPE  # noqa: F401  (used by the notebook as helpers.nb03.<name>)
from ..trace.memory_view import memory_over_time_figure, peak_memory_by_op  # noqa: F401  (helpers.nb03.<name>)
from ..trace.queries import device_properties, mm_dims  # noqa: F401  (used by the notebook as helpers.nb03.<name>)
from .exercises import Exercise, Exercises
from .rounds import call_rounds, one_thread  # noqa: F401  (used by the notebook as helpers.nb03.<name>)

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
reveal, answered, evidence = EXERCISES.reveal, EXERCISES.answered, EXERCISES.evidence  # answers once right or asked for
assert_all_correct, reset = EXERCISES.assert_all_correct, EXERCISES.reset


def gelu_pace(copy_us: Sequence[float], gelu_us: Sequence[float], mul_us: Sequence[float]) -> str:
    """What sets the GeLU's pace on a CPU, from rounds of microseconds per call of a copy and a GeLU of the same
    tensor (both move 2 passes) and of a multiply (3 passes): the tanh's arithmetic when even the closest rounds
    put the GeLU over twice the copy, memory when it stays within 1.5 times, else no verdict. Three times equal to
    within 5% say the machine, not the work, set them."""
    rounds = {"copy": copy_us, "gelu": gelu_us, "mul": mul_us}
    for name, values in rounds.items():
        values = list(values)
        if len(values) < 3 or not all(math.isfinite(float(v)) and float(v) > 0 for v in values):
            raise ValueError(f"{name}: need at least 3 positive finite rounds, got {values!r}")
    med = {k: statistics.median(map(float, v)) for k, v in rounds.items()}
    if max(med.values()) <= 1.05 * min(med.values()):
        return (
            f"The three take the same time ({min(med.values()):,.0f} to {max(med.values()):,.0f} us) although they do "
            "different work: the machine (threads waiting for each other, the scheduler's tick) set these times, not "
            "memory or arithmetic, so they say nothing about what sets the GeLU's pace. "
        )
    lo = min(map(float, gelu_us)) / max(map(float, copy_us))
    hi = max(map(float, gelu_us)) / min(map(float, copy_us))
    ratio = med["gelu"] / med["copy"]
    if lo > 2:
        return (
            f"gelu moves the same bytes as the copy {ratio:.1f} times more slowly (at least {lo:.1f} times, its fastest round "
            "against the copy's slowest): on this CPU its cost is the arithmetic of the tanh, not memory. "
        )
    if hi < 1.5:
        return f"gelu keeps up with the copy here ({ratio:.1f} times its time): memory, not arithmetic, sets its pace. "
    return (
        f"gelu takes {ratio:.1f} times the copy's time ({lo:.1f} to {hi:.1f} over the rounds): between keeping up "
        "and being held back by its arithmetic, no verdict here. "
    )
