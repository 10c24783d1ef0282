"""Lesson 10, Your own model: from trace to fixes: what this notebook alone uses (its exercises, the
diagnosis it teaches, the planted training loop, timing rounds and checkers; a difference inside the
spread of rounds is a tie).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Literal

import pandas as pd
import torch

from ..checks import bounded_int
from ..diagnose import Findings, critical_path, diagnose, path_summary
from ..measure.profile import profile
from ..measure.timing import time_per_call
from ..paths import REPO_ROOT
from ..trace.categories import STEP_PREFIX
from ..trace.model import Trace, check_trace
from .exercises import MISSING, RIGHT, TIE, WRONG, Exercise, Exercises, Feedback, Tie, compare_rounds
from .nb10_readings import (
    RATIO_UNUSABLE,
    call_medians,
    later_reading_note,
    outlier_pieces_text,
    scaled_bound,
    two_savings_note,
)
from .nb10_savings import (
    SAVING_TOLERANCE,
    STEP_NOISE,
    measured_saving,
    missed_reasons,
    noisy_held_text,
    path_sentence,
    prediction_held,
    ratio_text,
    right_method_message,
    scaling_note,
    scaling_verdict,
    too_noisy,
)
from .planted import PROBLEMS, Loop, build_loop, planted_problem
from .rounds import rounds_frame, take_turns

__all__ = [
    "Findings", "PROBLEMS", "RATIO_UNUSABLE", "SAVING_TOLERANCE", "STEP_NOISE", "build_loop", "call_medians",
    "critical_path", "diagnose", "later_reading_note", "measured_saving", "missed_reasons", "noisy_held_text",
    "outlier_pieces_text",
    "path_sentence", "path_summary", "planted_problem", "prediction_held", "ratio_text", "right_method_message",
    "rounds_frame", "scaled_bound", "scaling_note", "scaling_verdict", "too_noisy", "two_savings_note",
]  # fmt: skip

EXERCISES = Exercises(
    "10",
    costliest=Exercise(
        "the costliest planted problem",
        explain="The diagnosis ranks findings by the time the critical path would lose, not by how alarming a line "
        "of code looks. {why}",
        hint="In the findings table, read the column saving_upper_bound_us, from the top, down to the first row "
        "whose rule names a planted problem.",
        guess=True,  # on a shared GPU another process stretches the GPU-time findings, and the order with them
    ),
    profiled_slower=Exercise(
        "the profiler slows the step",
        explain="Every operator the profiler records costs it a few microseconds of bookkeeping, and this step runs "
        "{ops:,.0f} of them. Unprofiled over profiled here: {ratio:.2f}. The profiler never makes a step faster: a "
        "ratio above 1 means something else on the machine (other work, or its clocks) slowed the unprofiled "
        "rounds more.",
        hint="What does the profiler do at the start and end of every operator?",
    ),
    first_saving=Exercise(
        "method for the first fix's saving",  # the method is graded: a right one can still miss the measurement
        explain="The prediction is the finding's bound as it stands: the critical-path time the fix removes, as the "
        "trace shows it. The profiler inflates that time too, by a few microseconds per operator it records, but not "
        "necessarily by the step's ratio: whether one ratio for the whole step scales a bound right is measured, not "
        "assumed (the table of all the fixes below compares both). That table times this fix again, in rounds of "
        "its own, so its verdict on this bound can differ from the one here: both are measurements.",
        hint="Which column of the findings table is the time the critical path would lose with the problem gone, "
        "rather than the time its own events took? And which finding does the first fix remove?",
    ),
    item_saving=Exercise(
        "method for the saving of removing .item()",
        explain="{why}",
        hint="Which rule would point at .item(), and is it in the findings table of this path?",
    ),
    suspicious_rule=Exercise(
        "the finding that claims more than its events took",
        explain="Its bound is {ratio:.0f} times the time of its own events: the rule counts the host time of the "
        "operators around the work, which a fused version would still partly spend.",
        source="computed",
        hint="Divide saving_upper_bound_us by time_us for the top findings.",
    ),
    my_model=Exercise(
        "the top finding on your model",
        explain="{why}",
        hint="The rule names are in the 'rule' column of any findings table above (or 'none').",
        source="computed",
    ),
)
check, hint, summary = EXERCISES.check, EXERCISES.hint, EXERCISES.summary
reveal, answered, evidence = EXERCISES.reveal, EXERCISES.answered, EXERCISES.evidence  # answers once right or asked for
assert_all_correct, reset = EXERCISES.assert_all_correct, EXERCISES.reset


_record = EXERCISES.report


# -- timing ---------------------------------------------------------------------------------------


def step_rounds(steps: Mapping[str, Callable[[], object] | Loop], rounds: int = 5, repeats: int = 10) -> dict[str, list[float]]:  # fmt: skip
    """Microseconds per training step of each variant, unprofiled, `rounds` times, the variants taking turns
    (:func:`take_turns`)."""
    if not isinstance(steps, Mapping) or not steps:
        raise TypeError("steps must be a non-empty dict {label: loop or step function}")
    fns = {k: _step_function(v, k) for k, v in steps.items()}
    return take_turns({k: partial(_us_per_step, fn, repeats) for k, fn in fns.items()}, rounds)


def profiler_rounds(step: Callable[[], object] | Loop, rounds: int = 5, steps: int = 3) -> dict[str, list[float]]:
    """Microseconds per step without and with the profiler, in turns round by round (:func:`take_turns`): each
    round times ``steps`` unprofiled steps (their median), then profiles ``steps`` steps (the median of their
    ``ProfilerStep`` lengths)."""
    fn = _step_function(step, "step")
    steps = bounded_int("steps", steps, 2, 50)
    measures = {"unprofiled": partial(_us_per_step, fn, steps), "profiled": partial(_us_per_profiled_step, fn, steps)}
    return take_turns(measures, rounds, most=50)


def _step_function(step: object, label: str) -> Callable[[], object]:
    fn = step.step if isinstance(step, Loop) else step
    if not callable(fn):
        raise TypeError(f"{label}: expected a Loop or a function of no arguments, got {type(step).__name__}")
    return fn


def _us_per_step(fn: Callable[[], object], repeats: int) -> float:
    return time_per_call(fn, repeats=repeats, warmup=1, grad=True) * 1e6


def _us_per_profiled_step(fn: Callable[[], object], steps: int) -> float:
    trace = profile(fn, steps=steps, warmup=1, grad=True, label="profiler_rounds")
    return statistics.median(profiled_step_us(trace))


def profiled_step_us(trace: Trace) -> list[float]:
    """The length of every profiler step of a trace, in microseconds (the step as the profiler saw it)."""
    check_trace(trace)
    ev = trace.events
    marks = ev[(~ev["on_device"]) & ev["name"].str.startswith(STEP_PREFIX)]
    if marks.empty:
        raise ValueError(f"{trace.info.describe()} has no ProfilerStep marks: profile with helpers.profile(steps=...)")
    return [float(d) for d in marks["dur"]]


# The first profiling session of a process runs the operators that create tensors several times slower
# (memory touched for the first time), which inflates every bound read from it: it is run once and dropped.
_settled = False


def quietest_profile(step: Callable[[], object] | Loop, tries: int = 3, steps: int = 5, label: str = "step") -> Trace:
    """Profile one training step `tries` times (``steps`` profiler steps each) and keep the trace whose steps are
    shortest on average: a disturbance (other work, a slower clock) only ever adds time, and a bound is a mean over the steps.
    The process's first call profiles once more and drops that trace (see ``_settled``)."""
    global _settled
    fn = step.step if isinstance(step, Loop) else step
    if not callable(fn):
        raise TypeError(f"step must be a Loop or a function of no arguments, got {type(step).__name__}")
    tries = bounded_int("tries", tries, 1, 20)
    if not _settled:
        profile(fn, steps=bounded_int("steps", steps, 2, 50), warmup=2, grad=True, label=label)
        _settled = True
    best, best_us = None, float("inf")
    for _ in range(tries):
        trace = profile(fn, steps=bounded_int("steps", steps, 2, 50), warmup=2, grad=True, label=label)
        us = statistics.mean(profiled_step_us(trace))
        if us < best_us:
            best, best_us = trace, us
    return best


