"""Lesson 08: what stands between a batch-1 decode step and the weight-read floor, cause by cause, read from the
``causes`` table of ``python -m benchmarks decode-floor``. Tables in, a table, a check and text out; the notebook
reaches these through :mod:`helpers.lessons.nb08` (``nb08.floor``)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from .exercises import TIE, WRONG, Exercise, Exercises, Feedback

BEST, BESIDE = "course-concat+compile+graph", "eager+graph"
GROUPS = ("gemv", "attention", "idle", "small kernels")
WHOLE_STEP = "the whole step"  # the last row of causes_table
TIE_WITHIN = 0.10  # two causes this close are one measurement's noise apart: either answer stands
# what each cause points to; the best configuration already runs one GEMV for q, k, v and one for gate+up
FIXES = {
    "gemv": "a GEMV written for batch 1 (split-K or persistent, every SM streaming its share of the weights), "
    "since q, k, v and gate+up already run as one GEMV each in this configuration",
    "attention": "a decode attention kernel for one query, the KV cache split among blocks (split-KV)",
    "idle": "fewer kernels, fused, so the replayed graph has fewer gaps",
    "small kernels": "fuse the norms and RoPE into the kernels beside them",
}
FLOOR_CAUSE = Exercise(
    "largest cause between decode and the floor",
    explain="Beyond the floor's {floor:,.0f} us, per step of {step:,.0f} us: GEMV kernels above the floor "
    "{gemv:,.0f} us, attention {attention:,.0f}, idle inside the graph {idle:,.0f}, norms and pointwise "
    "{small:,.0f}.",
    hint="a kernel that reads the weights below the memory roof takes longer than the floor: how many such "
    "kernels does a step run, against attention's one per layer?",
    source="reference",
)


def _group(cause: str) -> str:
    if cause.startswith("weights at the memory roof"):
        return "floor"
    if "GEMV" in cause:
        return "gemv"
    if cause.startswith("attention"):
        return "attention"
    if cause.startswith("GPU idle"):
        return "idle"
    if cause.startswith(("normalization", "elementwise", "fused")):
        return "small kernels"
    return "other"  # copies, reductions, the unprofiled rest of the step


def _rows(causes: pd.DataFrame, configuration: str) -> pd.DataFrame:
    if not isinstance(causes, pd.DataFrame):
        raise TypeError(f"causes must be the decode-floor result's causes table, got {type(causes).__name__}")
    missing = {"configuration", "cause", "us", "pct_of_step"} - set(causes.columns)
    if missing:
        raise ValueError(f"the causes table lacks the columns {sorted(missing)}")
    rows = causes[causes["configuration"] == configuration]
    if rows.empty or not (rows["cause"].map(_group) == "floor").any():
        raise ValueError(f"no configuration {configuration!r} with a floor row in the causes table")
    return rows.assign(group=rows["cause"].map(_group))


def step_us(causes: pd.DataFrame, configuration: str = BEST) -> float:
    """The unprofiled step of ``configuration``, from the floor row's microseconds and its share of the step."""
    floor = _rows(causes, configuration).query("group == 'floor'").iloc[0]
    return float(floor["us"] * 100 / floor["pct_of_step"])


def cause_groups(causes: pd.DataFrame, configuration: str = BEST) -> pd.Series:
    """Microseconds per step by group: the floor, the four causes of :data:`GROUPS`, and the other rows."""
    sums = _rows(causes, configuration).groupby("group")["us"].sum()
    return sums.reindex(["floor", *GROUPS, "other"], fill_value=0.0).astype(float)


def largest_causes(causes: pd.DataFrame, configuration: str = BEST) -> list[str]:
    """The largest of the four causes, with every other within :data:`TIE_WITHIN` of it (a tie)."""
    four = cause_groups(causes, configuration)[list(GROUPS)]
    return [g for g in four.sort_values(ascending=False).index if four[g] >= (1 - TIE_WITHIN) * four.max()]


def check_cause(answer: Any, causes: pd.DataFrame, book: Exercises) -> Feedback:
    """Grade a guess of the largest cause in the best configuration's step: one of :data:`GROUPS`, a tie
    accepting either when two are within 10 % of each other; recorded in lesson 08's `book` of exercises
    (``nb08.check_floor_cause`` passes it)."""
    if not isinstance(book, Exercises):
        raise TypeError(f"book must be the lesson's Exercises, got {type(book).__name__}")
    EXERCISES = book  # noqa: N806  (the lesson's one book, as every checker names it)
    groups = cause_groups(causes)
    top = largest_causes(causes)
    details = {"floor": groups["floor"], "step": step_us(causes), "small": groups["small kernels"]}
    details.update({g: groups[g] for g in ("gemv", "attention", "idle")})
    said = (
        " ".join(answer.strip().lower().replace("_", " ").replace("-", " ").split())
        if isinstance(answer, str)
        else None
    )
    if said is not None and said not in GROUPS:
        return EXERCISES.report("floor_cause", WRONG, f"you said {answer!r}: answer one of {list(GROUPS)}.", answer)
    if said is not None and len(top) > 1:
        if said in top:
            why = f"{' and '.join(top)} are within {TIE_WITHIN:.0%} of each other, so either is accepted here"
            return EXERCISES.report("floor_cause", TIE, f"{why}. {FLOOR_CAUSE.explain.format(**details)}", answer)
        return EXERCISES.report("floor_cause", WRONG, f"you said {answer!r}: smaller than {' and '.join(top)}.", answer)
    return EXERCISES.check("floor_cause", answer, expected=top[0], details=details)


