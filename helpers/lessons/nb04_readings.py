"""Lesson 04: the sentences of sections 5 and 6b, each decided by a function that says when the numbers on screen
cannot carry a verdict (something else on the machine slowed them)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Number

from .exercises import BUSY, Tie

# A call is GPU bound when back to back it stays within this factor of its kernel time: the section 6b markdown
# and the summary state the same rule.
SLACK = 1.1
# A kernel "near the memory roof" reaches at least this share of it.
NEAR_ROOF_PCT = 85.0


@dataclass(frozen=True)
class Reading:
    """Which side set the pace of one variant: ``bound`` is ``"GPU"``, ``"CPU"`` or ``"unclear"``; ``notes`` say
    why the rounds cannot be read (only when unclear); ``sync_disturbed`` when the synchronised rounds themselves
    were slowed by something else on the machine (then no pay-back can be computed from them)."""

    bound: str
    notes: tuple[str, ...] = ()
    sync_disturbed: bool = False


def _times(name: str, values: Sequence[float]) -> list[float]:
    out = [float(v) for v in values] if isinstance(values, Sequence) else []
    if not out or not all(math.isfinite(v) and v > 0 for v in out):
        raise ValueError(f"{name} must be a non-empty list of positive finite times in us, got {values!r}")
    return out


def _time(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, Number) or not math.isfinite(float(value)) or value <= 0:
        raise ValueError(f"{name} must be a positive finite time in us, got {value!r}")
    return float(value)


def read_bound(
    kernel_us: float,
    back_to_back_us: Sequence[float],
    synchronised_us: Sequence[float],
    profiled_cpu_us: float,
    slack: float = SLACK,
) -> Reading:
    """GPU bound when the fastest and the median back-to-back round stay within `slack` x the kernel time; CPU
    bound when even the fastest round is above it and the host's work under the profiler explains that pace;
    ``"unclear"`` (with notes) when the numbers contradict each other: back to back above synchronised, a
    synchronised call longer than host and kernels in series, a median far above the fastest round, or an
    unprofiled pace slower than the host's profiled work."""
    kernel, cpu = _time("kernel_us", kernel_us), _time("profiled_cpu_us", profiled_cpu_us)
    b2b, sync = _times("back_to_back_us", back_to_back_us), _times("synchronised_us", synchronised_us)
    fastest, median, sync_median = min(b2b), statistics.median(b2b), statistics.median(sync)
    notes, sync_disturbed = [], False
    if median > sync_median:
        notes.append(
            f"back to back took {median:.0f} us per call, more than synchronised ({sync_median:.0f} us), yet calls "
            "that wait for each result cannot be faster than calls that don't"
        )
        sync_disturbed = True
    if sync_median > slack * (cpu + kernel):
        notes.append(
            f"a synchronised call took {sync_median:.0f} us, more than the host's work under the profiler and the "
            f"kernels one after the other ({cpu + kernel:.0f} us)"
        )
        sync_disturbed = True
    if fastest <= slack * kernel:
        bound = "GPU"
        if median > slack * kernel:
            notes.append(
                f"the fastest round ({fastest:.0f} us) matches the kernel time ({kernel:.0f} us) but the median "
                f"({median:.0f} us) is {median / kernel - 1:.0%} above it"
            )
    else:
        bound = "CPU"
        if cpu < fastest:
            notes.append(
                f"under the profiler the host's work took {cpu:.0f} us per call, less than the fastest unprofiled "
                f"round ({fastest:.0f} us): the profiler only adds host work, so the host cannot have set that pace"
            )
    return Reading("unclear", tuple(notes), sync_disturbed) if notes else Reading(bound)


def bound_of(reading: Reading | str) -> str:
    """``"GPU"``, ``"CPU"`` or ``"unclear"`` from a :class:`Reading` or that string."""
    bound = reading.bound if isinstance(reading, Reading) else reading
    if bound not in ("GPU", "CPU", "unclear"):
        raise ValueError(f"a bound is 'GPU', 'CPU' or 'unclear', got {reading!r}")
    return bound


