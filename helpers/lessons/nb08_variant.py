"""Lesson 08's transfer exercise graded as the lesson teaches it: a fix and the speedup predicted for it are one
answer, so a right speedup with a wrong fix (or the reverse) is wrong, and the feedback says which half."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import replace
from numbers import Number

import numpy as np

from .exercises import ACCEPTED, MISSING, RIGHT, UNDECIDED, WRONG, Exercises, Feedback, Tie

VARIANT_FIX = "last logits"
# the status lines of a pair graded wrong: the right fix with a wrong speedup, and a wrong fix (its speedup ungraded)
RIGHT_FIX_WRONG_SPEEDUP = "variant X: the right fix, with a wrong speedup"
SPEEDUP_WAITS_FOR_FIX = "variant X: the speedup, graded once the fix is right"


def accepted_ends(low: float, high: float) -> tuple[float, float]:
    """The accepted range's ends rounded inward to two decimals, so that both printed ends are accepted."""
    # a hair of slack: 1.1 x 1.46 is 1.6060000000000003, and its end must stay 1.60, not fall to 1.59
    return math.ceil(round(low * 100, 9)) / 100, math.floor(round(high * 100, 9)) / 100


def speedup_rounds(measured_speedup: float | Sequence[float]) -> list[float]:
    """The measured speedups as a list of positive numbers (a number, a list, an array or a Series of rounds)."""
    try:
        rounds = [float(v) for v in np.atleast_1d(np.asarray(measured_speedup, dtype=float))]
    except (TypeError, ValueError):
        rounds = []
    if not rounds or not all(math.isfinite(v) and v > 0 for v in rounds):
        raise ValueError(f"measured_speedup must be a positive number or a list of them, got {measured_speedup!r}")
    return rounds


def check_variant(
    book: Exercises,
    top: str,
    share: float,
    part: str | None,
    fix: str | None,
    speedup: float | None,
    measured_speedup: float | Sequence[float] | None,
    model_speedup: float | None = None,
) -> list[Feedback]:
    """The bottleneck `part` against `top`, then the fix and its predicted speedup as one answer: each half graded
    (the speedup within 10% of the rounds' median, inside their range widened by 10%, or within 1% of
    `model_speedup`, the taught model's value from the same trace), and the pair right only when both halves are.
    The model counts because a profiled step under load can share its time differently from the unprofiled one:
    the learner who applied the model is right, and the measurement beside it says whether the model held.
    No expected value is named after a wrong answer."""
    accept = None
    if measured_speedup is None:
        expected: object = Tie(
            "the fix was not measured here, so no speedup can be checked", kind=Number, status=UNDECIDED
        )
    else:
        rounds = speedup_rounds(measured_speedup)
        expected = round(statistics.median(rounds), 2)
        low, high = 0.9 * min(rounds), 1.1 * max(rounds)
        if isinstance(speedup, Number) and not isinstance(speedup, bool):  # else: "expected a number"
            # 1% of the model: the naive 1 + share sits a few % below it at the shares this lesson meets
            accept = lambda a: (
                low <= float(a) <= high
                or (  # noqa: E731
                    model_speedup is not None and math.isclose(float(a), model_speedup, rel_tol=0.01)
                )
            )
    part_fb = book.check("variant_part", part, top, details={"part": top, "share": share})
    fix_fb = book.check("variant_fix", fix, VARIANT_FIX)
    speedup_fb = book.check("variant_speedup", speedup, expected, accept=accept)
    if accept is not None and speedup_fb.status == RIGHT:  # the line, once the learner is right
        held = ""
        if model_speedup is not None:
            verdict = "held" if low <= model_speedup <= high else "missed: the profiled step shared its time otherwise"
            held = f"; the trace's model gives {model_speedup:.2f}, and it {verdict}"
        shown_low, shown_high = accepted_ends(low, high)
        speedup_fb = replace(
            speedup_fb, message=f"{speedup_fb.message} (accepted here: {shown_low:.2f} to {shown_high:.2f}{held})"
        )
    fix_ok, speedup_ok = fix_fb.status == RIGHT, speedup_fb.status in ACCEPTED
    if fix_fb.status == MISSING and speedup_fb.status != MISSING:  # a speedup alone would be graded on its own
        speedup_fb = Feedback(SPEEDUP_WAITS_FOR_FIX, MISSING, "Your fix and its speedup are one answer: write the "
                              "fix too; the speedup is graded with it.")  # fmt: skip
    if MISSING in (fix_fb.status, speedup_fb.status) or (fix_ok and speedup_ok):
        return [part_fb, fix_fb, book.record("variant_speedup", speedup_fb)]
    if fix_ok:  # the right fix with a wrong speedup: the pair is wrong, and the speedup is the half to redo
        half = "the speedup half is wrong: the fix is the right one, the speedup you predicted for it is not."
        # the status line names the pair, so that "wrong" beside it does not read as a verdict on the fix alone
        fix_fb = replace(
            fix_fb,
            name=RIGHT_FIX_WRONG_SPEEDUP,
            status=WRONG,
            message=f"Your fix and its speedup are one answer, and {half}",
        )
        speedup_fb = replace(speedup_fb, message=f"{speedup_fb.message} ({half})")
    else:  # a wrong fix: its speedup is not graded, and reads the same whatever its value (else it would tell)
        speedup_fb = Feedback(
            SPEEDUP_WAITS_FOR_FIX,
            WRONG,
            "Your fix and its speedup are one answer, and the fix is not the one measured: the speedup is graded "
            "with its fix, once the fix is right.",
        )
    book.record("variant_fix", replace(fix_fb, answer=fix, expected=VARIANT_FIX))
    return [part_fb, fix_fb, book.record("variant_speedup", replace(speedup_fb, answer=speedup, expected=expected))]