def causes_table(causes: pd.DataFrame, configurations: tuple[str, ...] = (BEST, BESIDE)) -> pd.DataFrame:
    """The causes of each configuration side by side (us and % of its step), rows in the first one's order (then
    any cause only a later one has), a cause a configuration lacks left blank, the whole unprofiled step last."""
    frames = []
    for conf in configurations:
        rows = _rows(causes, conf).set_index("cause")
        whole = pd.DataFrame({"us": [step_us(causes, conf)], "pct_of_step": [100.0]}, index=[WHOLE_STEP])
        frames.append(pd.concat([rows[["us", "pct_of_step"]], whole]).add_prefix(f"{conf}: "))
    table = pd.concat(frames, axis=1)
    # a cause only a later configuration has would land after the first one's total: the total stays last
    table = table.reindex([*table.index.drop(WHOLE_STEP), WHOLE_STEP])
    groups = pd.concat([_rows(causes, c).set_index("cause")["group"] for c in configurations])
    table.insert(0, "group", groups[~groups.index.duplicated()].reindex(table.index).fillna(""))
    table.index.name = "cause"
    return table


def target_text(causes: pd.DataFrame, share: float = 0.6) -> str:
    """What reaching ``share`` of the floor would take in the best configuration: the microseconds to remove,
    which causes hold that much, and the fix each points to."""
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
        raise ValueError(f"share must be a fraction in (0, 1], got {share!r}")
    groups, step = cause_groups(causes), step_us(causes)
    target = groups["floor"] / share
    need = step - target
    now = f"The best configuration's step is {step:,.0f} us; the floor is {groups['floor'] / step:.0%} of it"
    if need <= 0:
        return f"{now}: already at {share:.0%} or more."
    order = groups[list(GROUPS)].sort_values(ascending=False)
    alone = [g for g in order.index if order[g] >= need]
    enough = next(i for i in range(1, len(order) + 1) if order.iloc[:i].sum() >= need or i == len(order))
    if alone:
        holds = f"{' or '.join(f'**{g}**' for g in alone)} alone would be enough, if a fix removed all of it"
    else:
        holds = (
            f"no cause alone holds that much (the largest, **{order.index[0]}**, {order.iloc[0]:,.0f} us); "
            + " and ".join(f"**{g}**" for g in order.index[:enough])
            + f" together hold {order.iloc[:enough].sum():,.0f} us"
        )
    fixes = "\n".join(f"- **{g}** ({order[g]:,.0f} us): {FIXES[g]}." for g in order.index)
    return (
        f"{now}. To reach {share:.0%} it must fall to {target:,.0f} us (floor / {share:g}), **{need:,.0f} us** "
        f"less: {holds}. No fix removes a whole cause, so the way there takes from several. What each points "
        f"to:\n\n{fixes}"
    )


# The course's batch-1 kernels (helpers/kernels/decode_gemv.py, decode_attention.py) against the configuration
# they start from, in the decode-floor result that measured both.
KERNELS, KERNELS_FROM = "course-gemv-attn+compile+graph", "course-concat+compile+graph"


def kernels_text(causes: pd.DataFrame, new: str = KERNELS, old: str = KERNELS_FROM) -> str:
    """What the course's batch-1 kernels changed, cause group by group: the step, the floor's share of it, every
    group's time before and after (the rest too: copies, reductions, the step beyond the profiled kernels), and
    which groups moved by more than 10 % (one measurement's noise, as :data:`TIE_WITHIN`)."""
    a, b = cause_groups(causes, old), cause_groups(causes, new)
    step_a, step_b = step_us(causes, old), step_us(causes, new)
    moved = [g for g in GROUPS if abs(b[g] - a[g]) > TIE_WITHIN * max(abs(a[g]), abs(b[g]), 1.0)]
    still = [g for g in GROUPS if g not in moved]
    parts = ", ".join(f"{g} {a[g]:,.0f} -> {b[g]:,.0f} us" for g in GROUPS)
    rest = (
        f"the rest (copies, reductions, the step beyond the profiled kernels) {a['other']:,.0f} -> {b['other']:,.0f} us"
    )
    verdict = (
        f"{_names(moved) or 'No group'} changed by more than 10 %"
        + (f"; {_names(still)} by less" if still else "")
        + "."
    )
    # why: the GEMV reads the same weights (it can only close its gap to the floor); what it folds in leaves the
    # small kernels' group, and with those kernels go their launches and the gaps between them
    why = {
        "small kernels": "the small kernels fell because the GEMV now does the RMSNorm, GeGLU and residual adds "
        "that ran as kernels of their own",
        "idle": "the idle time fell with them: fewer kernels, fewer gaps between them in the replayed graph",
        "gemv": "the GEMV time moved because its kernel differs, while it still reads every weight once",
        "attention": "the attention time moved with the split-KV kernel, which reads only the filled part of the cache",
    }
    reasons = [why[g] for g in ("small kernels", "idle", "gemv", "attention") if g in moved and b[g] < a[g]]
    if "gemv" in still:
        reasons.append("the GEMV's row stayed close: it reads the same weights as before, and only its time "
                       "above the floor can shrink")  # fmt: skip
    return (
        f"From {old} to {new} the step went from {step_a:,.0f} to {step_b:,.0f} us, and the floor from "
        f"{a['floor'] / step_a:.0%} to {b['floor'] / step_b:.0%} of it. By cause: {parts}; {rest}. "
        + verdict[0].upper()
        + verdict[1:]
        + (" Read against what the kernels do: " + "; ".join(reasons) + "." if reasons else "")
    )


def _names(groups: list[str]) -> str:
    return " and ".join([", ".join(groups[:-1]), groups[-1]] if len(groups) > 1 else groups)