def end_to_end_why(
    readings: Mapping[str, Reading | str],
    host_us: Mapping[str, float] | None = None,
    compiled_faster: bool | Tie | None = None,
    recorded: bool = False,
) -> str:
    """The explanation of the end-to-end check from ``{"eager": reading, "compiled": reading}``
    (:func:`read_bound`), the host's work per call under the profiler and the check's result; ``recorded``: the
    readings come from a recording of another machine, not from this run."""
    if set(readings) != {"eager", "compiled"}:
        raise ValueError(f"readings must map 'eager' and 'compiled' to a reading, got {dict(readings)!r}")
    bound = {k: bound_of(v) for k, v in readings.items()}
    unclear = [k for k in ("eager", "compiled") if bound[k] == "unclear"]
    if unclear:
        notes = "; ".join(f"{k}: {'; '.join(readings[k].notes)}" for k in unclear if isinstance(readings[k], Reading))
        return (
            f"The machine was too unsteady to tell here whether the CPU or the GPU set the pace of {' and '.join(unclear)}"
            + (f" ({notes})" if notes else "")
            + ". Something else on the machine (other work, or its clocks) slowed these rounds: read them as this "
            "run's, not as the workload's."
        )
    if isinstance(compiled_faster, Tie):
        # a tie argues no side: what set the pace is said, not which variant it favours
        eager, compiled = bound["eager"], bound["compiled"]
        paces = (
            f"the {eager} set the pace of both"
            if eager == compiled
            else f"the {eager} set the pace of eager, the {compiled} that of compiled"
        )
        rounds = "the recording keeps one number per variant, so it" if recorded else "these rounds"
        return (
            f"{'In the recording' if recorded else 'Back to back'}, {paces}; {rounds} cannot tell which of the two "
            "is faster back to back."
        )
    if set(bound.values()) == {"GPU"}:
        return (
            "Back to back, the GPU was busy all the time here: the wall time per call follows the kernel time, and "
            "the fused kernel saves device time. Host work (guards, wrappers) hides behind the queue."
        )
    cpu = " and ".join(k for k in ("eager", "compiled") if bound[k] == "CPU")
    text = (
        f"Back to back, {cpu} waited for the CPU here: even the fastest round took longer than the kernels, so the "
        "wall time follows the host's work (Python, guards, wrappers, launches) more than the kernel time, and the "
        "fused kernel's saving shows only where the host keeps ahead of the GPU."
    )
    if compiled_faster is True and bound["compiled"] == "CPU" and host_us and host_us["compiled"] > host_us["eager"]:
        text += (
            f" Yet compiled was faster although its host work is the larger ({host_us['compiled']:.0f} against "
            f"{host_us['eager']:.0f} us per call under the profiler): the host's work does not explain that "
            "difference, so read it as this run's."
        )
    return text


def end_to_end_expected(verdict: bool | Tie, readings: Mapping[str, Reading | str]) -> bool | Tie:
    """The check's expected answer: the rounds' verdict (a spread tie stays one), or a :data:`BUSY` Tie when rounds
    told apart by the spread rule could not be read (something else on the machine slowed them): "too close to
    call" is that rule's word."""
    unclear = [k for k, r in readings.items() if bound_of(r) == "unclear"]
    if isinstance(verdict, Tie) or not unclear:
        return verdict
    return Tie(
        f"The back-to-back rounds of {' and '.join(unclear)} were slowed by something else on the machine "
        "(other work, or its clocks: see the notes below), so they measure the machine, not compile",
        status=BUSY,
    )


def profiler_sentence(reading: Reading | str, kernel_us: float, profiled_cpu_us: float, fastest_us: float) -> str:
    """What the host's time under the profiler says next to the unprofiled rounds; never a negative profiler cost."""
    bound = bound_of(reading)
    cpu, kernel, fastest = (_time(n, v) for n, v in (("profiled_cpu_us", profiled_cpu_us), ("kernel_us", kernel_us),
                                                     ("fastest_us", fastest_us)))  # fmt: skip
    head = f"Under the profiler, a compiled call spent {cpu:.0f} us on the CPU: "
    if bound == "GPU":
        if cpu > kernel:
            return head + "more than its kernels take, which is how the profile makes it look CPU bound when it is not."
        return head + "less than its kernels take: even under the profiler the host kept ahead of the GPU."
    if bound == "CPU":
        return head + (
            f"{cpu - fastest:.0f} us more than its fastest unprofiled round: with the host setting the pace, that "
            "difference is the profiler's own cost."
        )
    return head + "no profiler cost can be read against rounds that something else on the machine slowed."


