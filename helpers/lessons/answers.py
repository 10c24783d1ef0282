"""How a learner's answer compares with the expected value (numbers within a tolerance, text ignoring case and
separators, sets counted not named), and how a value is written for a learner."""

from __future__ import annotations

import math
from numbers import Number
from typing import Any


def is_missing(answer: Any) -> bool:
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


def show_value(value: Any) -> str:
    """A value as a learner reads it (no numpy or torch reprs)."""
    number = _number(value)
    if number is not None:
        # thousands separators: a byte count of nine digits is unreadable without them
        return f"{number:.4g}" if not float(number).is_integer() else f"{int(number):,}"
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(map(str, value))) + "}"
    return repr(value)


def compare(answer: Any, expected: Any, rel_tol: float) -> tuple[bool, str]:
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
        pairs = [compare(a, e, rel_tol) for a, e in zip(answer, expected)]
        return all(ok for ok, _ in pairs), next((why for ok, why in pairs if not ok and why), "")
    if isinstance(expected, str):
        if not isinstance(answer, str):
            return False, f"expected text, got {type(answer).__name__}"
        return _normal_text(answer) == _normal_text(expected), ""
    try:
        return bool(answer == expected), ""
    except Exception:  # noqa: BLE001  (an answer whose == raises, e.g. a tensor in a tuple)
        return False, f"could not compare a {type(answer).__name__} with the expected {type(expected).__name__}"
