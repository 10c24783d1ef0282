"""Lesson 08's verdicts where two readings of one step meet (profiled against unprofiled, a kernel sum against a
step, the allocator's total against the step's own tensors): one verdict per pair of numbers, computed from them,
so two cells reading the same trace cannot disagree. Plain numbers in, text out; reached as ``nb08.readings``."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from numbers import Real
from pathlib import Path

import pandas as pd

from ..decoder.breakdown import IDLE_ROWS
from ..paths import REPO_ROOT
from .nb08_live import CPU_BOUND_SHARE, PROFILER_SHOWS, two_figures


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _positive(name: str, value: object) -> float:
    out = _number(name, value)
    if out <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return out


def cpu_bound_share(parts: pd.DataFrame) -> float:
    """The *idle: CPU-bound* share of a :func:`nb08.part_breakdown` table (0 when it has no such row)."""
    if not isinstance(parts, pd.DataFrame) or not {"part", "share"} <= set(parts.columns):
        raise TypeError("pass the DataFrame of nb08.part_breakdown(trace)")
    return float(parts.loc[parts["part"] == IDLE_ROWS["cpu-bound"], "share"].sum())


def _gap(profiled_us: float, unprofiled_us: float, cpu_bound: float) -> tuple[str, float, float, float]:
    """``(where, gap, waited, share)``: where a profiled prefill's extra time went: "none", "cpu", "kernels", or
    "either" when the CPU waits could hold it (half the gap or more) yet stayed under ``CPU_BOUND_SHARE``."""
    profiled, unprofiled = _positive("profiled_us", profiled_us), _positive("unprofiled_us", unprofiled_us)
    share = _number("cpu_bound", cpu_bound)
    if not 0 <= share <= 1:
        raise ValueError(f"cpu_bound must be a fraction of the step between 0 and 1, got {cpu_bound!r}")
    gap, waited = profiled - unprofiled, share * profiled
    where = "none" if gap <= 0 else "kernels" if waited < gap / 2 else "cpu" if share >= CPU_BOUND_SHARE else "either"
    return where, gap, waited, share


def kernels_slowed(profiled_us: float, unprofiled_us: float, cpu_bound: float) -> bool:
    """Whether :func:`profiler_gap_cause` puts the profiled prefill's extra time inside the kernels (other work on
    the GPU, its clocks, or the profiler's cost per kernel), or cannot rule that out, and that time is beyond ``PROFILER_SHOWS``
    of the unprofiled step: then this profile's kernel times may be inflated. Below it the lesson calls it noise."""
    where, gap = _gap(profiled_us, unprofiled_us, cpu_bound)[:2]
    return where in ("kernels", "either") and gap > PROFILER_SHOWS * _positive("unprofiled_us", unprofiled_us)


def profiler_gap_cause(profiled_us: float, unprofiled_us: float, cpu_bound: float) -> str:
    """Where a profiled prefill's extra time went, against the same prefill unprofiled: CPU-bound idle (the
    profiler's cost per operator call making the CPU late) only when the step's *idle: CPU-bound* time (`cpu_bound`,
    a fraction of the profiled step) is at least ``CPU_BOUND_SHARE`` and half the gap; inside the kernels when it is
    under half the gap; either of the two, undecided, when it holds half the gap or more under ``CPU_BOUND_SHARE``."""
    where, gap, waited, share = _gap(profiled_us, unprofiled_us, cpu_bound)
    if where == "none":
        return (
            "the profiled prefill was no longer than the unprofiled one: the machine's noise (a shared GPU or CPU) "
            "outweighs the profiler here."
        )
    if where == "cpu":
        return (
            f"the profiled prefill is CPU bound: {waited / 1e3:.2f} ms of it waited for the CPU (*idle: CPU-bound*, "
            f"{share:.1%} of the step), enough to hold most of the {gap / 1e3:.2f} ms the profiler added: its cost at "
            "every operator call made the CPU late."
        )
    if where == "either":  # the CPU waits are large enough to hold the gap: never call them "only"
        size = "at least that gap" if waited >= gap else "more than half of that gap"
        return (
            f"the {gap / 1e3:.2f} ms between the profiled and the unprofiled prefill could come from the CPU: "
            f"{waited / 1e3:.2f} ms of the profiled step waited for it (*idle: CPU-bound*, {share:.1%} of the step), "
            f"{size}, although at under {CPU_BOUND_SHARE:.0%} of the step the CPU stayed ahead of the GPU most of the "
            "time. It could as well be inside the kernels (other work on a shared GPU, its clocks, or the profiler's "
            "own cost per kernel): this run cannot tell which."
        )
    ahead = "so the CPU stayed ahead of the GPU" if share < CPU_BOUND_SHARE else "less than half of the difference"
    return (
        f"the {gap / 1e3:.2f} ms between the profiled and the unprofiled prefill is not explained by CPU-bound idle: "
        f"only {waited / 1e3:.2f} ms of the profiled step waited for the CPU ({share:.1%}), {ahead}. The rest is "
        "inside the kernels: slowed by other work on a shared GPU, its clocks, or the profiler's own cost per kernel."
    )


