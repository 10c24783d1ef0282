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
    "host_us_per_call",
    "kernel_us_per_call",
    "overlapping_rounds_sentence",
    "sweep_growth_sentence",
    "wall_rounds_disturbed",
]


def _known(value: float | None) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def wall_rounds_disturbed(
    rounds_us: Sequence[float],
    earlier_us: float | None,
    kernel_us: float | None,
    factor: float = 1.5,
    host_us: float | None = None,
) -> bool:
    """Whether a call's synchronised rounds were slowed by something else (other work, or the clocks): their median
    more than `factor` times both the same call timed earlier and its profiled kernel time (those known; False when
    neither is). With `host_us`, the host's CPU time per call, the median must also exceed the kernel by more than
    `factor` times it: a short kernel's call is mostly the host's dispatch and synchronise, which is not a disturbance."""
    values = [float(x) for x in rounds_us]
    if not values or not all(math.isfinite(x) and x > 0 for x in values):
        raise ValueError(f"rounds_us must be positive finite times, got {list(rounds_us)!r}")
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not factor > 1:
        raise ValueError(f"factor must be a number above 1, got {factor!r}")
    known = [r for r in (earlier_us, kernel_us, host_us) if _known(r)]
    if any(isinstance(r, bool) or not isinstance(r, (int, float)) or not r > 0 for r in known):
        raise ValueError(
            f"earlier_us, kernel_us and host_us must be positive numbers or None, got {earlier_us!r}, "
            f"{kernel_us!r}, {host_us!r}"
        )
    median = statistics.median(values)
    refs = [r for r in (earlier_us, kernel_us) if _known(r)]
    slowed = bool(refs) and all(median > factor * r for r in refs)
    if slowed and _known(host_us) and _known(kernel_us):
        slowed = median - float(kernel_us) > factor * float(host_us)
    return slowed


def host_us_per_call(trace: Trace, op: str = "aten::scaled_dot_product_attention") -> float | None:
    """The CPU time of one call of `op` (its ``cpu_total_us`` over its calls: the host's dispatch, the profiler's
    own cost included); None when the trace does not hold `op`."""
    ops = trace.ops()
    row = ops[ops["name"] == op]
    if row.empty or not int(row["calls"].iloc[0]):
        return None
    return float(row["cpu_total_us"].iloc[0]) / int(row["calls"].iloc[0])


def kernel_us_per_call(trace: Trace) -> float | None:
    """The summed time of one call's GPU kernels (memsets and copies left out), the median over the profiled
    steps; None for a profile without GPU kernels (a CPU runs each operator inline)."""
    kernels = trace.kernels(allow_empty=True)
    kernels = kernels[kernels["kind"] == "kernel"]
    if kernels.empty:
        return None
    return float(kernels.groupby("step")["duration_us"].sum().median())


