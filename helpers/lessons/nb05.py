"""Lesson 05, hand-tuned kernels with the `kernels` library: what this notebook alone uses."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ..measure.compile_costs import first_calls
from ..mlp.hub import KernelLoadError, load_geglu_mlp
from ..mlp.hub_cache import (
    COURSE_KERNEL_REPO,
    LIGER_REPO,
    cache_dir,
    cached_versions,
    describe_repository,
    hub_status,
    raw_get_kernel,
)
from ..mlp.hub_pin import KERNEL_LOCK_FILE, kernel_pin
from ..mlp.plans import POINTWISE_ROLES, kernel_role
from ..trace.model import Trace, check_trace
from .exercises import Exercise, Exercises
from .rounds import Spread, noise_why, spread_of, too_close

__all__ = [
    "COURSE_KERNEL_REPO", "KERNEL_LOCK_FILE", "KernelLoadError", "LIGER_REPO", "cache_dir", "cached_versions",
    "describe_repository", "first_calls", "hub_status", "kernel_pin", "load_geglu_mlp", "raw_get_kernel",
]  # fmt: skip

EXERCISES = Exercises(
    "05",
    mm_per_forward=Exercise(
        "aten::mm per forward, hand-tuned",
        explain="The three projections are still nn.Linear: cuBLAS GEMMs, as in eager mode.",
        hint="What does the hand-tuned layer keep of the three nn.Linear layers?",
    ),
    gelu_mul_per_forward=Exercise(
        "aten::gelu + aten::mul per forward, hand-tuned",
        explain="GeLU and the product run inside one hand-written Triton kernel, called through an autograd "
        "Function (the row named ...Function in the table below), not through ATen.",
        hint="Which ATen operators can a hand-written kernel for GeLU and the product replace?",
    ),
    fused_floor_mb=Exercise(
        "MB a fused GeGLU kernel moves",
        explain="Two reads and one write of an 8192 x 3072 bf16 tensor: 3 x {tensor_mb:.1f} MB.",
        hint="Count the tensors read and written, times one tensor's size.",
        rel_tol=0.05,
    ),
)
check, hint, summary = EXERCISES.check, EXERCISES.hint, EXERCISES.summary
reveal, answered, evidence = EXERCISES.reveal, EXERCISES.answered, EXERCISES.evidence  # answers once right or asked for
assert_all_correct, reset = EXERCISES.assert_all_correct, EXERCISES.reset


def geglu_step_spread(traces: Mapping[str, Trace]) -> pd.DataFrame:
    """Per variant, the GeGLU kernels' time per profiled step: median, first and third quartile, fastest and
    slowest (us)."""
    if not isinstance(traces, Mapping) or not traces:
        raise TypeError("traces must be a non-empty dict {label: Trace}")
    rows = []
    for label, trace in traces.items():
        check_trace(trace)
        kernels = trace.kernels()
        if kernels.empty:
            raise ValueError(f"{label}: the trace has no kernels (a CPU profile?): its GeGLU time is not a kernel's")
        work = kernels[kernels["name"].map(kernel_role).isin(POINTWISE_ROLES)]
        if work.empty:
            raise ValueError(f"{label}: no GeGLU kernel found among {kernels['name'].nunique()} kernel names")
        per_step = work.groupby("step")["duration_us"].sum()
        spread = spread_of(per_step.tolist())
        rows.append(
            {
                "variant": label,
                "median_us": spread.median,
                "q1_us": spread.q1,
                "q3_us": spread.q3,
                "min_us": float(per_step.min()),
                "max_us": float(per_step.max()),
                "steps": int(per_step.size),
            }  # fmt: skip
        )
    return pd.DataFrame(rows)


def ranking_sentence(spread: pd.DataFrame) -> str:
    """The variants fastest first, saying which neighbours are too close to call (:func:`.rounds.too_close` on
    their steps' medians and quartiles)."""
    if (
        not {"variant", "median_us", "q1_us", "q3_us", "min_us", "max_us", "steps"} <= set(spread.columns)
        or spread.empty
    ):
        raise ValueError("spread must be a non-empty nb05.geglu_step_spread(...) frame")
    ranked = spread.sort_values("median_us").reset_index(drop=True)
    parts = []
    for i, r in ranked.iterrows():
        text = f"**{r['variant']}** {r['median_us']:.1f} us ({r['min_us']:.1f}-{r['max_us']:.1f})"
        if i > 0:
            a, b = (Spread(x["median_us"], x["q1_us"], x["q3_us"], int(x["steps"])) for x in (ranked.loc[i - 1], r))
            if too_close(a, b):
                text += f" (too close to call against the one before: {noise_why(a, b)})"
        parts.append(text)
    return "; ".join(parts)


def compared_sentence(variants: list[str], device: str, live: bool) -> str:
    """Which variants section 5 compares, how many and where: live on this GPU or the H200's reference traces."""
    if not isinstance(variants, list) or not variants or not all(isinstance(v, str) for v in variants):
        raise TypeError("variants must be a non-empty list of labels")
    if not isinstance(device, str) or not device:
        raise ValueError("device must name the device the traces come from")
    where = f"profiled live on this GPU ({device})" if live else f"read from the reference traces of the {device}"
    return f"{len(variants)} variants compared, {where}: {', '.join(variants)}."


def startup_view(startup: pd.DataFrame) -> pd.DataFrame:
    """:func:`first_calls`' table with its times in milliseconds (a first call spans microseconds to minutes)."""
    need = {"variant", "input_shape", "first_call_s", "graphs_compiled", "later_call_s"}
    if not isinstance(startup, pd.DataFrame) or not need <= set(startup.columns):
        raise ValueError(f"startup must be an nb05.first_calls(...) table with columns {sorted(need)}")
    view = startup.assign(first_call_ms=startup["first_call_s"] * 1e3, later_call_ms=startup["later_call_s"] * 1e3)
    keep = ["variant", "input_shape", "first_call_ms", "graphs_compiled", "fx_cache_hits", "later_call_ms"]
    return view[[c for c in keep if c in view.columns]].round(2)


def later_calls_sentence(startup: pd.DataFrame, kernel_us: Mapping[str, float] | None, hand_label: str) -> str:
    """The later calls shape by shape (the second input has twice the batch), and on a GPU each call at the first
    shape against its kernel time from section 5 (`kernel_us`, None on a CPU) at the same shape."""
    if not {"variant", "input_shape", "later_call_s"} <= set(getattr(startup, "columns", ())):
        raise ValueError("startup must be an nb05.first_calls(...) table")
    shapes = list(dict.fromkeys(startup["input_shape"]))
    ms = startup.set_index(["variant", "input_shape"])["later_call_s"] * 1e3
    variants = list(dict.fromkeys(startup["variant"]))
    first = shapes[0]
    text = f"Later calls at the model's input {first}: " + ", ".join(f"{v} {ms[v, first]:,.2f} ms" for v in variants)
    if len(shapes) > 1:
        growth = [ms[v, shapes[1]] / ms[v, first] for v in variants]
        text += (
            f"; at {shapes[1]} each takes {min(growth):.1f}-{max(growth):.1f}x as long (compare calls shape by "
            "shape: a mean over both would mix them)"
        )
    text += ". "
    if kernel_us is not None:
        known = [v for v in variants if v in kernel_us]
        if not known:
            raise ValueError(f"kernel_us names none of the variants {variants}")
        pairs = ", ".join(f"{v} {ms[v, first] * 1e3:,.0f} us against {kernel_us[v]:,.0f} us" for v in known)
        above = all(ms[v, first] * 1e3 > kernel_us[v] for v in known)
        return text + (
            f"Against section 5's kernel time per forward at the same shape: {pairs}. "
            + (
                "Each call lasts longer than its kernels: the rest is time the GPU spent on none of this call's "
                "kernels (the host issuing the call, the gaps between launches, the synchronise)."
                if above
                else "A call measured shorter than its kernels means the two measurements disagree: the machine did "
                "not run alike for them (other work on it, or its clocks), a cause this notebook cannot check."
            )
        )
    slowest = max(variants, key=lambda v: ms[v, first])
    if slowest == hand_label:
        return text + (
            "On this CPU the hand-tuned layer is the slowest: its Triton kernel runs in Triton's interpreter "
            "(Python executing every program of the grid), so this column measures the interpreter, not the kernel. "
            "On a GPU the same kernel is compiled to machine code on its first launch."
        )
    return text + "On this CPU the Triton kernel runs in Triton's interpreter, so these times say little about a GPU."