def prefill_profiler_text(
    profiled_us: float, unprofiled_us: float, kernels: float, queue_latency_us: float, cpu_bound: float
) -> str:
    """Section 2's sentence (it follows "without the profiler ... takes N ms"): the profiler's extra time per kernel
    against the queue latency read from the same trace, then :func:`profiler_gap_cause`."""
    profiled, unprofiled = _positive("profiled_us", profiled_us), _positive("unprofiled_us", unprofiled_us)
    kernels, latency = _positive("kernels", kernels), _number("queue_latency_us", queue_latency_us)
    per_kernel = (profiled - unprofiled) / kernels
    cause = profiler_gap_cause(profiled, unprofiled, cpu_bound)
    if per_kernel <= 0.1 * latency:
        return f": the profiler added almost nothing per kernel here; {cause}"
    times = f", {two_figures(per_kernel / latency):g}x the queue latency" if latency > 0 else ""
    if per_kernel <= 3 * latency:
        latency_note = (
            "That cost is comparable to the queue latency itself (a tenth of it to three times it), so part of the latency read from a profiled "
            "trace may be the profiler's: treat it as an upper bound."
        )
    else:
        latency_note = (
            "The queue latency comes only from gaps where the next kernel was already queued, which a late CPU "
            "does not lengthen; still, read it as an upper bound."
        )
    return f": the profiled one is {per_kernel:.2f} us per kernel longer{times}. On this run {cause} {latency_note}"


def compile_bound_text(
    gemm_us: float, attention_us: float, profiled_us: float, unprofiled_us: float, cpu_bound: float
) -> str:
    """Section 7's bound on ``torch.compile`` for a prefill: its GEMM and attention kernels stay, so it cannot beat
    their sum. A hard bound only when :func:`kernels_slowed` is false; when section 2's verdict is that something else or
    the profiler slowed the kernels, the figure is labelled as this profile's inflated kernel times."""
    gemm, attention = _number("gemm_us", gemm_us), _number("attention_us", attention_us)
    unprofiled, kept = _positive("unprofiled_us", unprofiled_us), gemm + attention
    if gemm < 0 or attention < 0 or kept <= 0:
        raise ValueError(f"kernel times must be non-negative with a positive sum, got {gemm_us!r} and {attention_us!r}")
    slowed = kernels_slowed(profiled_us, unprofiled, cpu_bound)
    if kept >= unprofiled:  # kernels longer than the whole unprofiled step: a disturbed profile bounds nothing
        return (
            f"This profile's GEMM and attention kernels alone take {kept / 1e3:.1f} ms, longer than the whole "
            f"unprofiled prefill ({unprofiled / 1e3:.1f} ms): they were slowed while it was recorded, so they set no "
            "bound on compile here. The final table below takes one from the H200 reference trace."
        )
    if not slowed:
        return (
            f"So compile cannot make this prefill faster than **{kept / 1e3:.1f} ms**, {unprofiled / kept:.2f}x the "
            "unprofiled step at best."
        )
    return (
        f"From this profile's kernel times, which this run may have inflated (see below), compile would leave at least "
        f"{kept / 1e3:.1f} ms, {unprofiled / kept:.2f}x the unprofiled step: not a hard bound, since on an idle GPU "
        "without the profiler those kernels can be shorter. The final table below takes the bound from the H200 "
        "reference trace."
    )


def prefill_against_unprofiled_text(profiled_us: float, unprofiled_us: float, cpu_bound: float) -> str:
    """Section 6's sentence on the same prefill (it follows "the eager prefill takes N ms"): how much longer the
    profiled one is, in plain words, then the same :func:`profiler_gap_cause` as section 2."""
    profiled, unprofiled = _positive("profiled_us", profiled_us), _positive("unprofiled_us", unprofiled_us)
    change = profiled / unprofiled - 1
    if change >= 0:
        size = f"the profiled prefill is {change:.1%} longer"
    else:
        size = f"the profiled prefill is {-change:.1%} shorter"
    hard = f"below about {PROFILER_SHOWS:.0%} the profiler's cost is hard to tell from noise"
    return f"; {size} ({hard}). As in section 2, {profiler_gap_cause(profiled, unprofiled, cpu_bound)}"


def profiler_cost_restated(profiled: float, earlier: float, later: float, unit: str = "ms") -> str:
    """When a later unprofiled reading of the training step disagrees with section 5's: its verdict on the
    profiler's cost rested on the earlier one, so it is restated against both."""
    p, e, late = _positive("profiled", profiled), _positive("earlier", earlier), _positive("later", later)
    return (
        f" So section 5's verdict on the profiler's cost cannot stand: the profiled step ({p:,.0f} {unit}) is "
        f"{p / e:.2f}x section 5's unprofiled median and {p / late:.2f}x this one. The profiler's cost cannot be told "
        "from a machine whose load changes between readings; measure both again, in turns, on an idle one."
    )