def backend_times_sentence(
    rounds_ms: Mapping[str, Sequence[float]],
    kernel_us: Mapping[str, float | None],
    host_us: Mapping[str, float | None] | None = None,
    factor: float = 1.5,
    spread: float = 1.25,
) -> str:
    """Whether each backend's timed rounds (`rounds_ms`) measured its kernel (`kernel_us`, one profiled call) plus
    the host's per-call cost (`host_us`: the SDPA call's CPU time, where profiled). A backend is said slowed by something
    else only on evidence: its rounds spread wider than `spread` (slowest over fastest), or its wall time more than
    `factor` times its kernel with an excess over the kernel more than `factor` times the host's time (without
    host times: more than `factor` times the smallest excess of all backends, the per-call cost they share)."""
    known = {n: float(k) for n, k in kernel_us.items() if _known(k)}
    missing = [n for n in known if n not in rounds_ms]
    if missing:
        raise ValueError(f"no rounds for {', '.join(map(repr, missing))}; have {', '.join(rounds_ms)}")
    if not known:
        return (
            "No kernel time was profiled beside these rounds (a CPU runs each call inline, launching no kernels), "
            "so nothing checks them against a kernel."
        )
    host = {n: float(h) for n, h in (host_us or {}).items() if _known(h) and n in known}
    rounds_us = {n: [1e3 * float(x) for x in rounds_ms[n]] for n in known}
    wall = {n: statistics.median(rounds_us[n]) for n in known}
    excess = {n: wall[n] - known[n] for n in known}
    floor = min(excess.values())
    wide = {n for n in known if max(rounds_us[n]) > spread * min(rounds_us[n])}
    far = {
        n
        for n in known
        if wall_rounds_disturbed(rounds_us[n], None, known[n], factor, host.get(n))
        and (n in host or excess[n] > factor * max(floor, 0.0))
    }
    slowed = [n for n in known if n in wide or n in far]
    calm = [n for n in known if n not in slowed]
    lo, hi = (min(host.values()), max(host.values())) if host else (0.0, 0.0)
    cpu = (
        f"SDPA's dispatch on the CPU ({f'{lo:,.0f}' if round(lo) == round(hi) else f'{lo:,.0f} to {hi:,.0f}'} us of "
        "CPU a call in the profiled calls, the profiler's own cost included), the launch and the synchronise after "
        "each call"
    )
    if not slowed:
        ratio = max(known, key=lambda n: wall[n] / known[n])
        shortest = (
            f" A cost of that size is most of a short kernel's call: {ratio} took {wall[ratio] / known[ratio]:.1f}x "
            "its kernel on the clock."
            if wall[ratio] > factor * known[ratio]
            else ""
        )
        whose = (
            f"That is the host's per-call cost: {cpu}, not other programs' work."
            if all(n in host for n in known)
            else "A cost the backends share comes per call, not per unit of work: the host's dispatch, launch and "
            "synchronise, or other programs' work all through the rounds; no CPU time was profiled here to tell which."
        )
        return (
            "Every backend's wall time per call is its kernel time (`kernel_us`, one profiled call) plus about the "
            f"same per-call cost: {', '.join(f'{n} {excess[n]:+,.0f} us' for n in known)}, each backend's rounds within {spread:g}x of one another. {whose}"
            f"{shortest} Compare the kernels by `kernel_us`; `ms_per_call` is what one synchronised call costs."
        )

    def why(n: str) -> str:
        parts = [f"{wall[n] / known[n]:.1f}x, {excess[n]:,.0f} us more"]
        if n in host:
            parts.append(f"against {host[n]:,.0f} us of CPU for the call")
        if n in wide:
            parts.append(f"rounds from {min(rounds_us[n]):,.0f} to {max(rounds_us[n]):,.0f} us")
        return f"{n} {wall[n]:,.0f} us a call against {known[n]:,.0f} us in its kernel ({'; '.join(parts)})"

    rest = (
        f" Not flagged: {', '.join(f'{n} {excess[n]:+,.0f} us over its kernel ({wall[n] / known[n]:.2f}x)' for n in calm)}"
        f", within {factor:g}x of the kernel or of the per-call cost the backends share."
        if calm
        else ""
    )
    return (
        "**Rounds slowed by something else on this GPU (other work, or its clocks):** "
        f"{'; '.join(why(n) for n in slowed)}. The host's dispatch, a launch and a synchronise cost every backend "
        "about the same per call; time far beyond that, or rounds that disagree, comes from outside these calls "
        f"(other programs' work, or the clocks), so `ms_per_call` is not these backends' speed. Compare them by "
        f"`kernel_us`.{rest}"
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
    row["rounds_overlap"] = max(min(rounds_ms["causal"]), min(rounds_ms["full"])) <= min(
        max(rounds_ms["causal"]), max(rounds_ms["full"])
    )
    row["flops_ratio"] = flops_ratio
    return row


def overlapping_rounds_sentence(table: pd.DataFrame) -> str:
    """A sentence naming each length whose causal and full rounds overlap (this run cannot order the two there,
    whatever the ratio of their fastest rounds says); empty when every length's rounds are apart."""
    if "rounds_overlap" not in table:
        raise ValueError("give the table of causal_timing_row rows (it has no rounds_overlap column)")
    rows = table[table["rounds_overlap"].astype(bool)]
    if rows.empty:
        return ""
    parts = [f"seq {int(r.seq)} (causal {r.causal_range} ms, full {r.non_causal_range} ms)" for r in rows.itertuples()]
    return (
        f"**This run's rounds overlap at {' and '.join(parts)}:** something else on this machine (other work, or its "
        "clocks) moved them more than "
        "masking did, so this run cannot tell the two apart there, whatever their time_ratio says. "
    )


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
                f" On the clock each call took far longer than its kernel ({extra}): time outside the kernel (the "
                "host's dispatch and synchronise, and on a shared GPU any other work inside the rounds) added to "
                "both sides, which pulls the wall-clock ratio towards 1. That is per-call overhead, not tiles: the kernel ratio is what the "
                "tiles explain."
            )
    return text