def operators_per_step(trace: Trace) -> float:
    """How many operators (``cpu_op`` events, nested ones included) each profiler step of a trace ran, on average."""
    check_trace(trace)
    ev = trace.events
    marks = ev[(~ev["on_device"]) & ev["name"].str.startswith(STEP_PREFIX)]
    if marks.empty:
        raise ValueError(f"{trace.info.describe()} has no ProfilerStep marks: profile with helpers.profile(steps=...)")
    ops = ev[(ev["cat"] == "cpu_op").to_numpy()]["ts"].to_numpy()
    inside = [((ops >= t) & (ops <= t + d)).sum() for t, d in zip(marks["ts"], marks["dur"])]
    return float(statistics.mean(inside))


def profiled_is_slower(unprofiled: Sequence[float], profiled: Sequence[float]) -> Literal[True] | Tie:
    """True when the profiled rounds are slower beyond the spread (:func:`.rounds.too_close`); otherwise a Tie: a
    difference inside the spread is noise, and a profiled step measured faster can only be the machine's doing."""
    verdict = compare_rounds(unprofiled, profiled)
    if verdict.tie:
        return Tie(f"unprofiled against profiled: {verdict.describe()}; {verdict.why()}")  # fmt: skip
    if verdict.a_median > verdict.b_median:
        return Tie(
            f"unprofiled against profiled: {verdict.describe()}; the profiled rounds came out faster, which only "
            "something else on the machine (other work, or its clocks) can do, so this run cannot tell"
        )
    return True


