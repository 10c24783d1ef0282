"""Lesson 09's reading of runs launched once each on a CPU: how each rank's step changed between two launches,
against the spread of every rank's timed steps, said per run (never one verdict for all), the machine's cores, and
the folder this kernel's runs go to."""

from __future__ import annotations

import os
import shutil
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..paths import LOCAL_TRACES_DIR
from .rounds import Tie, spread_of, too_close

RUNS_PARENT = LOCAL_TRACES_DIR / "09_several_gpus"


def _rank_steps(summary: Mapping[str, Any]) -> dict[int, list[float]]:
    if not isinstance(summary, Mapping) or not summary.get("ranks"):
        raise ValueError("expected a run's summary (run_summary(folder)), with its ranks' step times")
    out = {int(r["rank"]): [float(x) for x in r["step_ms"]] for r in summary["ranks"]}
    if any(len(s) < 3 for s in out.values()):
        raise ValueError("need at least 3 timed steps per rank to know the spread")
    return out


def rank_changes(base: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """Each rank's median step (ms) in `new` minus the same rank's in `base`, and the noise: the largest
    interquartile range of one rank's timed steps in either run. ``within_noise`` when a rank's change is too close
    to call by the course's one rule (:func:`.rounds.too_close`) or the ranks changed in opposite directions."""
    a, b = _rank_steps(base), _rank_steps(new)
    if set(a) != set(b):
        raise ValueError(f"the runs have different ranks: {sorted(a)} and {sorted(b)}")
    change = [statistics.median(b[r]) - statistics.median(a[r]) for r in sorted(a)]
    noise = max(spread_of(s).iqr for s in (*a.values(), *b.values()))
    mixed = min(change) < 0 < max(change)
    return {"change_ms": change, "noise_ms": noise, "within_noise": mixed or any(too_close(a[r], b[r]) for r in a)}


def _signed_ms(x: float) -> str:
    return "0.0 ms" if x == 0 else f"{x:+.1f} ms"


def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def launches_sentence(base_name: str, base: Mapping[str, Any], news: Mapping[str, Mapping[str, Any]]) -> str:
    """How the step changed from run `base_name` to each run of `news` (name: summary), rank by rank: one sentence
    for the spread, one per run. The spread of one run's timed steps is no bar for two launches (what else ran
    differs between them), so a change larger than it is said to be a hint, never "beyond the noise"."""
    if not news:
        raise ValueError("news must name at least one run to compare with the base")
    changes = {n: rank_changes(base, s) for n, s in news.items()}
    noise = max(c["noise_ms"] for c in changes.values())
    ranks = sorted(int(r["rank"]) for r in base["ranks"])
    out = [f"Against {base_name}, the middle half of one rank's timed steps spans up to {noise:.1f} ms."]
    hints = False
    for n, c in changes.items():
        # read at the precision shown: a change that prints as 0.0 ms moved in no direction
        shown = [round(x, 1) + 0.0 for x in c["change_ms"]]
        moved = _and([f"{_signed_ms(x)} on rank {r}" for r, x in zip(ranks, shown, strict=True)])
        # every run judged against the one noise printed above (the largest middle-half spread)
        within = [str(r) for r, x, s in zip(ranks, c["change_ms"], shown, strict=True) if abs(x) <= noise or s == 0]
        if min(shown) < 0 < max(shown):
            verdict = "its ranks moved in opposite directions, so these runs cannot say"
        elif within:
            where = "" if len(within) == len(ranks) else f" on rank{'s' if len(within) > 1 else ''} {_and(within)}"
            verdict = f"within that spread{where}, so these runs cannot say"
        else:
            verdict, hints = "more than that spread on every rank: a hint, not a result", True
        out.append(f"{n}: the median step changed by {moved}, {verdict}.")
    if hints:
        out.append(
            "That spread is within one launch: two launches on a shared machine also differ by whatever else ran at "
            "the time, by more than any spread inside one, so launch each run again to judge it."
        )
    return " ".join(out) + " "


def no_faster_text(change: Mapping[str, Any]) -> str:
    """The clause after "did not help here" for a step that grew (``measured_change``'s dict): no faster, and
    slower only as far as two single launches can say, whichever side of the spread the change falls."""
    if not isinstance(change, Mapping) or not {"change_ms", "noise_ms", "within_noise"} <= set(change):
        raise ValueError("pass measured_change(base, new): change_ms, noise_ms and within_noise")
    if change["within_noise"]:
        return ": the step was no faster, and slower only by less than the spread between steps"
    return (
        f": the step was no faster, possibly slower ({change['change_ms']:+.1f} ms against a spread of "
        f"{change['noise_ms']:.1f} ms between the timed steps of one run; one launch of each cannot say by how much)"
    )


def prefetch_answer(change: Mapping[str, Any], where: str) -> tuple[bool | Tie, dict[str, str]]:
    """The answer to "does prefetching make the FSDP2 step faster?" from ``measured_change(no prefetch, prefetch)``:
    a :class:`Tie` when the change is too close to call by the course's rule (the runs' timed steps), else whether
    the step got shorter; with the ``measured`` sentence the check's explanation shows (`where`: the runs' label)."""
    if not isinstance(change, Mapping) or not {"change_ms", "noise_ms", "within_noise"} <= set(change):
        raise ValueError("pass measured_change(no_prefetch, prefetch): change_ms, noise_ms and within_noise")
    if not isinstance(where, str) or not where:
        raise TypeError(f"where must name the runs (their label), got {where!r}")
    measured = (
        f"Without the profiler ({where}), prefetching changed the step by {change['change_ms']:+.1f} ms, against a "
        f"spread of {change['noise_ms']:.1f} ms between the timed steps of one run"
    )
    if change["within_noise"]:
        return Tie(f"{measured}: inside it"), {"measured": measured}
    return bool(change["change_ms"] < 0), {"measured": measured}


def cores_phrase(nproc: int, cores: int | None = None) -> str:
    """The ranks and the CPU cores they run on (``os.cpu_count()`` unless given): sharing them when there are no
    more cores than ranks, else on a machine whose other work can still delay a rank."""
    n = os.cpu_count() if cores is None else cores
    if not isinstance(nproc, int) or nproc < 1 or not isinstance(n, int) or n < 1:
        raise ValueError(f"nproc and cores must be positive integers, got {nproc!r} and {n!r}")
    if n <= nproc:
        return f"{nproc} processes share {n} core{'s' if n > 1 else ''}, and each message waits for the other rank's threads to be scheduled"  # fmt: skip
    return (
        f"{nproc} processes on {n} cores, which other work on the machine may hold: each message waits until the "
        "other rank reaches the same collective"
    )


def bucket_prediction_text(predicted_ms: float, change: Mapping[str, Any], step_ms: float) -> str:
    """What a predicted change of the step (ms) says against the change measured between two launches
    (``measured_change``'s dict) of a `step_ms` step: inside the spread nothing can be judged; beyond it the
    comparison is still inconclusive, since the spread of one launch's steps is no bar for two launches."""
    if not isinstance(change, Mapping) or not {"change_ms", "noise_ms", "within_noise"} <= set(change):
        raise ValueError("pass measured_change(base, new): change_ms, noise_ms and within_noise")
    if isinstance(step_ms, bool) or not isinstance(step_ms, (int, float)) or not step_ms > 0:
        raise ValueError(f"step_ms must be a positive number, got {step_ms!r}")
    predicted, measured = float(predicted_ms), float(change["change_ms"])
    if change["within_noise"] and abs(predicted) <= change["noise_ms"]:
        return (
            "The measured change is inside that spread, and so is the prediction: these runs cannot say whether the "
            "larger buckets help, and a prediction this small cannot be judged on them. What the trace does say is "
            f"that the change is small, about {abs(predicted) / step_ms:.0%} of the step."
        )
    if change["within_noise"]:
        return "The measured change is inside that spread, the prediction beyond it: these runs cannot confirm it."
    sign = (
        "it has the sign the model predicted"
        if predicted * measured > 0
        else "its sign is the opposite of the prediction's, which, if another launch showed it again, would mean the "
        "model (only the all-reduce kernels' latency and bytes) leaves out something that moves with the bucket size"
    )
    return (
        f"The measured change is larger than that spread, but that spread is within one launch and these are two "
        f"launches: on a shared machine they also differ by whatever else ran at the time. At {abs(measured) / step_ms:.1%} "
        f"of the step it is a hint, not a result, and the comparison is inconclusive: {sign}. Launch each run again "
        "to judge it."
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def runs_folder() -> Path:
    """``traces/local/09_several_gpus/<pid>/``: one folder per kernel (a lesson and its learner copy never share
    one); folders of ended kernels are removed."""
    RUNS_PARENT.mkdir(parents=True, exist_ok=True)
    for old in RUNS_PARENT.iterdir():
        if old.is_dir() and old.name.isdigit() and int(old.name) != os.getpid() and not _alive(int(old.name)):
            shutil.rmtree(old, ignore_errors=True)
    mine = RUNS_PARENT / str(os.getpid())
    mine.mkdir(exist_ok=True)
    return mine