def replay_gap_text(unprofiled_us: float, replay_kernel_us: Sequence[float], other_kernel_us: Sequence[float],
                    gaps: float) -> str:  # fmt: skip
    """What the unprofiled replayed step says about the gaps inside a graph: a bound per gap only when the step
    minus the replay's kernel time is beyond how much the same kernels' time moves between the notebook's traces
    (`replay_kernel_us` per step of the replay, `other_kernel_us` per step of other profiles of those kernels)."""
    step, gaps = _positive("unprofiled_us", unprofiled_us), _positive("gaps", gaps)
    if isinstance(replay_kernel_us, str) or isinstance(other_kernel_us, str):
        raise TypeError("kernel times must be lists of numbers")
    replay = [_positive("replay_kernel_us", x) for x in replay_kernel_us]
    if not replay:
        raise ValueError("replay_kernel_us must hold at least one step's kernel time")
    sums = replay + [_positive("other_kernel_us", x) for x in other_kernel_us]
    kernel = sum(replay) / len(replay)
    moves, diff = max(sums) - min(sums), step - kernel
    if len(sums) > 1 and abs(diff) <= moves:
        return (
            f"Without the profiler a replayed step takes {step:,.0f} us, {diff:+,.0f} us against the profiled kernel "
            f"time; but the same kernels' time moves by {moves:,.0f} us between this notebook's profiles "
            f"({min(sums):,.0f} to {max(sums):,.0f} us per step), more than that difference. So no gap can be read "
            "from the unprofiled time, and the two figures do not say whether the profiler lengthens the gaps "
            "inside a graph."
        )
    if diff < 0:
        return (
            f"Without the profiler a replayed step takes {step:,.0f} us, less than its own profiled kernels "
            f"({kernel:,.0f} us): a step cannot beat its kernels, so the GPU did not run alike for the two (other "
            "work on it, or its clocks), and no gap can be read from the two."
        )
    return (
        f"Without the profiler a replayed step takes {step:,.0f} us: at most {diff / gaps:.2f} us per gap. That bound "
        "also holds the graph's launch and the host's time between steps, so it does not say whether the profiler "
        "lengthens the gaps inside a graph."
    )


def gpu_memory_before_text(before_mb: float, peak_mb: float, held_mb: float) -> str:
    """On a GPU, what the trace's *allocated before the trace* row is: memory the caching allocator held when the
    step began, this step's parameters and optimizer state (`held_mb`, from the categories) and the rest of the
    process (the lesson's 1B model, its caches, earlier cells)."""
    before, peak, held = _number("before_mb", before_mb), _positive("peak_mb", peak_mb), _number("held_mb", held_mb)
    if before < 0 or held < 0:
        raise ValueError(f"memory must not be negative, got before_mb={before_mb!r} and held_mb={held_mb!r}")
    if before == 0:
        return "On a GPU the caching allocator counts every byte; here nothing was allocated before the trace began."
    rest = before - held
    split = (
        f": this step's parameters and AdamW state ({held:,.0f} MB in the categories above) and {rest:,.0f} MB more "
        "that the rest of this notebook still holds (the 1B model of sections 1-4, its caches, and what earlier "
        "cells keep alive)"
        if rest > 0
        else f", no more than this step's parameters and AdamW state ({held:,.0f} MB in the categories above)"
    )
    return (
        f"On a GPU the caching allocator's running total counts every byte on the device, so the row *allocated "
        f"before the trace* ({before:,.0f} MB, {before / peak:.0%} of this {peak:,.0f} MB peak) is memory that "
        f"existed before the step began{split}. The step's own allocations are the other rows, and the categories "
        "above count only this training step's tensors."
    )


def repo_relative(path: str | os.PathLike) -> str:
    """`path` as the lesson prints it: relative to the repository (no one's home folder on screen), or as given
    when it lies outside the checkout."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or a path, got {type(path).__name__}")
    path = Path(path)
    try:
        return path.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return path.as_posix()


def share_percent(shares: pd.Series) -> pd.Series:
    """Fractions of a step as percentages to one decimal, with "<0.1" for a share above zero that would round to
    0.0 (a part that ran is not shown as taking nothing)."""
    if not isinstance(shares, pd.Series):
        raise TypeError(f"shares must be a pandas Series of fractions, got {type(shares).__name__}")
    percent = (100 * shares.astype(float)).round(1)
    tiny = (shares > 0) & (percent < 0.1)
    return percent.astype(object).where(~tiny, "<0.1") if tiny.any() else percent


def ran_text(program: str, seconds: float, out: str | os.PathLike) -> str:
    """One line after a program run quietly: how long it ran and where it wrote, relative to the repository."""
    seconds = _number("seconds", seconds)
    return f"{program} ran in {seconds:.0f} s, written to {repo_relative(out)}; its tables are read below."


def run_quietly(run: Callable[[], object], program: str, out: str | os.PathLike, budget_s: float) -> None:
    """Call `run` (a program run without its log on screen) between two lines: what runs and for about how long,
    then :func:`ran_text`."""
    if not callable(run):
        raise TypeError(f"run must be a function of no arguments, got {type(run).__name__}")
    print(f"{program}: running, for up to about {_positive('budget_s', budget_s):.0f} s ...", flush=True)
    start = time.perf_counter()
    run()
    print(ran_text(program, time.perf_counter() - start, out), flush=True)