def sweep_growth_sentence(sweep: pd.DataFrame, versions: Mapping[str, str] | None = None) -> str:
    """How each timed version of the score sweep (``seq``, ``gflop`` and one ms column per version) grew against
    its work from the shortest to the longest length. A time that grew less than half as much as the work, or fell
    between lengths, is mostly a per-call cost: the lengths where it took more than twice its longest length's time
    scaled down by the work are named, and the plot is then read for its order of magnitude."""
    versions = dict(versions or {"manual_ms": "the hand-written version", "sdpa_ms": "SDPA"})
    missing = [c for c in ("seq", "gflop", *versions) if c not in sweep.columns]
    if missing or len(sweep) < 2:
        raise ValueError(f"give at least two lengths of score_sweep's rows; missing columns {missing}")
    first, last = sweep.iloc[0], sweep.iloc[-1]
    work = float(last.gflop / first.gflop)
    grew = {c: float(last[c] / first[c]) for c in versions}
    # a fixed cost at least as large as the arithmetic at the shortest length halves the growth
    flat = [c for c in versions if grew[c] < work / 2 or not sweep[c].is_monotonic_increasing]
    text = (
        f"Between seq {first.seq:.0f} and {last.seq:.0f} the work (causal FLOPs) grew {work:.0f}x, the time per call of "
        + ", of ".join(f"{versions[c]} {grew[c]:.1f}x" for c in versions)
        + "."
    )
    # between half and three quarters of the work's growth: a fixed cost is a visible part of the shortest length
    lag = [c for c in versions if c not in flat and grew[c] < 0.75 * work]
    lagging = (
        f" {' and '.join(versions[c] for c in lag)} grew less than the work: part of {'its' if len(lag) == 1 else 'their'}"
        f" time at seq {first.seq:.0f} is a per-call cost, not arithmetic."
        if lag
        else ""
    )
    if not flat:
        return text + (
            " Each time grew with its work, if not in exact step (caches, memory and other programs move it): the "
            f"slopes of the plot show how the time grows with the sequence.{lagging}"
        )
    short = []
    for c in flat:
        scaled = float(last[c]) * sweep["gflop"] / float(last.gflop)  # the time the work alone would give
        over = sweep[sweep[c] > 2 * scaled]
        if len(over):
            short.append(
                f"{versions[c]} took {' and '.join(f'{t:.2f}' for t in over[c])} ms at seq "
                f"{' and '.join(f'{s:.0f}' for s in over['seq'])}, "
                f"{' and '.join(f'{t / w:.1f}x' for t, w in zip(over[c], scaled[over.index], strict=True))} its time "
                f"at seq {last.seq:.0f} scaled down by the work"
            )
    names = " and ".join(versions[c] for c in flat)
    where = f" ({'; '.join(short)})" if short else ""
    return text + (
        f" The time of {names} did not follow the work{where}: a call carries a fixed cost that is not its "
        "arithmetic (dispatch and launch, on a GPU the synchronise after each call, and other programs' work on a "
        "shared machine), and at those short lengths that cost is most of the time. Read the plot for its order of "
        f"magnitude, not for a growth rate; the kernel times of section 3 are the kernels' own.{lagging}"
    )