def check_costliest(answer: object, findings: pd.DataFrame, details: dict | None = None) -> Feedback:
    """The planted problem behind the highest finding that names one (:func:`first_fix`); one whose finding's bound
    is within 25 % of the top's is too close to call on a shared machine (the bounds are timings), and is accepted
    too, saying so."""
    if answer is None or answer is Ellipsis:
        return _record("costliest", MISSING, "write your guess in the cell above, run it, then run this cell again")
    if not isinstance(answer, str):
        return _record("costliest", WRONG, f"expected one of {', '.join(PROBLEMS)}, got {type(answer).__name__}.", answer)  # fmt: skip
    planted = _ranked_or_raise(findings)
    ranked = [(str(p), float(us)) for p, us in zip(planted["problem"], planted["saving_upper_bound_us"])]
    top, top_us = ranked[0]
    close = {p: us for p, us in ranked if us >= 0.75 * top_us and p != top}
    mine = answer.strip().lower()
    if mine not in PROBLEMS:
        return _record("costliest", WRONG, f"{answer!r} is not a planted problem: answer one of {', '.join(PROBLEMS)}.", answer)  # fmt: skip
    why = {
        "why": f"the highest finding of a planted problem is {top}'s, {top_us:,.0f} us on the profiled step's critical path."
    }
    explain = EXERCISES._exercise("costliest").explain.format(**(details or why))
    if mine == top:
        return _record("costliest", RIGHT, f"{top}: the diagnosis agrees. {explain}", answer, top)
    if mine in close:
        return _record("costliest", TIE, f"{mine}'s bound ({close[mine]:,.0f} us) is within 25 % of {top}'s ({top_us:,.0f} us), inside this machine's noise: both are accepted here. {explain}", answer, top)  # fmt: skip
    # never the answer after a wrong try: where to look (the hint follows); nb10.reveal("costliest") on request
    return _record("costliest", WRONG, f"you said {answer!r}; the diagnosis ranks another planted problem higher.", answer, top)  # fmt: skip


