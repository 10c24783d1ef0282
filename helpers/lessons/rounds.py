"""Used by notebooks 03, 04, 07, 08, 10: repeated timings taken in turns, compared and shown the way the lessons'
checkers do (median, spread, tie)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from numbers import Number

import pandas as pd
import torch

from ..checks import bounded_int
from ..measure.timing import time_per_call

Measure = Callable[[], float | Mapping[str, float]]


# The one wording every lesson gives a learner when two timings cannot be told apart; the feedback's status
# already says why ("too close to call", ...), so the message does not repeat it.
TOO_CLOSE = "both answers are accepted, and this is why"
# A settled-by-nobody answer's status: TIE only for the spread rule (:func:`too_close`); BUSY when something else
# on the machine slowed the readings; UNDECIDED when the run holds nothing to decide with (one number, an
# unlabelled peak, no measurement).
TIE, BUSY, UNDECIDED = "too close to call", "too unsteady to tell", "cannot tell here"


@dataclass(frozen=True)
class Tie:
    """An expected value the measurement cannot settle: any answer of the right type is accepted, ``why`` shows the
    noise; ``status`` names the reason in the feedback (:data:`TIE`, :data:`BUSY` or :data:`UNDECIDED`)."""

    why: str
    kind: type = bool
    status: str = TIE

    def __post_init__(self) -> None:
        if self.status not in (TIE, BUSY, UNDECIDED):
            raise ValueError(f"a Tie's status is one of {TIE!r}, {BUSY!r}, {UNDECIDED!r}; got {self.status!r}")

    def message(self) -> str:
        """What the learner reads under the tie's status: :data:`TOO_CLOSE` (for a number or a text,
        any answer of that kind), then why (the medians and the spread that decided)."""
        what = {str: "text", int: "whole number", float: "number", Number: "number"}.get(self.kind, self.kind.__name__)
        accepted = TOO_CLOSE if self.kind is bool else f"any {what} is accepted, and this is why"
        return f"{accepted[0].upper()}{accepted[1:]}: {self.why}"


@dataclass(frozen=True)
class Spread:
    """The median of some rounds, their interquartile range (first to third quartile) and how many there were."""

    median: float
    q1: float
    q3: float
    rounds: int

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1


def spread_of(values: Sequence[float] | float) -> Spread:
    """The :class:`Spread` of a list of rounds; a plain number is a value taken as exact (a prediction, a model's
    figure): spread 0, and it counts as enough rounds."""
    if isinstance(values, Number) and not isinstance(values, bool):
        v = _finite("value", values, 1)
        return Spread(v, v, v, 3)
    rounds = [_finite("rounds", x, i + 1) for i, x in enumerate(values)]
    if not rounds:
        raise ValueError("no rounds measured")
    q1, q3 = _middle_half(rounds)
    return Spread(statistics.median(rounds), q1, q3, len(rounds))


def too_close(a: Sequence[float] | float | Spread, b: Sequence[float] | float | Spread) -> bool:
    """The course's one rule for "too close to call" between two timings: a tie when either side has fewer than 3
    rounds (its spread is unknown), or when the two medians differ by no more than the larger of the two
    interquartile ranges. Quartiles rather than min-max, because one round slowed by another program must not make
    everything a tie; the difference against the spread, because the difference is what a learner is graded on."""
    sa, sb = (x if isinstance(x, Spread) else spread_of(x) for x in (a, b))
    if sa.rounds < 3 or sb.rounds < 3:
        return True
    return abs(sa.median - sb.median) <= max(sa.iqr, sb.iqr)


def noise_why(a: Spread, b: Spread, unit: str = "us") -> str:
    """Why :func:`too_close` decided as it did, in the rule's own terms."""
    if a.rounds < 3 or b.rounds < 3:
        return f"{min(a.rounds, b.rounds)} round(s) give no spread, and a difference without its spread cannot be told from noise"  # fmt: skip
    diff, noise = abs(a.median - b.median), max(a.iqr, b.iqr)
    inside = "inside" if diff <= noise else "beyond"
    return f"the medians differ by {_num(diff)} {unit}, {inside} the larger middle-half spread of the rounds ({_num(noise)} {unit})"  # fmt: skip


