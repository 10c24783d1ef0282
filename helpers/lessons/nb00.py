"""Lesson 00, setup and a first trace: its exercises, their explanations and hints."""

from __future__ import annotations

from ..measure.profile import key_averages_frame  # noqa: F401  (used by the notebook as helpers.nb00.<name>)
from ..paths import LOCAL_TRACES_DIR, REPO_ROOT  # noqa: F401  (used by the notebook as helpers.nb00.<name>)
from ..trace.queries import launch_calls  # noqa: F401  (used by the notebook as helpers.nb00.<name>)
from .display import environment_report  # noqa: F401  (used by the notebook as helpers.nb00.<name>)
from .exercises import Exercise, Exercises

EXERCISES = Exercises(
    "00",
    linear_calls=Exercise(
        "calls of aten::linear",
        explain="Only the {active} active steps are kept: the wait step is not recorded, the {warmup} warm-up "
        "steps are recorded and then dropped.",
        hint="Read schedule(wait, warmup, active): which steps does the profiler keep?",
    ),
    biggest_child=Exercise(
        "biggest child of aten::linear",
        explain="aten::t only relabels the weight's strides (notebook 01); the matrix product runs in aten::addmm.",
        hint="Read the tree: which child does the arithmetic, and which only relabels?",
    ),
    gemm_launched_by=Exercise(
        "operator that launches the GEMM",
        explain="aten::linear only dispatches; aten::addmm calls the GEMM library, which queues the kernel. "
        "So aten::addmm's self device time is the kernel's time, and aten::linear's total includes it.",
        hint="Read the tree of section 3: which child of aten::linear computes?",
    ),
    my_busiest_op=Exercise(
        "your layer: the operator that does the arithmetic",
        explain="In your profile {measured} spent the most {where} per call. The others dispatch, reshape or "
        "relabel: read the tree below.",
        hint="Profile in your head: which operator of the tree would a BLAS library run?",
    ),
)
check, hint, summary = EXERCISES.check, EXERCISES.hint, EXERCISES.summary
assert_all_correct, reset = EXERCISES.assert_all_correct, EXERCISES.reset
