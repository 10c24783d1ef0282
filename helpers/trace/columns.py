"""Values of trace events into numpy columns (integers with holes, floats, shared strings), one by one only
where the values are unusual (``pid`` as a string, an id as ``null``)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from . import json_text
from .links import MISSING_ID as _MISSING

NO_NAME = "(no name)"  # shown for an event whose name is empty or missing


def int_array(values: list) -> tuple[np.ndarray, np.ndarray]:
    """(int64 values, missing mask) from a list of ints with _MISSING holes; tolerates strings/floats."""
    try:
        arr = np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        # Unusual input (None, strings such as "12", floats): convert one by one, NaN when impossible.
        num = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(
            dtype=np.float64, na_value=np.nan
        )
        bad = ~np.isfinite(num) | (np.abs(np.nan_to_num(num)) >= 2.0**62)  # beyond int64: missing
        arr = np.where(bad, _MISSING, np.nan_to_num(num)).astype(np.int64)
        return arr, bad | (arr == _MISSING)
    return arr, arr == _MISSING


def float_array(values: list) -> np.ndarray:
    """float64 values from a list; anything that is not a number (or beyond float64) becomes NaN."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(
            dtype=np.float64, na_value=np.nan
        )


class LeftOut:
    """Stands in a lookup table for a value too long to keep: only its length is kept."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = size


class Codes:
    """A lookup table that gives each distinct value a small integer code (strings are kept once)."""

    def __init__(self) -> None:
        self.table: dict[Any, int] = {}
        self.reordered = False  # True once a value was replaced by a LeftOut (table order != code order)

    def leave_out_long(self, since: int, limit: int) -> int:
        """Replace the values coded from `since` on that are longer than `limit` by :class:`LeftOut`; how many."""
        table = self.table
        new = len(table) - since
        if new <= 0:
            return 0
        # values added since `since` are the last ones in the table (earlier LeftOuts sit before them)
        long = [k for k in itertools.islice(reversed(table), new) if isinstance(k, (bytes, str)) and len(k) > limit]
        for key in long:
            table[LeftOut(len(key))] = table.pop(key)
        self.reordered |= bool(long)
        return len(long)

    def encode(self, values: Iterable[Any]) -> np.ndarray:
        """The code of each value (new values get the next codes)."""
        vals = values if isinstance(values, list) else list(values)
        table = self.table
        if vals and type(vals[0]) is int:
            try:  # all integers (pids, tids): sort-based unique in C, a dict lookup per distinct value
                arr = np.array(vals, dtype=np.int64)
            except (TypeError, ValueError, OverflowError):
                arr = None
            if arr is not None:
                uniques, inverse = np.unique(arr, return_inverse=True)
                remap = np.array([table.setdefault(int(u), len(table)) for u in uniques], dtype=np.int64)
                return remap[inverse.reshape(-1)]
        setdefault = table.setdefault
        try:
            # Values repeat a lot (op names, categories, thread ids): a dict lookup per value is the
            # cheapest way to share them (faster than pandas.factorize on object arrays).
            codes = [setdefault(v, len(table)) for v in vals]
        except TypeError:  # an unhashable value (a list where a name should be): use its text
            codes = [
                setdefault(v if isinstance(v, (str, int, float, bytes, type(None))) else str(v), len(table))
                for v in vals
            ]
        return np.array(codes, dtype=np.int64)

    def encode_present(self, values: Iterable[Any]) -> np.ndarray:
        """Like :meth:`encode`, with -1 for None (no dict lookup for the many absent values)."""
        table = self.table
        setdefault = table.setdefault
        return np.array([-1 if v is None else setdefault(v, len(table)) for v in values], dtype=np.int64)

    def values(self) -> list[Any]:
        """The distinct values, in code order."""
        if self.reordered:
            return sorted(self.table, key=self.table.__getitem__)
        return list(self.table)


def text_keys(values: list) -> list:
    """Hashable keys for shape-like args (lists): their compact JSON; None stays None."""
    if all(v is None for v in values):
        return values
    dumps = json_text.dumps_compact
    return [None if v is None or v == "" else dumps(v) for v in values]


def text_of_key(key: Any) -> str:
    """The text shown for a shape-like arg: Python's str() of the value, as before ('[128, 32]')."""
    if not isinstance(key, (bytes, str)):  # None (pandas may hand it back as NaN)
        return ""
    return str(json_text.loads(key))


def check_count(value: int | None, default: int, option: str) -> int:
    """A limit given as an option: `default` for None, else a positive int (ValueError otherwise)."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{option} must be a positive int, got {value!r}")
    return value


def name_text(value: Any) -> str:
    """The name shown for an event; empty or missing names get one that says so."""
    text = "" if value is None else str(value)
    return text if text.strip() else NO_NAME


def example(name: Any, ts: Any, extra: str = "") -> str:
    """A short description of one event for a note: its name and start."""
    text = f"{str(name)[:60]!r}" if name not in (None, "") else "an event without a name"
    try:
        text += f" at ts {float(ts):.0f}"
    except (TypeError, ValueError):
        pass
    return text + (f", {extra}" if extra else "")
