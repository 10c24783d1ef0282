"""Used by notebooks 00-09: self-checking exercises. Explanations and hints live in each lesson's
:class:`Exercises` book, not in the notebook; a check never raises on a wrong answer, it returns feedback."""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from numbers import Number
from typing import Any

import pandas as pd

from .rounds import BUSY, TIE, TOO_CLOSE, UNDECIDED, Tie, Verdict, compare_rounds, too_close  # noqa: F401  (lessons import them from here too)
from .wording import sentence_start as _sentence

RIGHT, WRONG, MISSING = "right", "wrong", "not answered yet"
HINT = "hint"  # a hint asked for: no verdict, so it never reads "not answered yet" beside an answer
ACCEPTED = (RIGHT, TIE, BUSY, UNDECIDED)  # the statuses that count an answer as right
_COLORS = {RIGHT: "#d4edda", WRONG: "#f8d7da", MISSING: "#fff3cd", HINT: "#e2e3e5"}
_COLORS.update(dict.fromkeys((TIE, BUSY, UNDECIDED), "#d1ecf1"))


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
        """True when the answer counts as right (a tie accepts every answer)."""
        return self.status in ACCEPTED

    def __repr__(self) -> str:
        return f"[{self.status}] {self.name}: {self.message}"

    def _repr_html_(self) -> str:
        return (
            f'<div class="course-feedback" data-status="{self.status}" style="background:{_COLORS[self.status]};'
            f'padding:8px 12px;border-radius:6px;margin:4px 0"><b>{html.escape(self.name)}: {self.status}</b>'
            f"<br>{html.escape(self.message)}</div>"
        )


@dataclass(frozen=True)
class Exercise:
    """One question: title, why the answer is what it is (``{name}`` fields filled from a check's ``details``),
    a hint, and whether the expected value is measured, computed or a reference. A ``guess`` is asked before the
    evidence and graded against this run's measurement, which an unsteady machine (other work, or its clocks) can change: a full lesson's
    :meth:`Exercises.assert_all_correct` needs it answered, not right."""

    title: str
    explain: str = ""
    hint: str = ""
    rel_tol: float = 0.0
    source: str = "measured"
    guess: bool = False
    # how a right answer's expected value is written (e.g. bytes as MB); None: :func:`_show`
    show: Callable[[Any], str] | None = None

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"source must be one of {list(SOURCES)}, got {self.source!r}")
        if self.show is not None and not callable(self.show):
            raise TypeError(f"show must be a function of the expected value, got {self.show!r}")


# source of an expected value -> (who agrees when right, what a wrong answer misses; never its value)
SOURCES = {
    "measured": ("the measurement agrees", "the measurement"),
    "computed": ("the computation agrees", "the computed value"),
    "reference": ("the reference agrees", "the reference"),
}


def _is_missing(answer: Any) -> bool:
    return answer is None or answer is Ellipsis


def _normal_text(value: str) -> str:
    return " ".join(value.strip().lower().replace("_", " ").replace("-", " ").split())


