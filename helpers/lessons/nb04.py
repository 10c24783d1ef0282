"""Lesson 04, `torch.compile`: what this notebook alone uses."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from numbers import Number

import pandas as pd
import torch

from ..measure.compile_costs import FirstCall, compile_wrapper_rows, time_first_call
from ..measure.compile_counts import SweepResult, shape_sweep, sweep_summary
from ..measure.timing import time_end_to_end
from ..mlp.fusion import kernels_by_role
from ..mlp.plans import infer_plan
from .exercises import UNDECIDED, Exercise, Exercises, Tie, compare_rounds
from .nb04_readings import (
    Reading,
    about,
    bytes_sentence,
    compile_seconds_text,
    end_to_end_expected,
    end_to_end_why,
    profiler_sentence,
    read_bound,
    sync_host_clause,
    synchronised_sentence,
)  # fmt: skip
from .rounds import call_rounds, named_functions, one_thread, rounds_frame, spread_of, take_turns

__all__ = [
    "Reading", "about", "bytes_sentence", "compile_seconds_text", "end_to_end_expected", "end_to_end_why", "profiler_sentence", "read_bound",
    "sync_host_clause", "synchronised_sentence", "call_rounds", "compile_wrapper_rows", "infer_plan", "kernels_by_role", "one_thread", "rounds_frame", "shape_sweep", "sweep_summary", "time_first_call",
]  # fmt: skip

EXERCISES = Exercises(
    "04",
    same_gemm_kernels=Exercise(
        "GEMM kernels unchanged by compile",
        explain="Inductor's default mode calls the same cuBLAS GEMMs (aten::mm) with the same shapes, so cuBLAS "
        "picks the same kernels.",
        hint="Does Inductor's default mode write matrix products of its own, or call a library?",
    ),
    compiled_kernels_per_forward=Exercise(
        "compute kernels per forward, compiled",
        explain="Three GEMMs and one generated kernel for the GeLU and the multiply together.",
        hint="The three GEMMs stay; what can happen to two pointwise kernels that follow each other?",
    ),
    left_of_the_chain=Exercise(
        "operator left of aten::linear's chain",
        explain="The generated code calls aten::mm (the GEMM) itself: no aten::linear, aten::t, aten::matmul, "
        "aten::reshape or aten::view on the way.",
        hint="Which operator of the chain does the arithmetic of a Linear? Name it as the trace does: `aten::...`.",
    ),
    saved_mb=Exercise(
        "MB saved per forward by fusion",
        explain="Two passes over one [tokens, hidden] tensor of {tensor_mb:.1f} MB (the GeLU's output, written then "
        "read back) disappear.",
        hint="Passes of the eager pair minus passes of the fused kernel, times the size of one [8192, 3072] "
        "bf16 tensor.",
        rel_tol=0.05,
    ),
    compiled_faster_end_to_end=Exercise(
        "compiled faster back to back",
        explain="{why}",
        hint="Compare the kernel times: if the GPU never waits, which variant finishes a call sooner?",
    ),
    compiles_default=Exercise(
        "compiles with the default torch.compile",
        explain="The first call compiles a static graph for batch b. The first change fails a size guard, and Dynamo "
        "recompiles once with that dimension symbolic (automatic dynamic shapes); every later batch size reuses it.",
        hint="What could the first change of size teach Dynamo about that size?",
    ),
    compiles_static=Exercise(
        "compiles with dynamic=False",
        explain="dynamic=False compiles one static graph per distinct shape; the last call, batch b again, reuses "
        "the first graph. Dynamo keeps up to torch._dynamo.config.recompile_limit graphs per function.",
        hint="Without dynamic shapes, which calls can reuse a graph compiled before?",
    ),
    strided_input=Exercise(
        "a call with other strides",
        explain="Strides are guarded like sizes: x has strides {strides}, the transposed input {other_strides}. The "
        "guard fails, and Dynamo compiles again; nothing raises.",
        hint="What does Dynamo do when any guard fails?",
    ),
    my_compiles=Exercise(
        "compiles of your sequence",
        explain="Read the 'graph' and 'why' columns below: each compile names the guard that failed.",
        hint="Default: static first, then one dynamic graph at the first change. dynamic=False: one per distinct "
        "size. Sizes 0 and 1 are specialised.",
    ),
)
check, hint, summary = EXERCISES.check, EXERCISES.hint, EXERCISES.summary
reveal, answered, evidence = EXERCISES.reveal, EXERCISES.answered, EXERCISES.evidence  # answers once right or asked for
assert_all_correct, reset = EXERCISES.assert_all_correct, EXERCISES.reset


def stride_outcome(fn: Callable, x: torch.Tensor, other: torch.Tensor) -> tuple[str, SweepResult | None, str]:
    """What Dynamo does when ``other`` (same shape, other strides) follows ``x``: ``"recompile"``, ``"reuse"`` or
    ``"error"``, with the sweep and the error (counted with the ``eager`` backend)."""
    if not isinstance(x, torch.Tensor) or not isinstance(other, torch.Tensor) or x.shape != other.shape:
        raise ValueError("x and other must be tensors of the same shape (only their strides should differ)")
    try:
        # no progress lines: "compiled a graph" on the second call would answer the exercise before its check
        sweep = shape_sweep(fn, [x, other], backend="eager", label="same shape, other strides", progress=False)
    except Exception as err:  # noqa: BLE001  (an error is one of the possible outcomes, shown to the learner)
        return "error", None, f"{type(err).__name__}: {err}"
    return ("recompile" if sweep.table["new_graphs"].iloc[1] else "reuse"), sweep, ""


def end_to_end_rounds(
    fns: Mapping[str, Callable], *inputs, rounds: int = 5, iters: int = 50
) -> dict[str, dict[str, list[float]]]:
    """Per function, `rounds` :func:`helpers.time_end_to_end` measurements (``nosync_us`` and ``sync_us``), the
    functions taking turns (:func:`take_turns`)."""
    fns = named_functions(fns)
    return take_turns({name: partial(_end_to_end, fn, inputs, iters) for name, fn in fns.items()}, rounds)


def _end_to_end(fn: Callable, inputs: tuple, iters: int) -> dict[str, float]:
    timed = time_end_to_end(fn, *inputs, iters=iters, rounds=1)
    return {"nosync_us": timed["nosync_us"], "sync_us": timed["sync_us"]}


def first_is_faster(rounds: Mapping[str, Sequence[float]], unit: str = "us") -> bool | Tie:
    """Whether the first variant is faster, or a Tie when :func:`~helpers.lessons.rounds.too_close` says the
    difference is inside the spread (or there are fewer than 3 rounds)."""
    if len(rounds) != 2:
        raise ValueError(f"give exactly two variants, got {list(rounds)}")
    (a, ra), (b, rb) = rounds.items()
    if min(len(ra), len(rb)) < 3:
        return Tie(
            f"{a} {_list(ra, unit)} against {b} {_list(rb, unit)}: this source kept one number per variant, not "
            "the spread of repeated rounds, so it cannot tell a difference from noise",
            status=UNDECIDED,
        )
    verdict = compare_rounds(ra, rb)
    if verdict.tie:
        return Tie(f"{a} against {b}: {verdict.describe(unit)}; {verdict.why(unit)}")
    return verdict.a_median < verdict.b_median


def payback(
    first_call: FirstCall,
    rounds: Mapping[str, Sequence[float]],
    disturbed: Sequence[str] = (),
    kernel_us: Mapping[str, float] | None = None,
) -> str:
    """A sentence on whether the compile pays back, from ``call_rounds({"eager": ..., "compiled": ...})`` (us); none
    when `disturbed` names variants whose synchronised rounds something else slowed (:func:`read_bound`). With the
    same device's `kernel_us` per call, a slower compiled call says why when those numbers show it."""
    if set(rounds) != {"eager", "compiled"}:
        raise ValueError(f"rounds must have the keys 'eager' and 'compiled', got {sorted(rounds)}")
    frame = rounds_frame(rounds).set_index("variant")
    e, c = frame.loc["eager"], frame.loc["compiled"]
    timing = (
        f"A call then takes {_ms(c)} compiled against {_ms(e)} eager (median of {int(c['rounds'])} rounds, "
        "synchronised after each call, fastest and slowest round in brackets)"
    )
    if disturbed:
        return (
            f"{timing}. Something else on the machine (other work, or its clocks) slowed the synchronised rounds "
            f"of {' and '.join(disturbed)} (see the reading above), so no pay-back can be computed from them."
        )
    verdict = first_is_faster({"compiled": rounds["compiled"], "eager": rounds["eager"]})
    if isinstance(verdict, Tie):
        return f"{timing}. Too close to call here ({verdict.why}), so no pay-back can be computed from them."
    if not verdict:
        medians = {k: frame.loc[k, "median_us"] for k in ("compiled", "eager")}
        why = sync_host_clause(kernel_us, medians) if kernel_us is not None else ""
        return f"{timing}: a synchronised compiled call is not faster here, so the compile does not pay back.{why}"
    # the smallest saving the rule allows (the difference less the larger middle-half spread) gives the longest
    slow = e["median_us"] - c["median_us"]
    fast = slow - max(spread_of(rounds["eager"]).iqr, spread_of(rounds["compiled"]).iqr)
    calls = first_call.compile_s / (slow * 1e-6)
    longest = first_call.compile_s / (fast * 1e-6)
    return (
        f"{timing}: it pays back after about {about(calls)} calls ({about(longest)} if the saving is as small as the "
        "rounds allow)."
    )