def check_saving(key: str, predicted_us: float | None, before: Sequence[float], after: Sequence[float], findings: pd.DataFrame, problem: str | None = None, details: dict | None = None, ratio: float | None = None) -> Feedback:  # fmt: skip
    """A predicted saving (us per step) checked against the taught prediction, the bound (``saving_upper_bound_us``)
    of the first finding of `problem` (default: :func:`first_fix`) or of all of them, right within 2 %. Another
    answer is a tie when it held against the measurement (:func:`prediction_held`); else wrong. The measurement is reported beside it and never marks the
    taught answer wrong. `ratio` (unprofiled over profiled step time) is only shown, as the profiler's cost.
    """
    ex = EXERCISES._exercise(key)
    if problem is not None and problem not in PROBLEMS:
        raise ValueError(f"problem must be one of {', '.join(PROBLEMS)} (the ratio is a keyword: ratio=...), got {problem!r}")  # fmt: skip
    if predicted_us is None or predicted_us is Ellipsis:
        return _record(key, MISSING, "write your prediction in the cell above, run it, then run this cell again")
    if isinstance(predicted_us, bool) or not isinstance(predicted_us, (int, float)):
        return _record(key, WRONG, f"expected a number of microseconds, got {type(predicted_us).__name__}.", predicted_us)  # fmt: skip
    problem = problem or (first_fix(findings) if len(findings) else None)
    taught = {predicted_saving(findings, problem)} if problem in PROBLEMS else {0.0}
    mine = findings[findings["rule"].map(planted_problem) == problem] if len(findings) else findings
    if len(mine):  # the first of its findings alone, as the lesson's first prediction reads it
        taught.add(float(mine["saving_upper_bound_us"].iloc[0]))
    p = float(predicted_us)
    s = measured_saving(before, after)
    right = any(abs(p - t) <= max(0.02 * abs(t), 1.0) for t in taught)
    measured = (
        f"Measured without the profiler: {s['median']:,.0f} us per step (middle half of the rounds {s['q1']:,.0f} "
        f"to {s['q3']:,.0f} us)."
    )
    explain = ex.explain.format(**{"why": "", **(details or {})})
    if ratio is not None:
        explain += f" (The profiler's cost on this step: unprofiled/profiled = {float(ratio):.2f}.)"
        if right and p > 0:
            explain += " " + scaling_note(p, float(ratio), s)
    if right:  # the method is graded; the bound's own miss is reported as the measurement's
        return _record(key, RIGHT, f"{right_method_message(p, s)} {measured} {explain}", p, p)  # fmt: skip
    shown = " or ".join(f"{t:,.0f}" for t in sorted(taught))
    if prediction_held(p, s):  # the measurement cannot tell it from the taught figure: not the learner's error
        return _record(key, TIE, f"not the method this exercise grades: you predicted {p:,.0f} us; the diagnosis predicts {shown} us. {measured} Your figure is within 25 % of the measured median, inside the rounds' middle half or within 2 % of the step of it: this machine cannot tell it from the bound, so it is accepted. {explain}", p, shown)  # fmt: skip
    graded = "This exercise grades the figure the evidence gives, not closeness to one noisy measurement."
    if len(mine) and abs(p - float(mine["time_us"].iloc[0])) <= 0.02 * abs(float(mine["time_us"].iloc[0])):
        graded += " That is the finding's time_us, the time its own events took, not what the critical path would lose."
    if ratio is not None and any(abs(p - t * float(ratio)) <= 0.02 * abs(t * float(ratio)) for t in taught):
        graded += " That is the bound scaled by unprofiled_ratio: the exercise grades the bound as the trace shows it; whether scaling comes closer is measured in the table of all the fixes below."  # fmt: skip
    # neither the taught figure nor the measurement (close to it is accepted) after a wrong try: the hint says where
    return _record(key, WRONG, f"you predicted {p:,.0f} us, which is not the figure the evidence gives. {graded}", p, shown)  # fmt: skip


def planted_findings(findings: pd.DataFrame) -> pd.DataFrame:
    """The findings whose rule names a planted problem, in the diagnosis's order (highest first), with that
    problem in a ``problem`` column; empty when none does. On a GPU the launch-bound finding
    (``gpu_idle_cpu_bound``) can rank above them: it is every small kernel's launch together, which no single
    planted fix removes."""
    if not isinstance(findings, pd.DataFrame) or "rule" not in findings.columns:
        raise TypeError("findings must be the table returned by nb10.diagnose(trace)")
    problems = findings["rule"].map(planted_problem).to_numpy()
    return findings.assign(problem=problems)[pd.Series(problems).isin(PROBLEMS).to_numpy()]


def first_fix(findings: pd.DataFrame) -> str:
    """The planted problem behind the highest-ranked finding that names one (see :func:`planted_findings`)."""
    return str(_ranked_or_raise(findings)["problem"].iloc[0])