def _number(value: Any) -> float | None:
    """A plain float from an int, float or 0-d tensor/array; None for anything else (and for bools)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, Number):
        return float(value)
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", None) == 0:
        try:
            out = item()
        except Exception:  # noqa: BLE001  (any failure means: not a number)
            return None
        return None if isinstance(out, bool) else float(out) if isinstance(out, Number) else None
    return None


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _show(value: Any) -> str:
    """A value as a learner reads it (no numpy or torch reprs)."""
    number = _number(value)
    if number is not None:
        # thousands separators: a byte count of nine digits is unreadable without them
        return f"{number:.4g}" if not float(number).is_integer() else f"{int(number):,}"
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(map(str, value))) + "}"
    return repr(value)


def _same(answer: Any, expected: Any, rel_tol: float) -> tuple[bool, str]:
    """Compare an answer with the expected value; returns (equal, reason when not)."""
    if isinstance(expected, bool):
        if not isinstance(answer, bool):
            return False, f"expected True or False, got {type(answer).__name__}"
        return answer == expected, ""
    if _number(expected) is not None:
        got = _number(answer)
        if got is None:
            return False, f"expected a number, got {type(answer).__name__}"
        if not math.isfinite(got):
            return False, "expected a finite number"
        want = float(_number(expected))  # type: ignore[arg-type]
        if rel_tol == 0:
            return got == want, ""
        return math.isclose(got, want, rel_tol=rel_tol, abs_tol=1e-12), ""
    if isinstance(expected, (set, frozenset)):
        if isinstance(answer, str) or not isinstance(answer, (set, frozenset, list, tuple)):
            return False, f"expected a collection such as a set, got {type(answer).__name__}"
        if not all(isinstance(a, str) for a in answer) and all(isinstance(e, str) for e in expected):
            return False, "expected text items"
        norm = _normal_text if all(isinstance(e, str) for e in expected) else (lambda x: x)
        try:
            got, want = {norm(a) for a in answer}, {norm(e) for e in expected}
        except TypeError:  # an item that cannot be in a set (a list, an array): not an answer of this kind
            bad = next((a for a in answer if not _hashable(a)), None)
            return False, f"expected items such as text or numbers, got a {type(bad).__name__} among them"
        if got == want:
            return True, ""
        # counted, not named: naming which items are wrong would tell which are right, half the answer
        parts = []
        if got - want:
            parts.append(f"{len(got - want)} of your items {'is' if len(got - want) == 1 else 'are'} not in the answer")
        if want - got:
            parts.append(f"{len(want - got)} missing")
        return False, "; ".join(parts)
    if isinstance(expected, (tuple, list)):
        if not isinstance(answer, (tuple, list)) or len(answer) != len(expected):
            return False, f"expected a sequence of {len(expected)} items"
        pairs = [_same(a, e, rel_tol) for a, e in zip(answer, expected)]
        return all(ok for ok, _ in pairs), next((why for ok, why in pairs if not ok and why), "")
    if isinstance(expected, str):
        if not isinstance(answer, str):
            return False, f"expected text, got {type(answer).__name__}"
        return _normal_text(answer) == _normal_text(expected), ""
    try:
        return bool(answer == expected), ""
    except Exception:  # noqa: BLE001  (an answer whose == raises, e.g. a tensor in a tuple)
        return False, f"could not compare a {type(answer).__name__} with the expected {type(expected).__name__}"


@dataclass(frozen=True)
class _Hidden:
    """Stands where a check cell's evidence would be until the learner's answer is right or revealed."""

    reveal_calls: tuple[str, ...]

    def _text(self, code: str) -> str:
        # every answer still missing is named, so one reveal per name is enough to see the cell
        answers = "your answer is" if len(self.reveal_calls) == 1 else "your answers are"
        calls = " and ".join(f"{code}{c}{code}" for c in self.reveal_calls)
        return f"The measurement behind this check shows here once {answers} right, or after {calls}; then run this cell again."

    def __repr__(self) -> str:
        return f"({self._text('')})"

    def _repr_markdown_(self) -> str:
        return f"*{self._text('`')}*"


@dataclass
class Exercises:
    """The exercises of one lesson, keyed by a short name; remembers every check of the session."""

    lesson: str
    book: dict[str, Exercise] = field(default_factory=dict)
    results: dict[str, Feedback] = field(default_factory=dict)

    def __init__(self, lesson: str, **exercises: Exercise) -> None:
        self.lesson = lesson
        self.book = dict(exercises)
        self.results = {}
        self.revealed: set[str] = set()

    def _exercise(self, key: str) -> Exercise:
        if key not in self.book:
            raise KeyError(f"lesson {self.lesson} has no exercise {key!r}; its exercises: {', '.join(self.book)}")
        return self.book[key]

    def check(
        self,
        key: str,
        answer: Any,
        expected: Any,
        *,
        rel_tol: float | None = None,
        details: dict[str, Any] | None = None,
        accept: Callable[[Any], bool] | None = None,
    ) -> Feedback:
        """Compare ``answer`` with the measured ``expected`` (a :class:`Tie` accepts any answer of its type) and return
        feedback. ``accept`` replaces the comparison, for answers measured in noisy rounds (a range is right)."""
        ex = self._exercise(key)
        tol = ex.rel_tol if rel_tol is None else rel_tol
        if not isinstance(tol, (int, float)) or tol < 0:
            raise ValueError(f"rel_tol must be a number >= 0, got {tol!r}")
        try:
            explain = ex.explain.format(**(details or {}))
        except (KeyError, IndexError, ValueError) as err:
            raise ValueError(f"exercise {key!r}: its explanation needs details {err}") from err
        if _is_missing(answer):
            fb = Feedback(
                ex.title,
                MISSING,
                "write your answer in the cell above, run it, then run this cell again"
                + (f" (stuck? run `nb{self.lesson}.hint({key!r})`)." if ex.hint else "."),
                answer,
                expected,
            )
        elif isinstance(expected, Tie):
            if isinstance(answer, expected.kind):
                fb = Feedback(ex.title, expected.status, f"{expected.message()}. {_sentence(explain)}".strip())
            else:
                fb = Feedback(ex.title, WRONG, f"expected a {expected.kind.__name__}, got {type(answer).__name__}")
        else:
            equal, reason = (bool(accept(answer)), "") if accept is not None else _same(answer, expected, tol)
            if equal:
                shown = (ex.show or _show)(expected)
                fb = Feedback(ex.title, RIGHT, f"{SOURCES[ex.source][0]}: {shown}. {_sentence(explain)}".strip())
            else:
                within = f" (within {tol:.0%})" if tol else ""
                why = f" ({reason})" if reason else ""
                hint = f" Hint: {ex.hint}" if ex.hint else ""
                target = SOURCES[ex.source][1]
                if reason.startswith("expected"):  # the wrong kind of value: say so, not that the idea is wrong
                    message = f"you said {_show(answer)}: {reason}. Write the answer as that kind of value.{hint}"
                else:
                    message = (
                        f"you said {_show(answer)}{why}; that does not match {target}{within}. Think again and "
                        f"re-run this cell, or run `nb{self.lesson}.reveal({key!r})` to see the answer.{hint}"
                    )
                fb = Feedback(ex.title, WRONG, message)
        self.results[key] = Feedback(fb.name, fb.status, fb.message, answer, expected)
        return self.results[key]

    def record(self, key: str, feedback: Feedback) -> Feedback:
        """Remember a feedback made by a lesson's own checker (a kernel test, say) under ``key``."""
        self._exercise(key)
        self.results[key] = feedback
        return feedback

    def report(self, key: str, status: str, message: str, answer: Any = None, expected: Any = None) -> Feedback:
        """A lesson's own checker's verdict, recorded: the hint added after a wrong answer, the way to it when missing."""
        ex = self._exercise(key)
        if status == MISSING:
            message += f" (stuck? run `nb{self.lesson}.hint({key!r})`)"
        elif status == WRONG:
            message += f" Hint: {ex.hint}"
        return self.record(key, Feedback(ex.title, status, message, answer, expected))

    def hint(self, key: str) -> Feedback:
        """The hint of one exercise, on request: a hint, not a verdict (the exercise keeps the status it earned)."""
        ex = self._exercise(key)
        return Feedback(ex.title, HINT, f"Hint: {ex.hint or 'none for this one: read the cells above again.'}")

    def reveal(self, key: str) -> Feedback:
        """The answer of one exercise, on request (after at least one check): from then on :meth:`answered` is True
        and the cells that show the answer show it. The exercise's status stays what the learner's answer earned."""
        ex = self._exercise(key)
        fb = self.results.get(key)
        if fb is None or fb.status == MISSING:
            return Feedback(ex.title, MISSING, "write your answer and run its check first; then ask for the answer")
        self.revealed.add(key)
        return Feedback(ex.title, fb.status, f"the answer: {_show(fb.expected)}.", fb.answer, fb.expected)

    def answered(self, key: str) -> bool:
        """Whether the answer of `key` may be shown: the learner's last check was right (or accepted as a tie), or
        they asked for it with :meth:`reveal`. Until then a wrong try gets hints only."""
        self._exercise(key)
        fb = self.results.get(key)
        return key in self.revealed or (fb is not None and fb.ok)

    def evidence(self, key: str | tuple[str, ...], *shown: Any) -> Any:
        """What a check cell shows under its verdict (the measurement, a table, a figure): shown once
        :meth:`answered` is True, else one line saying how to see it, so a wrong try is not followed by the answer.
        A tuple of keys gates on all of them, its line naming each one not answered yet.
        With several objects all but the last are displayed here and the last is returned for the cell to show."""
        keys = (key,) if isinstance(key, str) else tuple(key)
        if not shown or not keys:
            raise TypeError(f"evidence({key!r}, ...) needs the object(s) the cell shows after the check, and a key")
        missing = [k for k in keys if not self.answered(k)]
        if missing:
            return _Hidden(tuple(f"nb{self.lesson}.reveal({k!r})" for k in missing))
        if len(shown) > 1:
            from IPython.display import display

            for item in shown[:-1]:
                display(item)
        return shown[-1]

    def summary(self) -> pd.DataFrame:
        """Every exercise of the lesson: its status in this session, whether its answer was asked for with
        :meth:`reveal`, and the message."""
        rows = []
        for key, ex in self.book.items():
            fb = self.results.get(key)
            rows.append(
                {
                    "exercise": ex.title,
                    "status": fb.status if fb else "not checked",
                    "revealed": key in self.revealed,
                    "message": fb.message if fb else "",
                }
            )
        return pd.DataFrame(rows, columns=["exercise", "status", "revealed", "message"])

    def assert_all_correct(self) -> pd.DataFrame:
        """Raise AssertionError unless every exercise of the lesson was checked and right (full lessons); a guess
        (:class:`Exercise` ``guess=True``) only has to be answered."""
        table = self.summary()
        guesses = [self.book[k].title for k in self.book if self.book[k].guess]
        bad = table[~table["status"].isin(ACCEPTED) & ~(table["exercise"].isin(guesses) & (table["status"] == WRONG))]
        if not bad.empty:
            raise AssertionError("exercises not right:\n" + bad.to_string(index=False))
        return table

    def reset(self) -> None:
        """Forget the checks run so far (a lesson's first cell calls it), and give plotly figures a PNG beside
        their interactive view when asked (``COURSE_STATIC_FIGURES=1``: an executed copy read without JavaScript)."""
        self.results.clear()
        self.revealed.clear()
        from .display import static_figures  # here, not at import: it loads plotly

        static_figures()