def _ms(row: pd.Series) -> str:  # whole us below a millisecond: "0.29 ms (0.29-0.29)" would hide the spread
    if row["max_us"] < 1000:
        return f"{row['median_us']:.0f} us ({row['min_us']:.0f}-{row['max_us']:.0f})"
    return f"{row['median_us'] / 1e3:.2f} ms ({row['min_us'] / 1e3:.2f}-{row['max_us'] / 1e3:.2f})"


def _list(values: Sequence[float], unit: str) -> str:
    return ", ".join(f"{float(v):.3g}" for v in values) + f" {unit}"


@contextmanager
def quiet_dynamo() -> Iterator[None]:
    """Dynamo's warnings off inside the block (its graph-break advice, which a report then states), the default
    logging after it."""
    torch._logging.set_logs(dynamo=logging.ERROR)
    try:
        yield
    finally:
        torch._logging.set_logs()


def autotune_note(trace_us: float, bench_us: float, bench_label: str) -> str:
    """A sentence setting the max-autotune trace's kernel time per forward beside the benchmark run's, both in us."""
    for name, v in (("trace_us", trace_us), ("bench_us", bench_us)):
        if isinstance(v, bool) or not isinstance(v, Number) or not math.isfinite(float(v)) or float(v) <= 0:
            raise ValueError(f"{name} must be a positive finite time in us, got {v!r}")
    run = f"the benchmark run of `python -m benchmarks mlp` ({bench_label})"
    if abs(trace_us - bench_us) <= 0.05 * min(trace_us, bench_us):
        return (
            f"A separate compile in {run} measured {bench_us:.0f} us of kernels per forward for the same mode, as "
            "here: this time autotuning settled on kernels as fast as in the trace. It benchmarks its candidates again at every "
            "compile, so on another run or GPU it can choose others: read a max-autotune number with the trace "
            "that produced it."
        )
    return (
        f"Autotuning benchmarks its candidates again at every compile: {run} measured {bench_us:.0f} us of kernels "
        f"per forward for the same mode, against {trace_us:.0f} us here. Read a max-autotune number with the trace "
        "that produced it."
    )
