"""Lesson 06: reading its live tables (the race of section 2, variants that could not run, the training table)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

# A difference of one run within this share of the larger number is read as a tie (as in nb06).
TIE_SHARE = 0.10


def _tie(x: float, y: float, share: float = TIE_SHARE) -> bool:
    return abs(x - y) <= share * max(abs(x), abs(y))


def race_sentence(timing: pd.DataFrame) -> str:
    """Section 2's two GeGLU kernels (the learner's first row, the course's second): kernel time (level within the
    tie share, or which is faster) and, where the table has it, the time per call: a call slower than its kernel
    beyond the tie share, while the other call keeps up with its own kernel on the same GPU, is that launcher's host
    cost; both slower is the launchers or something else on the GPU (other work, or its clocks), which this table
    cannot tell apart."""
    if not isinstance(timing, pd.DataFrame):
        raise TypeError(f"timing must be a DataFrame, got {type(timing).__name__}")
    if not {"kernel", "kernel_us"} <= set(timing.columns) or len(timing) < 2:
        raise ValueError("timing needs two rows with the columns kernel and kernel_us")
    rows = list(timing.iloc[:2].itertuples())
    (na, ka), (nb, kb) = ((r.kernel, float(r.kernel_us)) for r in rows)
    if _tie(ka, kb):
        text = (
            f"By kernel time, {na} and {nb} are level ({ka:.0f} against {kb:.0f} us, within {TIE_SHARE:.0%}): at "
            "this shape the masks and the 1-D blocks cost nothing measurable on the GPU."
        )
    else:
        fast, slow = ((na, ka), (nb, kb)) if ka < kb else ((nb, kb), (na, ka))
        text = (
            f"By kernel time, {fast[0]} is faster: {fast[1]:.0f} against {slow[1]:.0f} us ({slow[1] / fast[1]:.2f}x)."
        )
    if "call_us" not in timing.columns:
        return text
    calls = [(r.kernel, float(r.kernel_us), float(r.call_us)) for r in rows]
    if any(pd.isna(c) for _, _, c in calls):
        return text + " One call was not timed, so the time per call is not compared."
    slow_calls = [(n, k, c) for n, k, c in calls if c > (1 + TIE_SHARE) * k]
    shown = " against ".join(f"{c:.0f} us for {n}" for n, _, c in calls)
    if not slow_calls:
        return text + f" Per call ({shown}) each call keeps up with its kernel: the launchers' host work hides."
    if len(slow_calls) == 1:
        n, k, c = slow_calls[0]
        return text + (
            f" Per call it is {shown}: {n}'s call takes {c - k:.0f} us longer than its kernel ({c / k:.2f}x), while "
            "the other call keeps up with its own kernel on the same GPU. That excess is its Python launcher: "
            "launching takes longer than the kernel runs, so the GPU waits for the host, and a caller waits for it too."
        )
    return text + (
        f" Per call it is {shown}: both calls take longer than their kernels. Either both launchers take longer to "
        "launch than their kernels run, or something else on the GPU (other work, or its clocks) slowed the calls: "
        "this table cannot tell which, so compare the kernels by kernel time."
    )


def _why_missing(status: object, reason: object) -> str:
    text = str(reason) if isinstance(reason, str) else ""
    if "importable" in text or "ModuleNotFoundError" in text or "not installed" in text:
        return "is not installed here"
    return f"did not run here ({status})" if isinstance(status, str) and status else "did not run here"


def available_rows(
    table: pd.DataFrame, recorded: pd.DataFrame | None = None, left_out: Mapping[str, str] | None = None
) -> tuple[pd.DataFrame, str]:
    """The rows of a results table whose variant ran (``status`` ok, or no ``status`` column), and one sentence for
    the variants left out (empty when none): those that did not run, and those of ``recorded`` this table lacks
    (with their reason from ``left_out``, variant: why), naming ``recorded``'s run when that has them: a learner
    reads why a variant is missing, not an exception's text, a row of NaN or nothing at all."""
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"table must be a DataFrame, got {type(table).__name__}")
    if table.empty:
        return table, ""
    if "variant" not in table.columns:
        raise ValueError("table needs a variant column")
    ok = table["status"] == "ok" if "status" in table.columns else pd.Series(True, index=table.index)
    left = table[~ok]
    reasons = left["reason"] if "reason" in left.columns else pd.Series([None] * len(left), index=left.index)
    parts = [f"{v} {_why_missing(s, r)}" for v, s, r in zip(left["variant"], left.get("status", reasons), reasons)]
    missing = [str(v) for v in left["variant"]]
    if recorded is not None and "variant" in recorded.columns:
        here = set(table["variant"].astype(str))
        for v in dict.fromkeys(str(v) for v in recorded["variant"] if str(v) not in here):
            why = (left_out or {}).get(v)
            parts.append(f"{v} was not run here" + (f" ({why})" if why else ""))
            missing.append(v)
    if not parts:
        return table, ""
    text = f"*Not in this table:* {'; '.join(parts)}."
    if recorded is not None and {"variant", "status"} <= set(recorded.columns):
        there = set(recorded.loc[recorded["status"] == "ok", "variant"].astype(str))
        have = [v for v in missing if v in there]
        if have:
            text += f" The recorded run has {', '.join(have)}."
    return table[ok], text


def training_view(training: pd.DataFrame) -> pd.DataFrame:
    """The training table as a lesson shows it: by variant, times and memory to one decimal, the gradient's
    relative error in scientific notation (rounding 4e-3 to one decimal would show 0.0), no status or reason
    columns (the rows that did not run are left out by :func:`available_rows`)."""
    if not isinstance(training, pd.DataFrame):
        raise TypeError(f"training must be a DataFrame, got {type(training).__name__}")
    if "variant" not in training.columns:
        raise ValueError("training needs a variant column")
    view = training.drop(columns=[c for c in ("status", "reason") if c in training.columns]).set_index("variant")
    errors = [c for c in view.columns if c.endswith("rel_err")]
    view = view.round({c: 1 for c in view.columns if c not in errors and pd.api.types.is_numeric_dtype(view[c])})
    for c in errors:
        view[c] = [f"{v:.2e}" if pd.notna(v) else "" for v in view[c]]
    return view


def speedup_phrase(a_us: float, b_us: float) -> str:
    """How much faster (or slower) a time of `a_us` is than `b_us`, always said as a speed-up: ``180, 231 ->
    '1.28x faster'``, so one ratio is never shown both as a speed-up and as a time ratio."""
    for name, v in (("a_us", a_us), ("b_us", b_us)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise ValueError(f"{name} must be a positive finite time in us, got {v!r}")
    ratio = b_us / a_us
    return f"{ratio:.2f}x faster" if ratio >= 1 else f"{1 / ratio:.2f}x slower"
