"""Lesson 07: synchronised wall times per call read against the profiled kernel time and the work, so that a
sentence about the kernels (backends, causal tiles, growth with the sequence) is said only where the clock
measured them and not a per-call cost around them."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

import pandas as pd

from ..trace.model import Trace

__all__ = [
    "backend_times_sentence",
    "causal_sentence",
    "causal_timing_row",
    "kernel_us_per_call",
    "sweep_growth_sentence",
    "wall_rounds_disturbed",
]


def _known(value: float | None) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def wall_rounds_disturbed(
    rounds_us: Sequence[float], earlier_us: float | None, kernel_us: float | None, factor: float = 1.5
) -> bool:
    """Whether a call's synchronised rounds were slowed by other work: their median more than `factor` times both
    the same call timed earlier and its profiled kernel time (those known; False when neither is). A launch adds
    microseconds to a call of hundreds, so a gap that large is the GPU's other work, not the host."""
    values = [float(x) for x in rounds_us]
    if not values or not all(math.isfinite(x) and x > 0 for x in values):
        raise ValueError(f"rounds_us must be positive finite times, got {list(rounds_us)!r}")
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not factor > 1:
        raise ValueError(f"factor must be a number above 1, got {factor!r}")
    known = [r for r in (earlier_us, kernel_us) if _known(r)]
    if any(isinstance(r, bool) or not isinstance(r, (int, float)) or not r > 0 for r in known):
        raise ValueError(
            f"earlier_us and kernel_us must be positive numbers or None, got {earlier_us!r}, {kernel_us!r}"
        )
    median = statistics.median(values)
    return bool(known) and all(median > factor * r for r in known)


def kernel_us_per_call(trace: Trace) -> float | None:
    """The summed time of one call's GPU kernels (memsets and copies left out), the median over the profiled
    steps; None for a profile without GPU kernels (a CPU runs each operator inline)."""
    kernels = trace.kernels(allow_empty=True)
    kernels = kernels[kernels["kind"] == "kernel"]
    if kernels.empty:
        return None
    return float(kernels.groupby("step")["duration_us"].sum().median())


def backend_times_sentence(
    rounds_ms: Mapping[str, Sequence[float]], kernel_us: Mapping[str, float | None], factor: float = 1.5
) -> str:
    """Whether each backend's timed rounds (`rounds_ms`) measured its kernel (`kernel_us`, one profiled call):
    a one-call wall time more than `factor` times the kernel time is other work on a shared GPU, and is named."""
    known = {n: float(k) for n, k in kernel_us.items() if _known(k)}
    missing = [n for n in known if n not in rounds_ms]
    if missing:
        raise ValueError(f"no rounds for {', '.join(map(repr, missing))}; have {', '.join(rounds_ms)}")
    if not known:
        return (
            "No kernel time was profiled beside these rounds (a CPU runs each call inline, launching no kernels), "
            "so nothing checks them against a kernel."
        )
    wall = {n: 1e3 * statistics.median(float(x) for x in rounds_ms[n]) for n in known}
    slowed = [n for n in known if wall_rounds_disturbed([1e3 * float(x) for x in rounds_ms[n]], None, known[n], factor)]
    calm = [n for n in known if n not in slowed]
    if not slowed:
        return (
            f"Every backend's wall time per call is within {factor:g}x of its kernel time (`kernel_us`, one profiled "
            "call): these rounds measured the backends themselves."
        )
    each = "; ".join(
        f"{n} {wall[n]:,.0f} us a call against {known[n]:,.0f} us in its kernel ({wall[n] / known[n]:.1f}x)"
        for n in slowed
    )
    rest = f" {', '.join(calm)} stayed within {factor:g}x of {'its kernel' if len(calm) == 1 else 'their kernels'}." if calm else ""  # fmt: skip
    return (
        f"**Rounds slowed by other work on this shared GPU:** {each}. A launch and a synchronise add microseconds "
        "to a call, not hundreds of them: other programs' work ran inside these rounds, so `ms_per_call` is not "
        f"these backends' speed. Compare them by `kernel_us`.{rest}"
    )


def causal_timing_row(
    seq: int,
    rounds_ms: Mapping[str, Sequence[float]],
    flops_ratio: float,
    kernel_us: Mapping[str, float | None] | None = None,
    factor: float = 1.5,
) -> dict:
    """One row of the causal-against-full table: the fastest round of each (``causal``, ``full`` in `rounds_ms`),
    their ranges and time ratio; with `kernel_us` (one profiled call each) the kernel times, their ratio and
    ``wall_disturbed``: either's rounds more than `factor` times its kernel time."""
    for name in ("causal", "full"):
        if name not in rounds_ms or not len(rounds_ms[name]):
            raise ValueError(f"give the rounds of 'causal' and 'full'; {name!r} missing or empty")
    causal_ms, full_ms = min(rounds_ms["causal"]), min(rounds_ms["full"])  # the round least disturbed
    row = {
        "seq": seq,
        "causal_ms": causal_ms,
        "non_causal_ms": full_ms,
        "causal_range": f"{min(rounds_ms['causal']):.2f}-{max(rounds_ms['causal']):.2f}",
        "non_causal_range": f"{min(rounds_ms['full']):.2f}-{max(rounds_ms['full']):.2f}",
        "time_ratio": causal_ms / full_ms,
    }
    if kernel_us is not None and all(_known(kernel_us.get(n)) for n in ("causal", "full")):
        kc, kf = float(kernel_us["causal"]), float(kernel_us["full"])
        row.update({"causal_kernel_us": kc, "non_causal_kernel_us": kf, "kernel_ratio": kc / kf})
        row["wall_disturbed"] = any(
            wall_rounds_disturbed([1e3 * float(x) for x in rounds_ms[n]], None, k, factor)
            for n, k in (("causal", kc), ("full", kf))
        )
    row["flops_ratio"] = flops_ratio
    return row