def _num(x: float) -> str:  # whole units with separators, never 2.86e+03; one decimal under 10, two digits under 1
    return f"{x:,.0f}" if abs(x) >= 10 else f"{x:.1f}" if abs(x) >= 1 else f"{x:.2g}"


@dataclass(frozen=True)
class Verdict:
    """Whether ``a`` was faster than ``b`` over rounds, or a tie by :func:`too_close`."""

    a_median: float
    b_median: float
    a_range: tuple[float, float]
    b_range: tuple[float, float]
    rounds: tuple[int, int] = (3, 3)

    def _spreads(self) -> tuple[Spread, Spread]:
        return Spread(self.a_median, *self.a_range, self.rounds[0]), Spread(
            self.b_median, *self.b_range, self.rounds[1]
        )

    @property
    def tie(self) -> bool:
        return too_close(*self._spreads())

    def why(self, unit: str = "us") -> str:
        """The rule's reason for this verdict (see :func:`noise_why`)."""
        return noise_why(*self._spreads(), unit)

    @property
    def a_faster(self) -> bool | Tie:
        """True or False when the difference is beyond the spread; a :class:`Tie` saying why when it is not."""
        if self.tie:
            return Tie(f"{self.describe()}: {self.why()}")
        return self.a_median < self.b_median

    def describe(self, unit: str = "us") -> str:
        def one(m: float, r: tuple[float, float]) -> str:
            return f"{_num(m)} {unit} (middle half of the rounds {_num(r[0])} to {_num(r[1])})"

        return f"median {one(self.a_median, self.a_range)} against {one(self.b_median, self.b_range)}"


def take_turns(
    measures: Mapping[str, Measure], rounds: int, most: int = 100
) -> dict[str, list[float] | dict[str, list[float]]]:
    """Call each labelled measurement once per round, in turn, for `rounds` rounds (3 to `most`), so a slow spell of
    the machine hits all of them; per label the list of its results, or one list per key when it returns a dict of
    numbers. An error inside a measure propagates with a note naming its label and round."""
    if not isinstance(measures, Mapping) or not measures:
        raise TypeError(
            f"measures must be a non-empty dict {{label: function of no arguments returning a number or a dict of "
            f"numbers}}, got {measures!r}"
        )
    for label, measure in measures.items():
        if not callable(measure):
            raise TypeError(f"{label}: expected a function of no arguments, got {type(measure).__name__}")
    rounds = bounded_int("rounds", rounds, 3, most, "at least 3 rounds are needed to know the spread")
    out: dict[str, list[float] | dict[str, list[float]]] = {}
    for r in range(1, rounds + 1):
        for label, measure in measures.items():
            try:
                value = measure()
            except Exception as err:
                err.add_note(f"raised while measuring {label!r}, round {r} of {rounds}")
                raise
            _collect(out, label, value, r)
    return out


def _collect(out: dict, label: str, value: object, r: int) -> None:
    """Append one round's result of `label` to `out`, checking it has the shape of the rounds before."""
    if isinstance(value, Mapping):
        values = {str(k): _finite(f"{label}[{k!r}]", v, r) for k, v in value.items()}
        kept = out.setdefault(label, {k: [] for k in values})
        if not isinstance(kept, dict) or set(kept) != set(values):
            raise TypeError(f"{label}: round {r} returned {sorted(values)}, unlike its earlier rounds: a measure must return the same kind of result every round")  # fmt: skip
        for k, v in values.items():
            kept[k].append(v)
        return
    kept = out.setdefault(label, [])
    if not isinstance(kept, list):
        raise TypeError(f"{label}: round {r} returned a number, its earlier rounds a dict: a measure must return the same kind of result every round")  # fmt: skip
    kept.append(_finite(label, value, r))


def _finite(label: str, value: object, r: int) -> float:
    if isinstance(value, bool) or not isinstance(value, Number):
        raise TypeError(f"{label}: a measure must return a number (or a dict of numbers), got {type(value).__name__} in round {r}")  # fmt: skip
    if not math.isfinite(float(value)):
        raise ValueError(f"{label}: round {r} measured {value!r}, not a finite number")  # fmt: skip
    return float(value)


