"""Lesson 07: what the wall-clock race of the learner's attention kernel against the course's may say."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from .rounds import compare_rounds

__all__ = ["KERNEL_RACE_MARGIN", "kernel_race_note"]

# One profile of each kernel has no spread: kernel times closer than this are not read as a difference.
KERNEL_RACE_MARGIN = 0.05


def kernel_race_note(
    rounds: Mapping[str, Sequence[float]],
    yours: str,
    course: str,
    device: str,
    kernel_us: Mapping[str, float] | None = None,
) -> str:
    """What the wall-clock race of the learner's kernel against the course's says when the plain kernel wins by more
    than the rounds' spread (empty otherwise). A cause is named only from `kernel_us` (one profile of each, us per
    call): a shorter kernel points at the kernels and their tiles, equal ones at the launchers' host work."""
    for name in (yours, course):
        if name not in rounds:
            raise ValueError(f"no rounds for {name!r}; have {', '.join(rounds)}")
    if kernel_us is not None:
        missing = [n for n in (yours, course) if n not in kernel_us]
        if missing:
            raise ValueError(f"no kernel time for {', '.join(map(repr, missing))}; have {', '.join(kernel_us)}")
        for n in (yours, course):
            v = kernel_us[n]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"kernel_us[{n!r}] must be a positive finite time in us, got {v!r}")
    v = compare_rounds(rounds[yours], rounds[course])
    if v.tie or not v.a_faster:
        return ""
    head = (
        f"On the clock, which includes each launcher's host work, your kernel, one fixed 64 x 64 tile, beat the "
        f"course's by {v.b_median / v.a_median:.2f}x on {device}."
    )
    if kernel_us is None:
        return head + (
            " Wall times alone do not say whether the kernels or the launchers make that difference: profile both "
            "once (kernel time, as section 3 does) before naming a cause."
        )
    ky, kc = float(kernel_us[yours]), float(kernel_us[course])
    # each time named by its kernel, so the order of the two numbers cannot be misread
    kernels = f"the course's {kc:.0f} us against your {ky:.0f} us in one profile of each"
    if kc > ky * (1 + KERNEL_RACE_MARGIN):
        return head + (
            f" In kernel time too ({kernels}: your kernel is {kc / ky:.2f}x faster), so the kernels differ, not only "
            "their launchers. One candidate: the course's launcher tries first the tiles a sweep found fastest on an "
            "H200 (the table below), and what is fastest on one GPU need not be on another. Tile sizes, warps and "
            "stages are tuned per GPU and per length: time them on the GPU you run on."
        )
    lead = (
        f"the course's is the faster ({kernels}: the course's kernel is {ky / kc:.2f}x faster)"
        if ky > kc * (1 + KERNEL_RACE_MARGIN)
        else f"the two are about equal ({kernels})"
    )
    return head + (
        f" In kernel time {lead}, so the difference on the clock is the launchers' host work, not the kernels or "
        "their tiles."
    )