def causal_sentence(table: pd.DataFrame) -> str:
    """Causal masking's time against its FLOPs, per sequence length (rows of :func:`causal_timing_row`): read
    from the kernel times when the table has them (tiles explain a kernel, not the time around it), else from the
    clock. A kernel skips whole tiles above the diagonal and computes the diagonal's in full, so its ratio sits
    above the FLOP ratio; wall rounds far above their kernels are said to dilute the ratio with per-call time."""
    missing = [c for c in ("seq", "time_ratio", "flops_ratio") if c not in getattr(table, "columns", ())]
    if missing:
        raise ValueError(f"the table lacks the column(s) {', '.join(missing)}")
    by_kernel = "kernel_ratio" in table.columns and bool(table["kernel_ratio"].notna().all())
    ratio = table["kernel_ratio"] if by_kernel else table["time_ratio"]
    each = "; ".join(
        f"at seq {int(r.seq)} causal takes {k:.2f} of the full attention's {'kernel time' if by_kernel else 'time'}"
        + (f" ({r.time_ratio:.2f} on the clock)" if by_kernel else "")
        + f" for {r.flops_ratio:.2f} of its FLOPs"
        for r, k in zip(table.itertuples(), ratio, strict=True)
    )
    above = table[ratio > table["flops_ratio"] + 0.05]
    shrinks = len(table) > 1 and ratio.iloc[-1] < ratio.iloc[0]
    why = (
        " The tiles above the diagonal are skipped, but those on it are computed in full and masked, and each query "
        "block still loads its queries and writes its output: at "
        + ", ".join(str(int(s)) for s in above["seq"])
        + " that leaves the ratio above the FLOP ratio"
        + (" (the longer the sequence, the smaller the diagonal's share)." if shrinks else ".")
        if len(above)
        else " Nearly all the skipped work is saved: the diagonal's tiles are a small share at these lengths."
    )
    where = "In one profiled call of each, on" if by_kernel else "On"
    text = f"{where} the GPU's key tiles of 64 to 128, {each}.{why}"
    if by_kernel and "wall_disturbed" in table.columns:
        diluted = table[table["wall_disturbed"].astype(bool)]
        if len(diluted):
            extra = "; ".join(
                f"at seq {int(r.seq)}, {1e3 * r.causal_ms - r.causal_kernel_us:,.0f} us more than the causal kernel "
                f"and {1e3 * r.non_causal_ms - r.non_causal_kernel_us:,.0f} us more than the full one"
                for r in diluted.itertuples()
            )
            text += (
                f" On the clock each call took far longer than its kernel ({extra}): time outside the kernel, from "
                "other work on this shared GPU around each synchronised call, added to both sides, which pulls the "
                "wall-clock ratio towards 1. That is per-call overhead, not tiles: the kernel ratio is what the "
                "tiles explain."
            )
    return text


def sweep_growth_sentence(sweep: pd.DataFrame, versions: Mapping[str, str] | None = None) -> str:
    """How each timed version of the score sweep (``seq``, ``gflop`` and one ms column per version) grew against
    its work from the shortest to the longest length: a time that grew less than the square root of the work's
    growth, or fell between lengths, is mostly a per-call cost, and the plot is then read for its order of magnitude."""
    versions = dict(versions or {"manual_ms": "the hand-written version", "sdpa_ms": "SDPA"})
    missing = [c for c in ("seq", "gflop", *versions) if c not in sweep.columns]
    if missing or len(sweep) < 2:
        raise ValueError(f"give at least two lengths of score_sweep's rows; missing columns {missing}")
    first, last = sweep.iloc[0], sweep.iloc[-1]
    work = float(last.gflop / first.gflop)
    grew = {c: float(last[c] / first[c]) for c in versions}
    flat = [c for c in versions if grew[c] < math.sqrt(work) or not sweep[c].is_monotonic_increasing]
    text = (
        f"Between seq {first.seq:.0f} and {last.seq:.0f} the work (causal FLOPs) grew {work:.0f}x, the time per call of "
        + ", of ".join(f"{versions[c]} {grew[c]:.1f}x" for c in versions)
        + "."
    )
    if not flat:
        return text + (
            " Each time grew with its work, if not in exact step (caches, memory and other programs move it): the "
            "slopes of the plot show how the time grows with the sequence."
        )
    names = " and ".join(versions[c] for c in flat)
    return text + (
        f" The time of {names} did not follow the work: a call carries a fixed cost that is not its arithmetic "
        "(dispatch and launch, on a GPU the synchronise after each call, and other programs' work on a shared "
        "machine), and at the short lengths that cost is most of the time. Read the plot for its order of "
        "magnitude, not for a growth rate; the kernel times of section 3 are the kernels' own."
    )
