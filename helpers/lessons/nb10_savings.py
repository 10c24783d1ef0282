"""Lesson 10's reading of measured savings: whether a predicted saving held against interleaved rounds, and the
sentences that explain the table of fixes and the critical path from their own numbers (never fixed verdicts)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

import pandas as pd

from .exercises import compare_rounds

# A predicted saving counts as right within this share of the measured one (or inside the rounds' spread).
SAVING_TOLERANCE = 0.25
# A difference smaller than this share of the step is inside any shared machine's noise.
STEP_NOISE = 0.02
# Below this share of a GPU step's critical path on the device (kernels, copies), the path stays on the host.
HOST_BOUND_PCT = 5.0


def measured_saving(before: Sequence[float], after: Sequence[float]) -> dict[str, float]:
    """The saving of a fix from two sets of interleaved rounds (us per step): the ``median`` of the round-by-round
    differences, their first and third quartiles ``q1``/``q3`` (the middle half: the machine's noise), and the
    ``step`` before the fix (the median of its rounds)."""
    b, a = list(before), list(after)
    if len(b) != len(a) or len(b) < 3:
        raise ValueError(f"need the same number of rounds (at least 3) before and after, got {len(b)} and {len(a)}")
    compare_rounds(b, a)  # the same checks as every timing: finite numbers
    q1, median, q3 = statistics.quantiles([x - y for x, y in zip(b, a)], n=4, method="inclusive")
    return {"median": median, "q1": q1, "q3": q3, "step": statistics.median(b)}


def prediction_held(predicted_us: float, saving: Mapping[str, float]) -> bool:
    """Whether a predicted saving held: within 25 % of the measured median, inside its middle half, or closer to it
    than 2 % of the step (a fix that saves almost nothing is measured as noise around zero)."""
    near = max(SAVING_TOLERANCE * abs(saving["median"]), STEP_NOISE * abs(saving.get("step", 0.0)))
    return bool(abs(predicted_us - saving["median"]) <= near or saving["q1"] <= predicted_us <= saving["q3"])


def too_noisy(predicted_us: float, saving: Mapping[str, float]) -> bool:
    """Whether the rounds spread too widely to test a prediction: their middle half is wider than half of the larger
    of the measured and predicted savings, and wider than 2 % of the step."""
    spread = saving["q3"] - saving["q1"]
    return bool(
        spread > max(0.5 * max(abs(saving["median"]), abs(predicted_us)), STEP_NOISE * abs(saving.get("step", 0.0)))
    )


def scaling_note(bound_us: float, ratio: float, saving: Mapping[str, float]) -> str:
    """One sentence on this measurement: did the bound scaled by the step's unprofiled/profiled `ratio` hold where
    the bound itself did not, or the other way round? Both holding or both missing is said too; a ratio above 1 is
    not the profiler's cost and scales nothing."""
    if not isinstance(ratio, (int, float)) or isinstance(ratio, bool) or not ratio > 0:
        raise ValueError(f"ratio must be a positive number (unprofiled over profiled), got {ratio!r}")
    if ratio > 1:
        return (
            f"The step's unprofiled/profiled ratio ({ratio:.2f}) is above 1, which the profiler (it only adds time) "
            "cannot cause: something else on the machine slowed the unprofiled rounds, so it is not used to scale the "
            "bound."
        )
    scaled = float(bound_us) * float(ratio)
    raw, scaled_ok = prediction_held(bound_us, saving), prediction_held(scaled, saving)
    head = f"Scaled by the step's unprofiled/profiled ratio ({ratio:.2f}), the bound would be {scaled:,.0f} us"
    if scaled_ok and not raw:
        return f"{head}, which held where the bound missed: here the fix removed time the profiler inflated about as much as the whole step."  # fmt: skip
    if raw and not scaled_ok:
        return f"{head}, which missed where the bound held: here the profiler inflated the removed time less than the whole step."  # fmt: skip
    if raw:
        return f"{head}; both held, so this run cannot tell which is better."
    closer = "the scaled one" if abs(scaled - saving["median"]) < abs(bound_us - saving["median"]) else "the bound itself"  # fmt: skip
    return f"{head}; both missed, {closer} closer to the measured median."


def scaling_verdict(fixes: pd.DataFrame) -> str:
    """What scaling each non-zero prediction by its step's ratio changed, from the table of fixes (columns ``fix``,
    ``predicted_us``, ``held``, ``scaled_held``): the verdicts it turned each way, named. Rows whose ``scaled_us``
    is NaN (a ratio above 1, see :func:`.nb10_readings.scaled_bound`) are left out of the count and named."""
    _need(fixes, ("fix", "predicted_us", "held", "scaled_held"))
    costly = fixes[fixes["predicted_us"] > 0]
    unscaled = costly[costly["scaled_us"].isna()] if "scaled_us" in costly.columns else costly.iloc[:0]
    costly = costly.drop(index=unscaled.index)
    skipped = (
        f" {_names(unscaled['fix'])}: not scaled, its ratio above 1 (the machine's noise, not the profiler's cost)."
        if len(unscaled)
        else ""
    )
    if costly.empty:
        return skipped.strip()
    won = costly[costly["scaled_held"] & ~costly["held"]]["fix"].tolist()
    lost = costly[~costly["scaled_held"] & costly["held"]]["fix"].tolist()
    head = (
        f"Scaled by the step's unprofiled/profiled ratio, {int(costly['scaled_held'].sum())} of the {len(costly)} "
        f"non-zero predictions would have held, against {int(costly['held'].sum())} unscaled. "
    )
    if not won and not lost:
        return head + "On this run scaling changed no verdict: compare `scaled_us` and `predicted_us` with `measured_us` in the table to see which came closer." + skipped  # fmt: skip
    parts = []
    if won:
        parts.append(f"would have turned {_predictions(won)} from missed to held (the removed time was inflated like the step)")  # fmt: skip
    if lost:
        parts.append(f"would have turned {_predictions(lost)} from held to missed (the removed time was inflated less than the step)")  # fmt: skip
    return head + "On this run scaling " + "; and it ".join(parts) + ". Whether one ratio fits depends on the fix and the machine." + skipped  # fmt: skip


def _predictions(names: Sequence[str]) -> str:
    # names read as a phrase in a sentence, not as a bare comma list
    names = [f"`{n}`" for n in names]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"the {listed} prediction{'s' if len(names) > 1 else ''}"


def missed_reasons(fixes: pd.DataFrame, launch_bound: Mapping[str, bool] | None = None) -> str:
    """Why the predictions that missed did, each reason from the rows it fits (columns ``fix``, ``predicted_us``,
    ``measured_us``, ``measured_q1_us``, ``measured_q3_us``, ``held``): a bound above a positive saving, one below
    it, and a fix that made the step slower (its whole middle half below zero). `launch_bound` says, per fix, whether
    the diagnosis before it found the GPU waiting for launches (``gpu_idle_cpu_bound``)."""
    _need(fixes, ("fix", "predicted_us", "measured_us", "measured_q1_us", "measured_q3_us", "held"))
    missed = fixes[~fixes["held"]]
    slower = missed[missed["measured_q3_us"] < 0]
    rest = missed[missed["measured_q3_us"] >= 0]
    out = []
    over = rest[rest["predicted_us"] > rest["measured_us"]]
    if len(over):
        out.append(
            f"Over ({_names(over['fix'])}): the bound is an upper bound (a fused or fixed version still does the "
            "arithmetic and touches memory once, and still waits where the step must), and the profiler inflates "
            "the removed operators too."
        )
    under = rest[rest["predicted_us"] < rest["measured_us"]]
    if len(under):
        out.append(
            f"Under ({_names(under['fix'])}): the fix also removed time the rule did not charge to it, or the "
            "machine's rounds moved (compare the middle half)."
        )
    for r in slower.itertuples():
        line = (
            f"Slower ({r.fix}): the fix cost more than it saved, {-r.measured_us:,.0f} us per step (middle half "
            f"{-r.measured_q3_us:,.0f} to {-r.measured_q1_us:,.0f} us), where the bound can only predict a saving."
        )
        if r.fix == "fp32" and (launch_bound or {}).get(r.fix, False):
            line += (
                " Autocast adds a cast kernel before the matrix products (each fp32 weight and input to bf16, the "
                "gradients back): the diagnosis before this fix found the step launch-bound, the GPU waiting for the "
                "host's launches, so those extra launches cost more than the faster bf16 products save."
            )
        out.append(line)
    return " ".join(out)


def path_sentence(by_kind: pd.DataFrame, on_gpu: bool) -> str:
    """Where a step's critical path runs, from :func:`helpers.diagnose.path_summary`'s table (``kind``, ``pct``):
    on a CPU the Python thread; on a GPU the host and the device, or the host alone when kernels and copies hold
    under 5 % of it (a launch-bound step)."""
    _need(by_kind, ("kind", "pct"))
    if not on_gpu:
        return (
            "On a CPU-only trace the path is the Python thread itself: nothing runs in parallel to hide work behind, "
            "so every operator removed shortens the step."
        )
    device = float(by_kind[by_kind["kind"].isin(["kernel", "memcpy"])]["pct"].sum())
    if device < HOST_BOUND_PCT:
        return (
            f"On this GPU the path hardly leaves the host: kernels and copies hold {device:.1f} % of it. The GPU "
            "finishes each kernel before the host launches the next (the step is launch-bound), so a fix shortens "
            "the step by the host time it removes (operators, launches, Python), not by its kernels' time."
        )
    return (
        f"On a GPU the path passes between the host and the device: here kernels and copies hold {device:.0f} % of "
        "it. Work that runs beside the path, off it, saves nothing when removed."
    )


def _need(table: pd.DataFrame, columns: Sequence[str]) -> None:
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"expected a DataFrame, got {type(table).__name__}")
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(f"the table lacks the column(s) {', '.join(missing)}")


