"""Lesson 10's notes on readings that a shared machine moves: a step or a saving read twice in the notebook, a
profiler ratio that cannot be the profiler's cost, and pieces of the critical path far longer than their call's
usual duration. Plain numbers in, text out; the notebook reaches these through :mod:`helpers.lessons.nb10`."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping

import pandas as pd

from .rounds import two_readings_note

# Two readings of one quantity further apart than this share are noted (the machine was shared).
READINGS_TOLERANCE = 0.2
# A piece of the critical path this many times its call's median duration is an outlier, not the call's cost...
OUTLIER_FACTOR = 10.0
# ... when the call's outlier pieces together hold at least this share of the path (smaller ones change no reading).
OUTLIER_MIN_PCT = 2.0

RATIO_UNUSABLE = (
    "A `profiler_ratio` above 1 (the unprofiled step slower than the profiled one) cannot be the profiler's cost, "
    "which only adds time: something else on the machine slowed the unprofiled rounds, so that row's bound is not "
    "scaled (`scaled_us` left empty, its verdict not counted)."
)


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def later_reading_note(what: str, earlier: Mapping[str, float], later: float, later_where: str, unit: str = "us") -> str:  # fmt: skip
    """A note when a later unprofiled reading of a step differs by more than ``READINGS_TOLERANCE`` from one of
    the `earlier` readings (``{where: value}``), naming the one furthest from it; empty when all agree."""
    if not isinstance(earlier, Mapping) or not earlier:
        raise ValueError("earlier must be a non-empty dict {where it was read: value}")
    later = _number("later", later)
    values = {str(w): _number(f"earlier[{w!r}]", v) for w, v in earlier.items()}
    if later <= 0 or min(values.values()) <= 0:
        raise ValueError("step readings must be positive")
    where = max(values, key=lambda w: max(values[w], later) / min(values[w], later))
    return two_readings_note(what, values[where], where, later, later_where, READINGS_TOLERANCE, unit)


def two_savings_note(what: str, a: float, a_where: str, b: float, b_where: str) -> str:
    """A note when two measurements of one fix's saving (us per step, either sign) differ by more than
    ``READINGS_TOLERANCE`` of the larger of them; empty when they agree."""
    a, b = _number("a", a), _number("b", b)
    largest = max(abs(a), abs(b))
    if largest == 0 or abs(a - b) <= READINGS_TOLERANCE * largest:
        return ""
    sign = " (not even of one sign)" if a * b < 0 else ""
    return (
        f" Two measurements of {what} in this notebook disagree{sign}: {a:,.0f} us {a_where} against {b:,.0f} us "
        f"{b_where}. The same fix, unprofiled both times: the machine's load changed between the two, a cause this "
        "notebook cannot check. Read the two as a range, not either as the fix's saving."
    )


def scaled_bound(bound_us: float, ratio: float) -> float:
    """The bound scaled by the step's unprofiled/profiled `ratio`; NaN when the ratio is above 1, which the
    profiler (it only adds time) cannot cause (see ``RATIO_UNUSABLE``)."""
    bound, ratio = _number("bound_us", bound_us), _number("ratio", ratio)
    if ratio <= 0:
        raise ValueError(f"ratio must be positive (unprofiled over profiled), got {ratio!r}")
    return math.nan if ratio > 1 else bound * ratio


def call_medians(events: pd.DataFrame, names: object) -> dict[str, float]:
    """The median duration (us) of every event of each of `names` in a trace's events table (``name``, ``dur``)."""
    if not isinstance(events, pd.DataFrame) or not {"name", "dur"} <= set(events.columns):
        raise TypeError("events must be a trace's events table, with name and dur columns")
    wanted = events[events["name"].isin(set(names))]
    return {str(k): float(v) for k, v in wanted.groupby("name")["dur"].median().items()}


def outlier_pieces_text(path: pd.DataFrame, medians: Mapping[str, float], length_us: float) -> str:
    """A sentence on the calls whose pieces on the critical path are ``OUTLIER_FACTOR`` times that call's median
    duration in the trace (`medians`, :func:`call_medians`) and together hold ``OUTLIER_MIN_PCT`` % of the path or
    more: one-off delays (a first call loading code, another process), not what the call costs. Empty when none."""
    if not isinstance(path, pd.DataFrame) or not {"name", "duration_us"} <= set(path.columns):
        raise TypeError("path must be a critical path table, with name and duration_us columns")
    length = _number("length_us", length_us)
    if length <= 0:
        raise ValueError(f"length_us must be positive, got {length_us!r}")
    said = []
    for name, pieces in path.groupby("name", sort=False)["duration_us"]:
        typical = medians.get(str(name))
        if typical is None or typical <= 0:
            continue
        far = pieces[pieces > OUTLIER_FACTOR * typical]
        pct = 100 * float(far.sum()) / length
        if len(far) and pct >= OUTLIER_MIN_PCT:
            said.append((pct, name, len(far), float(far.sum()), float(statistics.median(far)), typical))
    if not said:
        return ""
    parts = [
        f"`{n}`: {k} piece{'s' if k > 1 else ''} of {total:,.0f} us together ({pct:.0f} % of the path, "
        f"{each:,.0f} us each at the median) where that call's median in this trace is {typical:,.1f} us"
        for pct, n, k, total, each, typical in sorted(said, reverse=True)
    ]
    return (
        " Outliers on the path: "
        + "; ".join(parts)
        + f" (over {OUTLIER_FACTOR:.0f}x). Pieces that long are one-off delays (a first call loading code, another "
        "process holding the CPU or GPU), not the call's usual cost: this step's path would be that much shorter "
        "without them, and no fix to the model removes them."
    )
