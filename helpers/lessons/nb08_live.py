"""Lesson 08's sentences over live numbers: each verdict is computed from the numbers shown (a tie when the
rounds overlap), so a noisy shared GPU cannot make fixed prose say the opposite of its table. Plain numbers in,
text out; the notebook reaches these through :mod:`helpers.lessons.nb08`."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch

from ..programs import line_shown
from .rounds import noise_why, spread_of, take_turns, too_close, two_readings_note  # noqa: F401 (nb08.live's name)
from .wording import sentence_start

# Lines of the decoder benchmark's log that answer a question the lesson asks later (the transfer variant's
# speedup) or judge the project's targets (not a learner's business): left out of what the notebook prints.
_HIDDEN_PREFIXES = ("exercise variant:", "[met]", "[NOT met]", "[not measured]")


def benchmark_line_shown(line: str) -> bool:
    """Whether a line of ``python -m benchmarks decoder`` is printed in the lesson: not the exercise variant's
    measured fix, not the targets' verdicts, not the profiler's tracing notices."""
    return line_shown(line, hidden_prefixes=_HIDDEN_PREFIXES)


def cpu_side_averages(events: Iterable[Any]) -> dict[str, Any]:
    """``{key: row}`` of ``prof.key_averages()`` keeping the CPU-side row of each key: on a GPU a
    ``record_function`` scope also has a GPU-side row of the same key, with no CPU time."""
    out: dict[str, Any] = {}
    for e in events:
        if getattr(e, "device_type", torch.autograd.DeviceType.CPU) == torch.autograd.DeviceType.CPU:
            out[e.key] = e
    return out


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


# The share of a step spent waiting on the CPU from which a profiled step is called CPU bound, and the gap between
# a profiled and an unprofiled reading under which the profiler is said to barely show: both printed with the verdict.
CPU_BOUND_SHARE = 0.1
PROFILER_SHOWS = 0.1


def prefill_idle_text(idle: float, cpu_bound: float) -> str:
    """How the GPU spent a profiled prefill, from its idle share and the CPU-bound part of it (fractions of the
    step): ahead of the GPU when little of the step waits on the CPU, else said to be CPU bound."""
    idle, cpu_bound = _number("idle", idle), _number("cpu_bound", cpu_bound)
    if cpu_bound < CPU_BOUND_SHARE:
        return (
            f"the GPU idle for {idle:.1%} of it, {cpu_bound:.1%} of the step waiting for the CPU (under "
            f"{CPU_BOUND_SHARE:.0%}): on this run the CPU queues kernels ahead of the GPU"
        )
    return (
        f"the GPU idle for {idle:.1%} of it, {cpu_bound:.1%} of the step waiting for the CPU to launch the next "
        f"kernel (*idle: CPU-bound*, {CPU_BOUND_SHARE:.0%} or more): on this run, profiled, the CPU does not keep "
        "ahead of the GPU (a CPU shared with other work makes this swing from run to run)"
    )


def _rounds(name: str, values: Sequence[float]) -> list[float]:
    out = [_number(name, v) for v in values] if isinstance(values, Sequence) and not isinstance(values, str) else []
    if not out:
        raise ValueError(f"{name} must be a non-empty list of numbers")
    return out


def ranked_with_ties(
    times: Mapping[str, Sequence[float]], unit: str = "us", disturbed: Sequence[str] = (), disturbance: float = math.inf
) -> str:
    """Each option's median and middle half of its rounds (first to third quartile: what the tie rule compares),
    then each pair's verdict with the rule's reason: faster only when the medians differ by more than the larger
    middle half, else a tie (:func:`.rounds.too_close`). A pair with a `disturbed` option is ranked only when every
    round of one is more than `disturbance` times every round of the other (:func:`disturbance_factor`), else left
    unranked with the reason."""
    if not isinstance(times, Mapping) or len(times) < 2:
        raise ValueError("pass at least two options, {name: [round, ...]}")
    if isinstance(disturbance, bool) or not isinstance(disturbance, (int, float)) or not disturbance >= 1:
        raise ValueError(f"disturbance must be a factor of at least 1, got {disturbance!r}")
    rounds = {str(k): _rounds(str(k), v) for k, v in times.items()}
    spreads = {k: spread_of(v) for k, v in rounds.items()}
    # the middle half, not min-max: the tie rule reads quartiles, so the numbers on screen are the ones it weighed
    shown = "; ".join(f"{k} {s.median:,.0f} {unit} (middle half {s.q1:,.0f}-{s.q3:,.0f})" for k, s in spreads.items())
    names = list(rounds)
    verdicts = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            sa, sb = spreads[a], spreads[b]
            fast, slow = (a, b) if sa.median < sb.median else (b, a)
            if a in disturbed or b in disturbed:
                apart = min(rounds[slow]) / max(rounds[fast]) if max(rounds[fast]) > 0 else 0.0
                if apart > disturbance:
                    ratio = max(sa.median, sb.median) / min(sa.median, sb.median)
                    verdicts.append(
                        f"{fast} is faster than {slow} even so ({ratio:.1f}x; {fast}'s slowest round is {apart:.1f}x "
                        f"shorter than {slow}'s fastest, beyond the {disturbance:.2f}x by which this run was disturbed)"
                    )
                else:
                    verdicts.append(
                        f"{a} and {b} are not ranked: this run was disturbed (a synchronised step shorter than its "
                        "profiled kernels)"
                    )
            elif too_close(sa, sb):
                verdicts.append(f"{a} and {b} are too close to call here ({noise_why(sa, sb, unit)})")
            else:
                verdicts.append(f"{fast} is faster than {slow} ({noise_why(sa, sb, unit)})")
    said = "; ".join(verdicts)
    return f"{shown}. {sentence_start(said)}."


def profiler_cost_text(profiled: float | Sequence[float], rounds: Sequence[float], unit: str = "ms") -> str:
    """The profiled step (one figure, or rounds taken in turns with the unprofiled ones) against unprofiled rounds:
    within noise when :func:`.rounds.too_close` says so (the difference inside the rounds' spread), else the
    profiler's cost (or a shorter profiled step) as a percentage of the medians."""
    profiled = _number("profiled", profiled) if isinstance(profiled, (int, float)) else _rounds("profiled", profiled)
    rounds = _rounds("rounds", rounds)
    median = statistics.median(rounds)
    if too_close(profiled, rounds):
        why = noise_why(spread_of(profiled), spread_of(rounds), unit)
        return f"the profiled step is too close to call against the unprofiled rounds ({why}): the profiler's cost is within noise."
    change = statistics.median(profiled if isinstance(profiled, list) else [profiled]) / median - 1
    if change < 0:
        return f"the profiled step was {-change:.0%} shorter than the unprofiled median: within the noise of a shared machine."
    return f"the profiler added {change:.0%}."


def replay_window_text(profiled_us: Sequence[float], unprofiled_us: Sequence[float]) -> str:
    """Replayed decode steps, profiled window against unprofiled step: within ``PROFILER_SHOWS`` the profiler has
    little to slow down; further apart, the two readings disagree more than a profiler explains."""
    pairs = list(zip(_rounds("profiled_us", profiled_us), _rounds("unprofiled_us", unprofiled_us), strict=True))
    off = max(abs(p / u - 1) for p, u in pairs)
    if off < PROFILER_SHOWS:
        return (
            f"The profiled windows are within {_percent_up(off)} of the unprofiled steps: a replayed step leaves the CPU "
            "no work per kernel, so the profiler has little to slow down (unlike the eager step)."
        )
    return (
        f"The profiled windows and the unprofiled steps differ by up to {_percent_up(off)}. A replayed step leaves the CPU "
        "no work per kernel for the profiler to slow down, so a gap that large is not the profiler's: the GPU did "
        "not run alike for the two (other work on it, or its clocks), a cause this notebook cannot check (compare the kernel time with the unprofiled "
        "step). Rerun both on an idle GPU before reading a difference here."
    )


def _percent_up(share: float) -> str:
    """`share` as a percentage rounded up to one decimal, so "within" it is true of the share itself."""
    return f"{math.ceil(round(share * 1000, 6)) / 10:.1f}%"


def two_figures(x: float) -> float:
    """`x` rounded to two significant figures (2,179 -> 2,200): a ratio of two noisy timings supports no more."""
    x = _number("x", x)
    return 0.0 if x == 0 else round(x, 1 - math.floor(math.log10(abs(x))))


def lowest_reading(what: str, rounds: Sequence[float], unit: str = "us") -> tuple[float, str]:
    """The lowest of several unprofiled readings of one step (a shared GPU only ever adds time) and, when the
    rounds disagree by more than 20%, the note saying so where the number is first used."""
    rounds = _rounds("rounds", rounds)
    low, high = min(rounds), max(rounds)
    note = two_readings_note(what, high, "in the slowest round", low, "in the fastest", unit=unit) if low > 0 else ""
    if note:
        note += " The figures below use the lowest: a disturbance (other work, or a slower clock) only ever adds time."
    return low, note


def speedup_text(before_us: Sequence[float], after_us: Sequence[float], tolerance: float = 0.2) -> str:
    """A speedup from every reading of the step before and after a fix: the range the readings allow ("10.9x to
    11.0x"; one figure when both ends round alike), with its cause when they disagree by more than `tolerance`
    (the machine was shared)."""
    before, after = _rounds("before_us", before_us), _rounds("after_us", after_us)
    if min(before + after) <= 0:
        raise ValueError("readings must be positive")
    low, high = min(before) / max(after), max(before) / min(after)
    if high / low - 1 <= tolerance:  # a range, so a table dividing any one pair of these readings sits inside it
        return f"{low:.1f}x" if f"{low:.1f}" == f"{high:.1f}" else f"{low:.1f}x to {high:.1f}x"
    return (
        f"between {low:.1f}x and {high:.1f}x (the readings of this notebook disagree: the GPU did not run alike for "
        "them, through other work or its clocks, so no single figure)"
    )


def above_bound_note(what: str, bound_us: float, measured_us: float, where: str) -> str:
    """A note when a step measured without the profiler exceeds the upper bound taught for it: its own work
    cannot push it there, so the GPU was shared while it was timed (empty at or under the bound)."""
    bound, measured = _number("bound_us", bound_us), _number("measured_us", measured_us)
    if measured <= bound:
        return ""
    return (
        f" {sentence_start(what)} measured {where}, {measured:,.0f} us, is above its predicted upper bound "
        f"({bound:,.0f} us): the step's own kernels and gaps cannot put it there, so the GPU did not run alike "
        "while it was timed (other work on it, or its clocks). Take the lower reading."
    )


def kernel_time_moved_note(what: str, a_us: float, a_where: str, b_us: float, b_where: str) -> str:
    """A note when the kernel time of one step, profiled twice, moved by more than 20%: kernel times barely change
    on an idle GPU, so the GPU itself was shared (empty when the two agree)."""
    a, b = _number("a_us", a_us), _number("b_us", b_us)
    if a <= 0 or b <= 0:
        raise ValueError(f"kernel times must be positive, got {a} and {b}")
    if max(a, b) / min(a, b) - 1 <= 0.2:
        return ""
    return (
        f" The kernel time itself moved: {what} {a:,.0f} us {a_where} against {b:,.0f} us {b_where} "
        f"({max(a, b) / min(a, b):.2f}x). The same kernels barely change from run to run on an idle GPU, so this GPU "
        "did not run alike for the two profiles (other work on it, or its clocks), a cause this notebook cannot "
        "check: read neither as the step's own."
    )


def disturbed_options(unprofiled_us: Mapping[str, float], kernel_us: Mapping[str, float]) -> list[str]:
    """The options whose synchronised step, timed without the profiler, took less than its own kernels in the
    profile: impossible on one undisturbed GPU, so the run was disturbed."""
    return [k for k, v in unprofiled_us.items() if k in kernel_us and _number(k, v) < _number(k, kernel_us[k])]


def live_vs_recorded_text(
    live: Mapping[str, Mapping[str, float]],
    recorded: Mapping[str, Mapping[str, float]],
    tolerance: float = 0.2,
    *,
    gpus: tuple[str, str] | None = None,
    pct_of_floor: tuple[Mapping[str, float], Mapping[str, float]] | None = None,
) -> str:
    """Each live row against the recording as a ratio to eager in its own run, per column
    ``{column: {configuration: value}}``. Rows off by more than `tolerance` are named as a shared GPU's only when
    both runs used the same GPU (`gpus`: live, recorded; unknown when None); on two GPUs they are named as such,
    with each run's decode against its own weight-read floor (`pct_of_floor`: live, recorded) beside them."""
    off = []
    for column, rows in live.items():
        base, ref = rows.get("eager"), recorded.get(column, {})
        if base is None or ref.get("eager") is None:
            continue
        for name, value in rows.items():
            if name == "eager" or name not in ref or not all(map(math.isfinite, (value, ref[name]))):
                continue
            here, there = _number(name, value) / _number("eager", base), ref[name] / _number("eager", ref["eager"])
            if max(here, there) / min(here, there) - 1 > tolerance:
                off.append(f"{name} {column} {here:.2f}x eager here against {there:.2f}x in the recording")
    two_gpus = gpus is not None and gpus[0] != gpus[1]
    if not off:
        on = f", although they ran on two GPUs ({gpus[0]} here, {gpus[1]} recorded)" if two_gpus else ""
        return f"Live against recorded: every live row is within {tolerance:.0%} of the recording, as a ratio to eager{on}."
    head = (
        f"Live against recorded, as a ratio to eager in each run: {'; '.join(off)} (more than {tolerance:.0%} apart)."
    )
    if not two_gpus:
        return head + (
            " The same code on the same kind of GPU: the live rows did not run as the recording did (other work on "
            "this GPU, or its clocks), so the reading below is of the recording."
        )
    return (
        f"{head} The live run is on an {gpus[0]}, the recording on an {gpus[1]}: two GPUs on two hosts, so these "
        "ratios need not agree (an eager decode step waits on its host's CPU, a graphed one on its GPU), and "
        "they do not say the live rows were slowed." + _floor_clause(pct_of_floor) + " The reading below is of the "
        "recording, whose bounds come from traces of the same GPU."
    )


def _floor_clause(pct_of_floor: tuple[Mapping[str, float], Mapping[str, float]] | None) -> str:
    """Each configuration's decode as a percentage of its own GPU's weight-read floor, live against recorded."""
    if pct_of_floor is None:
        return ""
    here, there = pct_of_floor
    both = [k for k in here if k in there and all(map(math.isfinite, (_number(k, here[k]), _number(k, there[k]))))]
    if not both:
        return ""
    each = "; ".join(f"{k} {here[k]:.0f}% here against {there[k]:.0f}% in the recording" for k in both)
    return f" Against each GPU's own weight-read floor, decode reached: {each}."


def disturbance_factor(unprofiled_us: Mapping[str, float], kernel_us: Mapping[str, float]) -> float:
    """How far the most disturbed option's profiled kernels exceed its unprofiled step (kernels / step; 1.0 when no
    option is disturbed): how much one reading of this run may be off."""
    bad = disturbed_options(unprofiled_us, kernel_us)
    return max((_number(k, kernel_us[k]) / _number(k, unprofiled_us[k]) for k in bad), default=1.0)


def disturbed_note(unprofiled_us: Mapping[str, float], kernel_us: Mapping[str, float]) -> str:
    """The sentence flagging :func:`disturbed_options` (empty when there are none)."""
    bad = disturbed_options(unprofiled_us, kernel_us)
    if not bad:
        return ""
    each = "; ".join(f"{k} {unprofiled_us[k]:,.0f} us against {kernel_us[k]:,.0f} us" for k in bad)
    return (
        f" A disturbed run: without the profiler, the synchronised step took less than its own kernels in the profile "
        f"({each}). A step cannot beat its kernels, so the GPU did not run alike for the two (other work on it, or its "
        f"clocks): a pair with one of these options is ranked only where every round of one is more than "
        f"{disturbance_factor(unprofiled_us, kernel_us):.2f}x every round of the other (the most a step fell short "
        "of its kernels)."
    )