def check(
    name: str,
    answer: Any,
    expected: Any,
    explain: str = "",
    rel_tol: float = 0.0,
    hint: str = "",
    source: str = "measured",
    subject: str = "",
) -> Feedback:
    """A check whose texts stand with the caller (the learner-kernel checker), not in a lesson's book. With a
    ``subject`` (``"your kernel"``) a wrong ``answer`` is that subject's result, stated as such rather than quoted."""
    if not isinstance(name, str) or not name:
        raise TypeError("check() needs a short exercise name as its first argument")
    if source not in SOURCES:
        raise ValueError(f"source must be one of {list(SOURCES)}, got {source!r}")
    agrees = "the profile agrees" if source == "measured" else SOURCES[source][0]
    if not isinstance(rel_tol, (int, float)) or rel_tol < 0:
        raise ValueError(f"rel_tol must be a number >= 0, got {rel_tol!r}")
    if _is_missing(answer):
        msg = "write your answer in the cell above, run it, then run this cell again." + (
            f" Hint: {hint}" if hint else ""
        )
        fb = Feedback(name, MISSING, msg, answer, expected)
    else:
        equal, reason = _same(answer, expected, rel_tol)
        if equal:
            fb = Feedback(name, RIGHT, f"{agrees}: {expected!r}. {_sentence(explain)}".strip(), answer, expected)
        elif subject:
            msg = f"{_sentence(subject)}: {answer}. {_sentence(explain)}".strip()
            fb = Feedback(name, WRONG, msg, answer, expected)
        else:
            tol = f" (within {rel_tol:.0%})" if rel_tol else ""
            why = f"{reason}. " if reason else ""
            msg = (
                f"you said {answer!r}; that does not match {SOURCES[source][1]}{tol}. {why}{_sentence(explain)}".strip()
            )
            fb = Feedback(name, WRONG, msg, answer, expected)
    return fb