def _names(names: Sequence[str] | pd.Series) -> str:
    return ", ".join(str(n) for n in names)


def noisy_held_text(names: Sequence[str] | pd.Series) -> str:
    """Used by notebook 10: the fixes whose prediction held only because their rounds spread widely (``too_noisy``),
    in one sentence that agrees with their number; "" when there are none."""
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise TypeError("names must be a list of fix names, e.g. list(noisy['fix'])")
    names = list(names)
    if not names:
        return ""
    who = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    return (
        f"Of these, {who} held only because {'its' if len(names) == 1 else 'their'} rounds spread widely: too noisy "
        "to test here (re-run this section on a quieter machine). "
    )


def ratio_text(unprofiled: Sequence[float], profiled: Sequence[float]) -> str:
    """The unprofiled/profiled ratio of two sets of rounds with its range (from the rounds' middle halves), and a
    warning when the profiled rounds' middle half spans more than 2x: then the ratio is the machine's noise too."""
    v = compare_rounds(unprofiled, profiled)
    if v.b_median <= 0 or v.b_range[0] <= 0:
        raise ValueError("profiled rounds must be positive")
    ratio = v.a_median / v.b_median
    lo, hi = v.a_range[0] / v.b_range[1], v.a_range[1] / v.b_range[0]
    text = f"the ratio **unprofiled_ratio = {ratio:.2f}** (from the rounds' middle halves, {lo:.2f} to {hi:.2f})."
    if hi > 1:
        # the profiler never makes a step faster: a range reaching above 1 is something else slowing unprofiled rounds
        text += (
            " A ratio above 1 would mean the profiler made the step faster, which it never does: there, something "
            "else on this machine (other work, or its clocks) slowed some unprofiled rounds."
        )
    spread = v.b_range[1] / v.b_range[0]
    if spread > 2:
        text += (
            f" The profiled rounds' middle half spans {spread:.1f}x: on this run the ratio measures this machine's "
            "noise as much as the profiler's cost, and every bound scaled by it below inherits that noise."
        )
    return text


def right_method_message(predicted_us: float, saving: Mapping[str, float]) -> str:
    """The first words of a right answer to a saving exercise (its status and title give the method's verdict first):
    then whether the bound held against the measurement, and by how much it missed if not."""
    p = float(predicted_us)
    if prediction_held(p, saving):
        return (
            f"you predicted {p:,.0f} us, the bound as the trace shows it, and the bound held against the measurement."
        )
    return (
        f"you predicted {p:,.0f} us, the bound as the trace shows it. This time the bound missed the "
        f"measurement by {abs(p - saving['median']):,.0f} us; the measurement says how far the bound landed."
    )