def _ranked_or_raise(findings: pd.DataFrame) -> pd.DataFrame:
    ranked = planted_findings(findings)
    if ranked.empty:
        raise ValueError("no finding of the diagnosis names a planted problem: was the planted loop profiled?")
    return ranked


def predicted_saving(findings: pd.DataFrame, problem: str) -> float:
    """The unprofiled saving predicted for fixing `problem`: the sum of its findings' bounds, unscaled (0 when none).
    The profiler's cost is roughly per operator, so a step-wide unprofiled/profiled ratio fits some fixes, not all."""
    if not isinstance(findings, pd.DataFrame) or "rule" not in findings.columns:
        raise TypeError("findings must be the table returned by nb10.diagnose(trace)")
    if problem not in PROBLEMS:
        raise ValueError(f"problem must be one of {', '.join(PROBLEMS)}, got {problem!r}")
    mine = findings[findings["rule"].map(planted_problem) == problem]  # a mask: an empty table keeps its columns
    return float(mine["saving_upper_bound_us"].sum())


# -- reading findings critically ---------------------------------------------------------------------


def most_inflated(findings: pd.DataFrame, n: int = 3) -> tuple[str, float]:
    """Among the first `n` findings, the rule whose saving bound is the largest multiple of its own events' time."""
    top = findings.head(n)
    top = top[top["time_us"] > 0]
    if top.empty:
        raise ValueError("no finding with a measured time among the first findings")
    ratio = top["saving_upper_bound_us"] / top["time_us"]
    i = ratio.idxmax()
    return str(top.loc[i, "rule"]), float(ratio.loc[i])


THIRD_PARTY = {
    "resnet50": "kineto__plugin_samples_resnet50_num_workers_0_worker0.pt.trace.json.gz",
    "alexnet": "hta__critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz",
}


def third_party_trace(name: str) -> Trace:
    """One of the real third-party traces the course tests on (``"resnet50"``: Kineto's TensorBoard plugin sample;
    ``"alexnet"``: HolisticTraceAnalysis's critical-path test trace); tests/data/SOURCES.tsv says where each is from."""
    from ..trace.model import load_trace

    if name not in THIRD_PARTY:
        raise ValueError(f"name must be one of {', '.join(THIRD_PARTY)}, got {name!r}")
    return load_trace(REPO_ROOT / "tests" / "data" / THIRD_PARTY[name])


def top_rule(findings: pd.DataFrame) -> str:
    """The rule of the first finding, or ``"none"`` when the diagnosis found nothing."""
    return str(findings["rule"].iloc[0]) if len(findings) else "none"


# -- the open exercise -------------------------------------------------------------------------------


def check_my_model(step: Callable[[], object] | None, prediction: str | None, steps: int = 3) -> tuple[Feedback, Findings | None]:  # fmt: skip
    """Profile the learner's own training step (a function of no arguments), diagnose it, and check
    their prediction of the top finding's rule (``"none"`` when they expect no finding)."""
    if step is None or prediction is None:
        return _record("my_model", MISSING, "write my_step and my_prediction in the cell above, then run this cell again"), None  # fmt: skip
    if not callable(step):
        raise TypeError(f"my_step must be a function of no arguments (one training step), got {type(step).__name__}")
    if not isinstance(prediction, str):
        return _record("my_model", WRONG, f"expected a rule name such as 'unfused_optimizer', got {type(prediction).__name__}.", prediction), None  # fmt: skip
    trace = profile(step, steps=bounded_int("steps", steps, 2, 20), warmup=1, grad=True, label="my_step")
    found = diagnose(trace)
    expected = top_rule(found)
    why = (
        f"On your step the top finding is {expected} ({found['finding'].iloc[0]}; bound "
        f"{found['saving_upper_bound_us'].iloc[0]:,.0f} us of a {found.attrs['step_us']:,.0f} us profiled step)."
        if len(found)
        else "The diagnosis found nothing on your step: no rule fired."
    )
    fb = check("my_model", prediction.strip().lower(), expected, details={"why": why})
    return fb, found


def device_name() -> str:
    """Where the planted loop runs here: the GPU's name, or the CPU."""
    return torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU (one thread)"
