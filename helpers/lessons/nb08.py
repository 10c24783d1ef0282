"""Lesson 08, A whole model, from trace to fix: what this notebook alone uses, the decoder's names it uses
re-exported (the model lives in :mod:`helpers.decoder`)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..decoder import workloads
from ..decoder.breakdown import (
    IDLE_ROWS,
    OUTSIDE_OPS,
    graph_prediction,
    idle_share,
    kernel_parts,
    part_breakdown,
    queue_latency_us,
)
from ..decoder.config import DECODER_CONFIGS
from ..decoder.generate import Generator, decode_timing, prefill_timing, weight_read_floor_us
from ..decoder.layers import compile_blocks, swap_layers
from ..decoder.model import PARTS, build_model, random_tokens
from ..decoder.training import TrainingStep
from ..measure.memory import allocator_history, memory_figure, memory_peaks, profile_memory
from ..measure.timing import time_per_call
from ..measure.workload import Built
from ..paths import LOCAL_TRACES_DIR
from ..programs import run_program
from ..trace.kernel_names import decode_kernels
from ..trace.memory_view import BEFORE_TRACE, memory_over_time_figure, peak_memory_by_op
from ..trace.model import Trace, check_trace
from . import nb08_floor as floor  # decode against its floor, cause by cause: nb08.floor.causes_table(...)
from . import nb08_live as live  # the sentences over live numbers: nb08.live.ranked_with_ties(...)
from . import nb08_readings as readings  # two readings of one step, one verdict: nb08.readings.profiler_gap_cause
from . import nb08_variant as variant  # the transfer exercise: a fix and its speedup graded together
from .display import reference_trace
from .exercises import UNDECIDED, Exercise, Exercises, Feedback, Tie
from .results import Results, load_results

__all__ = [  # the model's names this lesson uses, beside its own
    "BEFORE_TRACE", "PARTS", "Generator", "TrainingStep", "allocator_history", "build_model", "compile_blocks",
    "decode_timing", "graph_prediction", "idle_share", "kernel_parts", "memory_figure", "memory_over_time_figure",
    "memory_peaks", "part_breakdown", "peak_memory_by_op", "prefill_timing", "profile_memory", "queue_latency_us",
    "random_tokens", "reference_trace", "swap_layers", "weight_read_floor_us", "workloads", "live", "floor", "readings"
]  # fmt: skip

EXERCISES = Exercises(
    "08",
    gemms=Exercise(
        "GEMMs per forward",
        explain="q, k, v, o in the attention and gate, up, down in the MLP: 7 per layer, plus the LM head.",
        hint="count the nn.Linear layers of one block, times the layers, plus one",
    ),
    prefill_part=Exercise(
        "largest part of a prefill",
        explain="the MLP holds 3 of the 7 GEMMs of a layer but {share:.0%} of its GEMM FLOPs "
        "(hidden {config.hidden_size} -> {config.intermediate_size} and back).",
        hint="which block has the widest matrices?",
        guess=True,  # a profile on a shared GPU can swap the two largest parts
    ),
    decode_per_token=Exercise(
        "decode more than 10x slower per token than prefill",
        explain="{ratio:,.0f}x {where}: a prefill shares each weight read and each operator launch among "
        "{prefill_tokens} tokens, a decode step among {decode_tokens}.",
        hint="a decode step runs every operator of the model and reads every weight, for one token per sequence",
    ),
    gpu_busy=Exercise(
        "GPU busy for more than half of a decode step",
        explain="busy {busy:.0%} of the profiled step: {kernels:.0f} kernels per step, median {median_us:.1f} us "
        "each, and between them the GPU waits for the CPU to launch the next. The profiler slows the CPU side "
        "down; without it the step takes {eager_us:,.0f} us and the same kernels keep the GPU busy for about "
        "{busy_unprofiled:.0%} of it: still well under half.",
        hint="compare a kernel's time with the CPU time it takes to launch one",
    ),
    graph_step=Exercise(
        "decode step replayed from a CUDA graph (us)",
        explain="kernel time plus one queue latency per gap, from the traces. Measured without the profiler, "
        "{source}, a replayed step takes {measured}: the kernels stay, the CPU-bound gaps go. Inside a graph the GPU "
        "moves from one kernel to the next faster than between launches from a stream, so the formula is an upper "
        "bound.",
        hint="kernel time alone forgets the gaps: between two consecutive kernels the GPU needs some time to start "
        "the next, even when nothing else holds it back; count one queue latency per gap",
        rel_tol=0.05,
        source="computed",
    ),
    floor_cause=floor.FLOOR_CAUSE,
    backward_layouts=Exercise(
        "layouts of the backward's GEMMs",
        explain="dX = dY @ W reads both operands as stored (NN); dW = dY.T @ X reads dY transposed (NT). "
        "No transpose is copied: the letters say how each operand is read.",
        hint="the forward x @ W.T reads W transposed (T); write each backward product the same way and read "
        "off, operand by operand, whether it is read as stored or transposed",
    ),
    optimizer=Exercise(
        "fewest optimizer launches",
        explain="{tensors} parameter tensors; per step the for-loop issued {launches[for-loop]:.0f} operations, "
        "foreach {launches[foreach]:.0f}, fused {launches[fused]:.0f}. The for-loop runs each of AdamW's operations "
        "once per tensor, foreach once per list of tensors, fused all of AdamW's math in one operation per group. "
        "On a GPU a list operation launches one kernel per chunk of the list (a launch's arguments hold the "
        "addresses of a bounded number of tensors and blocks), so a large model takes a few kernels: still the "
        "fewest. Fewer launches need not mean less time: the times below, without the profiler, say which is faster.",
        hint="which implementation handles a whole group of parameters in one call?",
    ),
    memory_peak=Exercise(
        "largest category at the peak",
        explain="the forward keeps, for every layer, the inputs of each operation's backward: they grow with "
        "batch x sequence, and all of them are alive when the backward starts.",
        hint="which tensors grow with the batch and the sequence length?",
    ),
    recompute_mb=Exercise(
        "MB saved by recomputing the MLPs",
        explain="4 tensors of [tokens, intermediate] per layer: gate, gelu(gate), up, and their product.",
        hint="tensors per layer x layers x tokens x intermediate x bytes",
        rel_tol=0.05,
    ),
    variant_part=Exercise(
        "variant X: the bottleneck",
        explain="{part} takes {share:.0%} of the step in this trace.",
        hint="nb08.part_breakdown(variant_trace): which part has the most time?",
    ),
    variant_fix=Exercise(
        "variant X: the fix",
        explain="The LM head multiplies every position by a [vocab, hidden] matrix; generation reads only the "
        "last position's logits, so a prefill needs the head on one position per prompt.",
        hint="what does generation read from the prefill's logits? Answer with a name of nb08.fixes()['fix']",
    ),
    variant_speedup=Exercise(
        "variant X: the fix's speedup",
        explain="Measured without the profiler, the prefill with every position's logits against the last one's.",
        hint="step time / (step time - the part's time), from the breakdown",
        rel_tol=0.10,
    ),
)
check, hint, summary = EXERCISES.check, EXERCISES.hint, EXERCISES.summary
reveal, answered, evidence = EXERCISES.reveal, EXERCISES.answered, EXERCISES.evidence  # answers once right or asked for
check_floor_cause = partial(floor.check_cause, book=EXERCISES)
assert_all_correct, reset = EXERCISES.assert_all_correct, EXERCISES.reset

# The fixes the transfer exercise offers, and what each changes.
FIXES = {
    "cuda graphs": "replay the step's launches from a CUDA graph (removes CPU-bound idle time)",
    "compile": "torch.compile: fuse the pointwise kernels around the GEMMs",
    "fused mlp": "the course's fused gate+up GeGLU kernel",
    "sdpa": "scaled_dot_product_attention instead of hand-written attention",
    "last logits": "compute the LM head on the last position only (generation reads nothing else)",
    "recompute": "recompute the MLP in the backward (less memory, a little more time)",
}
_IDLE = [*IDLE_ROWS.values(), OUTSIDE_OPS]
# What the notebook runs of the decoder benchmark on a GPU (one program, read back from its file).
LIVE_CONFIGURATIONS = ("eager", "eager+graph", "compile+graph", "course", "recompute", "course+recompute", "sdpa-math")
LIVE_RESULTS = LOCAL_TRACES_DIR / "decoder_live.json"
# Where the GPU path writes the allocator's snapshot (the file pytorch.org/memory_viz reads).
MEMORY_SNAPSHOT = LOCAL_TRACES_DIR / "training_step_memory_snapshot.pickle"


def check_graph_step(
    predicted_us: float | None,
    decode_trace: Trace,
    latency_trace: Trace | None,
    measured_us: float | None = None,
    source: str = "",
) -> Feedback:
    """The CUDA-graph exercise: the predicted replayed step against :func:`graph_prediction` (the taught model),
    right within 5 %; the measured replay, when known, is shown beside it."""
    model = graph_prediction(decode_trace, latency_trace)
    measured = "not measured here" if measured_us is None else f"{measured_us:,.0f} us"
    details = {"predicted_us": model["predicted_us"], "source": source or "no measurement", "measured": measured}
    return check("graph_step", predicted_us, round(model["predicted_us"], 1), details=details)


def graph_table(
    decode_trace: Trace, latency_trace: Trace | None, eager_us: float, measured_graph_us: float | None
) -> pd.DataFrame:
    """The CUDA-graph prediction beside the measurements, each labelled profiled or not (the speedups divide the
    unprofiled eager step)."""
    model = graph_prediction(decode_trace, latency_trace)
    rows = [
        ("eager step, profiled (first kernel to last)", model["eager_window_us"]),
        ("eager step, no profiler", eager_us),
        ("kernel time per step", model["kernel_us"]),
        ("graphed step, predicted (upper bound)", model["predicted_us"]),
        ("graphed step, measured, no profiler", measured_graph_us),
        ("speedup predicted (against the eager step, no profiler)", eager_us / model["predicted_us"]),
        ("speedup measured (over the eager row)", None if measured_graph_us is None else eager_us / measured_graph_us),
        ("speedup the profiled trace would suggest", model["eager_window_us"] / model["predicted_us"]),
    ]
    out = pd.DataFrame(rows, columns=["what", "value"]).set_index("what")
    out["value"] = out["value"].astype(float).round(1)
    return out


def configs_table() -> pd.DataFrame:
    """The decoder presets side by side: layers, sizes, parameters (millions), bf16 weights (MB)."""
    rows = [
        {
            "config": name,
            "layers": c.num_hidden_layers,
            "hidden": c.hidden_size,
            "intermediate": c.intermediate_size,
            "heads": c.num_attention_heads,
            "vocab": c.vocab_size,
            "parameters_m": round(c.num_parameters() / 1e6, 1),
            "bf16_weights_mb": round(c.weight_bytes(2) / 1e6, 1),
        }
        for name, c in DECODER_CONFIGS.items()
    ]
    return pd.DataFrame(rows)


def mlp_flop_share(config) -> float:
    """The MLP's share of a layer's GEMM FLOPs (3 products of hidden x intermediate against 4 of hidden x hidden)."""
    return 3 * config.intermediate_size / (3 * config.intermediate_size + 4 * config.hidden_size)


def percent_shares(breakdown: pd.DataFrame) -> pd.DataFrame:
    """A :func:`part_breakdown` table for reading: ``share`` as a percentage, times in whole microseconds, counts
    whole when every one is (else shown as a mean per step, to one decimal)."""
    if not isinstance(breakdown, pd.DataFrame) or "share" not in breakdown.columns:
        raise TypeError("pass the DataFrame of nb08.part_breakdown(trace)")
    out = breakdown.copy()
    out["share"] = readings.share_percent(out["share"])  # "<0.1" where a share would round to 0.0
    times = [c for c in out.columns if c.endswith("_us") or c.endswith("(us)")]
    out[times] = out[times].round(0)
    whole = "count" not in out.columns or bool((out["count"] == out["count"].round(0)).all())
    out = out.astype({"count": "int64"}) if whole and "count" in out.columns else out.round({"count": 1})
    return out.rename(columns={"share": "share_%"} | ({} if whole else {"count": "count per step (mean)"}))


def fixes() -> pd.DataFrame:
    """The fixes the transfer exercise offers (``fix``: the name to answer with, ``what``)."""
    return pd.DataFrame({"fix": list(FIXES), "what": list(FIXES.values())})


def breakdown_figure(breakdown: pd.DataFrame, title: str | None = None) -> go.Figure:
    """Horizontal bars, one per part, of a :func:`part_breakdown` table (idle time in grey)."""
    if not isinstance(breakdown, pd.DataFrame) or not {"part", "time_us", "share"} <= set(breakdown.columns):
        raise TypeError("pass the DataFrame of nb08.part_breakdown(trace)")
    df = breakdown.iloc[::-1]
    bar = go.Bar(
        x=df["time_us"],
        y=df["part"],
        orientation="h",
        marker_color=["#bbbbbb" if p in _IDLE else "#4c78a8" for p in df["part"]],
        text=[f"{s:.0%}" for s in df["share"]],
        textposition="outside",
        hovertemplate="%{y}: %{x:.1f} us per step<extra></extra>",
    )
    fig = go.Figure(bar)
    fig.update_layout(
        title=title or breakdown.attrs.get("trace", "time by part"),
        xaxis_title=f"{breakdown.attrs.get('basis', 'time')} per step (us)",
        template="plotly_white",
        height=80 + 28 * len(df),
        margin={"l": 10, "r": 40, "t": 50, "b": 40},
    )
    return fig


def gemm_layouts(trace: Trace) -> pd.DataFrame:
    """GEMM kernels of a training step by phase (forward, backward) and layout, per step, with an example name."""
    k = kernel_parts(check_trace(trace))
    if k.empty:
        raise ValueError(f"{trace.info.describe()} has no GPU kernels: GEMM layouts are read from kernel names")
    decoded = decode_kernels(list(k["name"].unique())).set_index("name")
    k = k.join(decoded[["family", "layout"]], on="name")
    gemms = k[(k["family"] == "gemm") & k["part"].ne("optimizer")].copy()
    gemms["phase"] = gemms["part"].map(lambda p: "backward" if p == "backward" else "forward")
    gemms["layout"] = gemms["layout"].map(lambda s: s[:2].upper() if isinstance(s, str) else None)
    steps = max(k["step"].nunique(), 1)
    out = (
        gemms.groupby(["phase", "layout"], dropna=False)
        .agg(kernels=("name", "size"), time_us=("duration_us", "sum"), example=("name", "first"))
        .reset_index()
    )
    out["kernels"] /= steps
    out["time_us"] /= steps
    return out.sort_values(["phase", "time_us"], ascending=[False, False]).reset_index(drop=True)


def bottleneck(breakdown: pd.DataFrame) -> str:
    """The model part with the most time in a :func:`part_breakdown` table (idle rows excluded)."""
    parts = breakdown[~breakdown["part"].isin(_IDLE)]
    if parts.empty:
        raise ValueError("the breakdown has no model part")
    return str(parts.loc[parts["time_us"].idxmax(), "part"])


def run_benchmark(
    configurations: tuple[str, ...] = LIVE_CONFIGURATIONS,
    budget_s: float = 150.0,
    timeout_s: float = 280.0,
    out: Path = LIVE_RESULTS,
) -> Results:
    """Run ``python -m benchmarks decoder`` on this GPU for `configurations`, quietly (a line before, a line after:
    how long it ran, where it wrote); its tables."""
    out = Path(out)
    out.unlink(missing_ok=True)  # never read an earlier run's file
    args = ["-m", "benchmarks", "decoder", "--device", "cuda", "--configurations", ",".join(configurations)]
    args += ["--budget-s", f"{budget_s:g}", "--out", str(out)]
    run = partial(run_program, args, timeout_s=timeout_s, progress=False, show=live.benchmark_line_shown)
    readings.run_quietly(run, "python -m benchmarks decoder", out, budget_s)  # its log would print later answers
    results = load_results(out)
    results.data["live"] = True  # written by this run, here: labelled "measured live", not "recorded"
    return results


def check_variant(
    trace: Trace,
    part: str | None,
    fix: str | None,
    speedup: float | None,
    measured_speedup: float | Sequence[float] | None,
) -> list[Feedback]:
    """The transfer exercise's answers against the variant's trace: the bottleneck part, then a fix and its
    predicted prefill speedup graded as one answer (:func:`.nb08_variant.check_variant`: within 10% of the median
    of `measured_speedup`'s rounds, inside their range widened by 10%, or within 1% of the model
    step / (step - LM head) read from this trace; any number when None)."""
    b = part_breakdown(check_trace(trace)).set_index("part")
    top = bottleneck(b.reset_index())
    model = 1 / (1 - b.loc["lm_head", "share"]) if "lm_head" in b.index and b.loc["lm_head", "share"] < 1 else None
    return variant.check_variant(EXERCISES, top, float(b.loc[top, "share"]), part, fix, speedup, measured_speedup, model)  # fmt: skip


def largest_at_peak(timeline: pd.DataFrame) -> str | Tie:
    """The category holding the most memory at the peak of a :func:`profile_memory` timeline, or a :class:`Tie`
    when that is "unknown": the profiler lost track of those tensors, so the run cannot say which is largest."""
    cats = memory_peaks(timeline).set_index("category").drop("total")
    top = str(cats["at_peak_mb"].idxmax())
    if top != "unknown":
        return top
    tries = timeline.attrs.get("profiles", 1)
    return Tie(
        f"the profiler left {cats.loc[top, 'at_peak_mb']:,.0f} MB of the peak unlabelled ('unknown') in "
        f"{tries} profile{'s' if tries != 1 else ''} of this step, so this run cannot say which category is largest",
        kind=str,
        status=UNDECIDED,
    )


def optimizer_step_us(built: Built, repeats: int = 5) -> float:
    """One ``optimizer.step()`` of a training workload (``workloads.training_view``) timed alone, without the
    profiler: the median of `repeats`, in us, after one whole step (the gradients and the optimizer's state exist)."""
    step = getattr(getattr(built, "fn", None), "step", None)
    if not isinstance(step, TrainingStep):
        raise TypeError("pass a training workload: nb08.workloads.training_view(device, optimizer=...)")
    built.fn(*built.inputs)
    return time_per_call(step.optimizer.step, repeats=repeats, warmup=1) * 1e6


def fix_bounds(prefill: Trace, decode: Trace, results: Results) -> pd.DataFrame:
    """Each fix's bound read from eager traces beside what `results` (a decoder benchmark run) measured without the
    profiler: speedups of prefill (kernel families of `prefill`) and decode (the CUDA-graph prediction, its latency
    from `prefill`), and the peak memory recomputation keeps (4 ``[tokens, intermediate]`` tensors per layer)."""
    k = kernel_parts(check_trace(prefill, "prefill"))
    if k.empty:
        raise ValueError(f"{prefill.info.describe()} has no GPU kernels: the bounds are read from a GPU prefill")
    k = k.join(decode_kernels(list(k["name"].unique())).set_index("name")["family"], on="name")
    steps = max(k["step"].nunique(), 1)
    gemm = k.loc[k["family"] == "gemm", "duration_us"].sum() / steps
    attention = k.loc[(k["family"] == "attention") | k["launched_by"].str.contains("attention", na=False)]
    attention = attention["duration_us"].sum() / steps
    geglu = k.loc[(k["part"] == "mlp") & (k["family"] != "gemm"), "duration_us"].sum() / steps
    table, setup = results.table("configurations").set_index("configuration"), results.table("setup").iloc[0]

    def value(configuration: str, column: str) -> float:
        v = table[column].get(configuration, np.nan) if column in table.columns else np.nan
        return float(v) if v is not None and np.isfinite(v) else np.nan

    tokens = float(setup["prefill_batch"] * setup["prompt_len"])
    eager = tokens / value("eager", "prefill_tokens_per_s") * 1e6  # us per prefill, no profiler
    sdpa = [value(c, "prefill_tokens_per_s") for c in ("sdpa-flash", "sdpa-efficient", "sdpa-cudnn")]
    cfg = DECODER_CONFIGS[str(setup["config"])]
    tensors = 4 * cfg.num_hidden_layers * setup["train_batch"] * setup["train_seq"] * cfg.intermediate_size
    kept_gb = tensors * (2 if str(setup["dtype"]) in ("bfloat16", "float16") else 4) / 1e9
    eager_peak = value("eager", "train_peak_gb")
    rows = [
        ("torch.compile", "prefill speedup", "at most", eager / (gemm + attention),
         value("compile", "prefill_tokens_per_s") / value("eager", "prefill_tokens_per_s")),
        ("the course's fused MLP", "prefill speedup", "at most", eager / (eager - geglu),
         value("course", "prefill_tokens_per_s") / value("eager", "prefill_tokens_per_s")),
        ("the fastest other SDPA backend", "prefill speedup", "at most", eager / (eager - attention),
         np.nanmax(sdpa) / value("eager", "prefill_tokens_per_s") if np.isfinite(sdpa).any() else np.nan),
        ("CUDA graphs", "decode speedup", "at least",
         value("eager", "decode_us") / graph_prediction(decode, prefill)["predicted_us"],
         value("eager", "decode_us") / value("eager+graph", "decode_us")),
        ("recompute the MLPs", "peak memory, x eager", "about", 1 - kept_gb / eager_peak,
         value("recompute", "train_peak_gb") / eager_peak),
    ]  # fmt: skip
    out = pd.DataFrame(rows, columns=["fix", "what", "bound", "predicted", "measured"])
    tests = {"at most": np.less_equal, "at least": np.greater_equal, "about": lambda m, p: abs(m - p) <= 0.05 * p}
    out["holds"] = [
        None if not np.isfinite(m) else bool(tests[b](m, p))
        for b, p, m in zip(out["bound"], out["predicted"], out["measured"])
    ]
    return out.set_index("fix")