def synchronised_sentence(b2b_us: Mapping[str, float], sync_us: Mapping[str, float]) -> str:
    """The synchronised times, said to add the host's work on top only where they are above back to back."""
    keys = ("compiled", "eager")
    if set(b2b_us) != set(keys) or set(sync_us) != set(keys):
        raise ValueError("give back-to-back and synchronised medians for 'compiled' and 'eager'")
    times = f"{sync_us['compiled']:.0f} us compiled, {sync_us['eager']:.0f} us eager"
    above = [k for k in keys if b2b_us[k] > sync_us[k]]
    if not above:
        return (
            f"Synchronised after every call: {times}. Every microsecond the host spends before the first kernel "
            "starts, and the wait for the result, add to the kernels; the rest of the host's work overlaps them."
        )
    return (
        f"Synchronised after every call: {times}. Back to back, {' and '.join(above)} took longer than that "
        f"({', '.join(f'{b2b_us[k]:.0f} us' for k in above)}): calls that do not wait cannot be slower than calls "
        "that do, so something else on the machine (other work, or its clocks) slowed those rounds."
    )


def sync_host_clause(kernel_us: Mapping[str, float], sync_median_us: Mapping[str, float]) -> str:
    """Why a synchronised compiled call is slower than eager, said only when the numbers show it: its kernels take
    less time yet the call more, so the difference is host work the caller waits for. Otherwise ``""``."""
    keys = {"compiled", "eager"}
    if set(kernel_us) != keys or set(sync_median_us) != keys:
        raise ValueError("give kernel times and synchronised medians for 'compiled' and 'eager'")
    k = {n: _time(f"kernel_us[{n!r}]", kernel_us[n]) for n in keys}
    s = {n: _time(f"sync_median_us[{n!r}]", sync_median_us[n]) for n in keys}
    if not (k["compiled"] < k["eager"] and s["compiled"] > s["eager"]):
        return ""
    host = {n: s[n] - k[n] for n in keys}
    return (
        f" Its kernels take less time ({k['compiled']:.0f} against {k['eager']:.0f} us in the profile), so the "
        f"difference is host work: a synchronised call waits {host['compiled']:.0f} us beyond its kernels compiled "
        f"against {host['eager']:.0f} us eager, because the host's work before the first kernel (guards, wrappers) "
        "lands in the call instead of hiding behind a queue."
    )


def about(x: float, digits: int = 2) -> str:
    """`x` to `digits` significant figures with thousands separators (``23989 -> '24,000'``): counts derived from
    a few timed rounds support no more."""
    if isinstance(x, bool) or not isinstance(x, Number) or not math.isfinite(float(x)):
        raise ValueError(f"x must be a finite number, got {x!r}")
    rounded = float(f"{float(x):.{digits}g}")
    return f"{rounded:,.0f}" if abs(rounded) >= 10 ** (digits - 1) else f"{rounded:.{digits}g}"


def compile_seconds_text(seconds: Sequence[float]) -> str:
    """How long the sweep's Inductor compiles took, each time to two significant figures (:func:`about`), so a
    compile of 0.06 s is not printed as 0.1 s."""
    times = [float(s) for s in seconds] if isinstance(seconds, Sequence) and not isinstance(seconds, str) else []
    if not times or not all(math.isfinite(t) and t >= 0 for t in times):
        raise ValueError(f"seconds must be a non-empty list of compile times >= 0, got {seconds!r}")
    low, high = about(min(times)), about(max(times))
    if len(times) == 1:
        return f"The Inductor compile here took {low} s."
    if low == high:
        return f"Each Inductor compile here took about {low} s."
    return f"Each Inductor compile here took {low} to {high} s."


def bytes_sentence(device: str, eager: Mapping[str, float], fused: Mapping[str, float]) -> str:
    """Section 5's reading: the bytes and the time of the eager pair against the fused kernel, and whether both
    run near the memory roof (then the saving is the bytes) or the time falls by less than the bytes."""
    for name, row in (("eager", eager), ("fused", fused)):
        for k in ("mb", "us", "pct"):
            _time(f"{name}[{k!r}]", row[k])
    byte_cut, time_cut = 1 - fused["mb"] / eager["mb"], 1 - fused["us"] / eager["us"]
    head = (
        f"On {device}: the eager pair moves {eager['mb']:.0f} MB in {eager['us']:.0f} us ({eager['pct']:.0f}% of "
        f"the memory roof); the fused kernel {fused['mb']:.0f} MB in {fused['us']:.0f} us ({fused['pct']:.0f}%). "
        f"The bytes fall by {byte_cut:.0%}, the time by {time_cut:.0%}"
    )
    if min(eager["pct"], fused["pct"]) >= NEAR_ROOF_PCT:
        return head + ": both run near the bandwidth, so the saving is the bytes."
    if fused["pct"] < eager["pct"]:
        why = ": the fused kernel runs further from the roof, so the time falls by less than the bytes."
    else:
        why = ": the eager pair runs further from the roof, so the time falls by more than the bytes."
    return head + why + " Fusion saves the bytes; how close a kernel gets to the roof is a question of its code."
