"""Argument checks shared by every layer, with errors that say what to do; no torch or pandas, for the trace layer."""

from __future__ import annotations

import math
import numbers
from typing import Any


def positive_int(name: str, value: Any) -> int:
    # bool is an int subclass; True as a matrix size is a bug, not a 1
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a positive int, got {type(value).__name__}: {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value}")
    return int(value)


def non_negative_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a non-negative int, got {type(value).__name__}: {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be a non-negative int, got {value}")
    return int(value)


def positive_number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a positive number, got {type(value).__name__}: {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value}")
    return float(value)


def check_callable(fn: object, what: str = "fn") -> None:
    """TypeError unless `fn` can be called (a function, a lambda or an nn.Module)."""
    if not callable(fn):
        raise TypeError(
            f"{what} must be a function or nn.Module to call, got {type(fn).__name__}. Pass e.g. model or lambda: a @ b"
        )


def bounded_int(name: str, value: Any, low: int, high: int, why: str = "") -> int:
    """`value` as an int in [low, high]; ValueError saying the bounds (and why there is an upper one)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not low <= value <= high:
        reason = f" ({why})" if why else ""
        raise ValueError(f"{name} must be an integer from {low} to {high:,}{reason}, got {value!r}")
    return int(value)
