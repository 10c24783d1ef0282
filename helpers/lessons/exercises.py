"""Used by notebooks 00-06: self-checking exercises; the learner answers, a checker compares with the measurement.

In a notebook::

    answer = 5                      # cell tagged "solution": learner copies get `answer = None`
    helpers.check("kernels per forward", answer, expected=measured_count,
                  explain="3 GEMMs + GeLU + mul")

`check` never raises on a wrong or missing answer: it returns a :class:`Feedback` that renders as a
coloured box (right / wrong and why / not answered yet). Every check of the session is remembered;
the full notebook ends with ``assert_all_correct()`` (a solution cell), the learner copy with
``summary()``.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from numbers import Number
from typing import Any

import pandas as pd

RIGHT, WRONG, MISSING = "right", "wrong", "not answered yet"
_COLORS = {RIGHT: "#d4edda", WRONG: "#f8d7da", MISSING: "#fff3cd"}
_SESSION: dict[str, Feedback] = {}


@dataclass(frozen=True)
class Feedback:
    """The result of one check. Renders as HTML in Jupyter and as text elsewhere."""

    name: str
    status: str
    message: str
    answer: Any = None
    expected: Any = None

    @property
    def ok(self) -> bool:
        return self.status == RIGHT

    def __repr__(self) -> str:
        return f"[{self.status}] {self.name}: {self.message}"

    def _repr_html_(self) -> str:
        return (
            f'<div class="course-feedback" data-status="{self.status}" style="background:{_COLORS[self.status]};'
            f'padding:8px 12px;border-radius:6px;margin:4px 0"><b>{html.escape(self.name)}: {self.status}</b>'
            f"<br>{html.escape(self.message)}</div>"
        )


def _is_missing(answer: Any) -> bool:
    return answer is None or answer is Ellipsis


def _same(answer: Any, expected: Any, rel_tol: float) -> tuple[bool, str]:
    """Compare an answer with the expected value; returns (equal, reason when not)."""
    if isinstance(expected, bool):
        if not isinstance(answer, bool):
            return False, f"expected True or False, got {answer!r}"
        return answer == expected, ""
    if isinstance(expected, Number):
        if isinstance(answer, bool) or not isinstance(answer, Number):
            return False, f"expected a number, got {type(answer).__name__} {answer!r}"
        if rel_tol == 0:
            return answer == expected, ""
        return math.isclose(float(answer), float(expected), rel_tol=rel_tol, abs_tol=1e-12), ""
    if isinstance(expected, (set, frozenset)):
        if not isinstance(answer, (set, frozenset, list, tuple)):
            return False, f"expected a collection such as a set, got {type(answer).__name__}"
        got = set(answer)
        if got == set(expected):
            return True, ""
        missing, extra = set(expected) - got, got - set(expected)
        parts = []
        if missing:
            parts.append(f"{len(missing)} missing")
        if extra:
            parts.append(f"unexpected: {sorted(map(str, extra))}")
        return False, "; ".join(parts)
    if isinstance(expected, (tuple, list)):
        if not isinstance(answer, (tuple, list)):
            return False, f"expected a tuple or list, got {type(answer).__name__} {answer!r}"
        return tuple(answer) == tuple(expected), ""
    if isinstance(expected, str):
        if not isinstance(answer, str):
            return False, f"expected text, got {type(answer).__name__} {answer!r}"
        return answer.strip().lower() == expected.strip().lower(), ""
    return answer == expected, ""


def check(name: str, answer: Any, expected: Any, explain: str = "", rel_tol: float = 0.0, hint: str = "") -> Feedback:
    """Compare the learner's `answer` with the measured `expected` value and return feedback.

    - `expected` comes from the profile, never from a constant, so the check stays true on
      another GPU or torch version.
    - `rel_tol`: relative tolerance for numbers (e.g. 0.1 for "within 10%").
    - `explain`: why the expected value is what it is (shown when the answer is wrong).
    - `hint`: shown while the exercise is not answered yet.
    """
    if not isinstance(name, str) or not name:
        raise TypeError("check() needs a short exercise name as its first argument")
    if not isinstance(rel_tol, (int, float)) or rel_tol < 0:
        raise ValueError(f"rel_tol must be a number >= 0, got {rel_tol!r}")
    if _is_missing(answer):
        fb = Feedback(
            name,
            MISSING,
            "write your answer in the cell above, run it, then run this cell again."
            + (f" Hint: {hint}" if hint else ""),
            answer,
            expected,
        )
    else:
        equal, reason = _same(answer, expected, rel_tol)
        if equal:
            fb = Feedback(name, RIGHT, f"the profile agrees: {expected!r}. {explain}".strip(), answer, expected)
        else:
            tol = f" (within {rel_tol:.0%})" if rel_tol else ""
            why = f"{reason}. " if reason else ""
            fb = Feedback(
                name,
                WRONG,
                f"you said {answer!r}; the profile measured {expected!r}{tol}. {why}{explain}".strip(),
                answer,
                expected,
            )
    _SESSION[name] = fb
    return fb


def summary() -> pd.DataFrame:
    """Every check run in this session: name, status, message."""
    return pd.DataFrame(
        [{"exercise": f.name, "status": f.status, "message": f.message} for f in _SESSION.values()],
        columns=["exercise", "status", "message"],
    )


def assert_all_correct() -> pd.DataFrame:
    """Raise AssertionError unless every check of this session was answered correctly (used by full notebooks)."""
    table = summary()
    if table.empty:
        raise AssertionError("no exercise was checked in this notebook")
    bad = table[table["status"] != RIGHT]
    if not bad.empty:
        raise AssertionError("exercises not right:\n" + bad.to_string(index=False))
    return table


def reset() -> None:
    """Forget the checks run so far (each notebook starts afresh)."""
    _SESSION.clear()
