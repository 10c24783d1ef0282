"""Used by notebooks 00-10: self-checking exercises. Explanations and hints live in each lesson's
:class:`Exercises` book, not in the notebook; a check never raises on a wrong answer, it returns feedback."""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..paths import NOTEBOOKS_DIR
from .answers import compare, is_missing, show_value
from .lesson_summary import NotYet, Summary, summary_text
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
    evidence and graded against this run's measurement, which an unsteady machine (other work, or its clocks) can
    change: a full lesson's :meth:`Exercises.assert_all_correct` needs it answered, not right."""

    title: str
    explain: str = ""
    hint: str = ""
    rel_tol: float = 0.0
    source: str = "measured"
    guess: bool = False
    # how a right answer's expected value is written (e.g. bytes as MB); None: :func:`show_value`
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
        if is_missing(answer):
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
            equal, reason = (bool(accept(answer)), "") if accept is not None else compare(answer, expected, tol)
            if equal:
                shown = (ex.show or show_value)(expected)
                fb = Feedback(ex.title, RIGHT, f"{SOURCES[ex.source][0]}: {shown}. {_sentence(explain)}".strip())
            else:
                within = f" (within {tol:.0%})" if tol else ""
                why = f" ({reason})" if reason else ""
                hint = f" Hint: {ex.hint}" if ex.hint else ""
                target = SOURCES[ex.source][1]
                if reason.startswith("expected"):  # the wrong kind of value: say so, not that the idea is wrong
                    message = f"you said {show_value(answer)}: {reason}. Write the answer as that kind of value.{hint}"
                else:
                    message = (
                        f"you said {show_value(answer)}{why}; that does not match {target}{within}. Think again and "
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
        return Feedback(ex.title, fb.status, f"the answer: {show_value(fb.expected)}.", fb.answer, fb.expected)

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

    def _guessed(self, key: str) -> bool:
        """A guess checked with any answer: its evidence was meant to follow, right or wrong."""
        fb = self.results.get(key)
        return self.book[key].guess and fb is not None and fb.status != MISSING

    def lesson_summary(self, folder: Path = NOTEBOOKS_DIR) -> Summary | NotYet:
        """The full lesson's summary once every exercise is right, revealed or (a guess) checked; until then what
        is still open. Learner copies call it where the lesson's summary stood: it states the answers."""
        still = tuple((k, ex.title) for k, ex in self.book.items() if not (self.answered(k) or self._guessed(k)))
        return NotYet(self.lesson, still) if still else Summary(summary_text(self.lesson, folder))

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
    if is_missing(answer):
        msg = "write your answer in the cell above, run it, then run this cell again." + (
            f" Hint: {hint}" if hint else ""
        )
        fb = Feedback(name, MISSING, msg, answer, expected)
    else:
        equal, reason = compare(answer, expected, rel_tol)
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