def compare_rounds(a: Sequence[float], b: Sequence[float]) -> Verdict:
    """Median and spread (first to third quartile) of two sets of repeated timings (at least 3 rounds each, finite),
    judged by :func:`too_close`."""
    for label, rounds in (("a", a), ("b", b)):
        values = list(rounds)
        if len(values) < 3:
            raise ValueError(f"{label}: need at least 3 rounds to know the spread, got {len(values)}")
        if not all(isinstance(v, Number) and math.isfinite(float(v)) for v in values):
            raise ValueError(f"{label}: every round must be a finite number, got {values!r}")
    fa, fb = [float(v) for v in a], [float(v) for v in b]
    return Verdict(statistics.median(fa), statistics.median(fb), _middle_half(fa), _middle_half(fb), (len(fa), len(fb)))


def _middle_half(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q3


def rounds_frame(rounds: Mapping[str, Sequence[float]], unit: str = "us", decimals: int = 0) -> pd.DataFrame:
    """One row per variant: the median, the middle half a check compares (first and third quartile), the fastest
    and slowest round, and how many rounds; times rounded to `decimals` (whole units by default: the rounds of a
    shared machine move by far more than one)."""
    rows = []
    for name, values in rounds.items():
        v = [float(x) for x in values]
        if not v:
            raise ValueError(f"{name}: no rounds measured")
        q1, q3 = _middle_half(v)
        times = {"median": statistics.median(v), "q1": q1, "q3": q3, "min": min(v), "max": max(v)}
        rows.append(
            {"variant": name, **{f"{k}_{unit}": round(t, decimals) for k, t in times.items()}, "rounds": len(v)}
        )
    return pd.DataFrame(rows)


@contextmanager
def one_thread() -> Iterator[None]:
    """Run the block with one torch CPU thread, then restore the count: on a machine shared with other work, a
    parallel region waits for whichever of its threads the OS descheduled, and every call takes a scheduler tick."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def call_rounds(
    fns: Mapping[str, Callable], *inputs, rounds: int = 5, repeats: int = 5, warmup: int = 1
) -> dict[str, list[float]]:
    """Microseconds per synchronised call of each function on `inputs`, `rounds` times, the functions taking turns
    (:func:`take_turns`)."""
    fns = named_functions(fns)
    return take_turns({name: partial(_us_per_call, fn, inputs, repeats, warmup) for name, fn in fns.items()}, rounds)


def _us_per_call(fn: Callable, inputs: tuple, repeats: int, warmup: int) -> float:
    return time_per_call(fn, *inputs, repeats=repeats, warmup=warmup) * 1e6


def named_functions(fns: object) -> Mapping[str, Callable]:
    """`fns` when it is a non-empty dict of label -> callable; TypeError otherwise (checked before any timing)."""
    if not isinstance(fns, Mapping) or len(fns) < 1:
        raise TypeError(f"fns must be a non-empty dict {{label: function or module}}, got {type(fns).__name__}")
    for name, fn in fns.items():
        if not callable(fn):
            raise TypeError(f"{name}: expected a function or module, got {type(fn).__name__}")
    return fns


def two_readings_note(
    what: str, a: float, a_where: str, b: float, b_where: str, tolerance: float = 0.2, unit: str = "us"
) -> str:
    """A note when two readings of one quantity in the notebook differ by more than `tolerance` (empty when they
    agree): the machine's load changed between them, read them as a range. Notebooks 08 and 10 use it."""
    a, b = _reading("a", a), _reading("b", b)
    if a <= 0 or b <= 0:
        raise ValueError(f"readings must be positive, got {a} and {b}")
    if max(a, b) / min(a, b) - 1 <= tolerance:
        return ""
    return (
        f" Two readings of {what} in this notebook disagree: {a:,.0f} {unit} {a_where} against {b:,.0f} {unit} {b_where} "
        f"({max(a, b) / min(a, b):.1f}x). The same step, unprofiled both times: the machine's load (GPU or CPU) "
        "changed between the two readings, a cause this notebook cannot check. Read the two as a range, not either "
        "as the step's time."
    )


def _reading(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)
