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
reveal, answered, evidence = EXERCISES.reveal, EXERCISES.answered, EXERCISES.evidence  # answers once right or asked for
assert_all_correct, reset = EXERCISES.assert_all_correct, EXERCISES.reset


# One rule for "stands out", stated in both branches of the sentence so they cannot contradict each other.
STANDS_OUT_RATIO = 2.0
# A profiled and an unprofiled time of one run within this share of the larger are read as level.
NOISE_SHARE = 0.10


def slowest_call_sentence(op: str, calls: int, median_us: float, max_us: float, worst_share: float) -> str:
    """What the slowest of `calls` calls says about the total: a call over ``STANDS_OUT_RATIO`` times the median
    stands out and weighs on the sum and the average, so read the median. Names no cause: a first-step cost and a
    paused process look the same here."""
    if not isinstance(op, str) or not op:
        raise TypeError(f"op must be an operator's name, got {op!r}")
    if not isinstance(calls, int) or isinstance(calls, bool) or calls < 1:
        raise ValueError(f"calls must be a positive int, got {calls!r}")
    if not (median_us > 0 and max_us >= median_us and 0 <= worst_share <= 1):
        raise ValueError(
            f"need 0 < median_us <= max_us and a share in [0, 1], got {median_us}, {max_us}, {worst_share}"
        )
    ratio = max_us / median_us
    head = (
        f"In this run the slowest of the {calls} calls of `{op}` took {max_us:,.1f} us, {ratio:.1f} times the median call "
        f"({median_us:,.1f} us), and holds {worst_share:.0%} of the total. "
    )
    if ratio > STANDS_OUT_RATIO:
        return head + (
            f"More than {STANDS_OUT_RATIO:.0f} times the median, that call stands out: it weighs on the total and the "
            "average above far more than on the median, so read the median. (This table cannot say why it was slow: "
            "a first call's one-time work and a pause look the same.)"
        )
    return head + (
        f"No call stands out: none took more than {STANDS_OUT_RATIO:.0f} times the median this time, so total, average "
        "and median tell the same story. On a machine that does not run steadily (other work, or its clocks) they do not; the median does not move."
    )


def profiler_cost_sentence(unprofiled_us: float, profiled_us: float, share: float = NOISE_SHARE) -> str:
    """What one call's host time with and without the profiler says: the profiler's cost when the profiled call is
    longer beyond ``share`` of the larger, level within it, and a machine too unsteady to tell when it is shorter."""
    if not (unprofiled_us > 0 and profiled_us > 0):
        raise ValueError(f"need two positive times, got {unprofiled_us!r} and {profiled_us!r}")
    if not 0 <= share < 1:
        raise ValueError(f"share must be in [0, 1), got {share!r}")
    diff, noise = profiled_us - unprofiled_us, share * max(profiled_us, unprofiled_us)
    if diff > noise:
        return f"The profiler adds about {diff:,.1f} us per call ({profiled_us / unprofiled_us:.1f}x)."
    if diff < -noise:
        return (
            f"Under the profiler it came out faster ({-diff:,.1f} us less): the profiler only adds work, so something "
            "else on the machine (other work, or its clocks) slowed the unprofiled calls. The machine ran too "
            "unsteadily to measure the profiler's cost here."
        )
    return (
        f"The two are within {share:.0%} of each other: the profiler's cost per call is inside this run's noise here."
    )
