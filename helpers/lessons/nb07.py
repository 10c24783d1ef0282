"""Lesson 07, The attention block, read from traces: its exercises, checkers, views and attention names."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence

import pandas as pd
import plotly.graph_objects as go
import torch

from ..attention import workloads
from ..attention.backends import SDPA_OPS, backend_in_trace, sdpa_backends, sdpa_fn
from ..attention.costs import AttentionShape, attention_flops, manual_attention_plan, score_matrix_bytes, visible_pairs
from ..attention.flex import flex_block_mask, flex_fn
from ..attention.model import manual_attention
from ..checks import positive_int
from ..kernels.flash_attention import attention_reference, flash_attention
from ..kernels.flash_attention_configs import GPU_CONFIGS
from ..measure.ceilings import Ceilings, ceilings_from_dict
from ..measure.memory import peak_memory
from ..measure.numerics import relative_error
from ..measure.profile import profile
from ..measure.roofline import roofline_figure, roofline_frame
from ..measure.timing import time_per_call
from ..measure.workload import default_dtype, workload_device
from ..paths import LOCAL_TRACES_DIR
from ..trace.model import Trace
from ..trace.queries import kernels_per_forward, op_input
from ..triton_env import ensure_interpreter_ready, triton_mode
from . import nb07_readings as readings  # the sentences over live numbers: nb07.readings.ranking_sentence(...)
from .display import reference_trace
from .exercises import MISSING, RIGHT, WRONG, Exercise, Exercises, Feedback, Tie, compare_rounds
from .results import Results, load_results, reference_ceilings

__all__ = [
    "AttentionShape", "SDPA_OPS", "attention_flops", "attention_reference", "backend_in_trace", "flash_attention",
    "flex_block_mask", "flex_fn", "manual_attention", "manual_attention_plan", "peak_memory", "reference_ceilings",
    "roofline_frame", "score_matrix_bytes", "sdpa_backends", "sdpa_fn", "triton_mode", "visible_pairs", "workloads",
    "readings"]  # fmt: skip

_GQA = "with fewer key/value heads than query heads (GQA) the keys and values are repeated first, which adds copies"
EXERCISES = Exercises(
    "07",
    gemms_separate=Exercise(
        "GEMMs per forward, separate q, k, v",
        explain="q, k, v and the output projection: four nn.Linear, one GEMM each.",
        hint="Count the nn.Linear layers in the module printed above.",
    ),
    gemms_fused=Exercise(
        "GEMMs per forward, fused QKV",
        explain="One GEMM as wide as q, k and v together (its output split into three views), then the output projection.",
        hint="The three input projections read the same x.",
    ),
    score_mb=Exercise(
        "MB of one score matrix",
        explain="{shape} x {itemsize} bytes ({dtype}): the recorded input of the softmax.",
        hint="batch x heads x seq x seq x bytes per element, divided by 10^6.",
        rel_tol=0.01,
    ),
    growth=Exercise(
        "score-matrix growth when seq doubles",
        explain="seq x seq entries per (batch, head): twice the length, four times the entries (and the FLOPs).",
        hint="How many entries has a [seq, seq] matrix, and a [2 seq, 2 seq] one?",
        rel_tol=0.01,
    ),
    cpu_choice=Exercise(
        "SDPA's choice on a CPU",
        explain="ATen's CPU flash kernel (_scaled_dot_product_flash_attention_for_cpu): keys a tile at a time "
        "through an online softmax. The memory-efficient and cuDNN kernels exist for CUDA only.",
        hint="Two of the four backends are CUDA kernels; of the other two, does PyTorch prefer the plain reference "
        "or the fused kernel when both can run?",
    ),
    flash_holds_scores=Exercise(
        "flash holds a whole score matrix",
        explain="A fused kernel keeps one tile of scores per block of queries in registers or shared memory, folds "
        "it into a running softmax and moves on: the [seq, seq] matrix is never allocated.",
        hint="How large is one tile of scores next to the whole matrix?",
    ),
    causal_fraction=Exercise(
        "causal share of the FLOPs",
        explain="seq (seq + 1) / 2 of the seq^2 (query, key) pairs: half, plus the diagonal.",
        hint="Count the pairs (i, j) with j <= i.",
        rel_tol=0.01,
        source="computed",
    ),
    compile_finds_sdpa=Exercise(
        "compile finds SDPA",
        explain="Inductor replaces only the attention patterns it has registered (torch/_inductor/fx_passes/"
        "fuse_attention.py); this one is not among them. It compiles the graph like any other: the two products "
        "stay GEMMs, and the scaling, the mask and the softmax are fused into generated code.",
        hint="A pattern matcher replaces graphs it knows op for op: is a boolean masked_fill between a scaling and a "
        "softmax the form attention usually takes in a model?",
    ),
    faster_window=Exercise(
        "faster for a sliding window",
        explain="The window keeps {kept:.1%} of the score matrix; FlexAttention's BlockMask skips {skipped:.0f}% of the "
        "tiles, while SDPA with a dense boolean mask visits every tile it cannot prove empty.",
        hint="Count the 128 x 128 tiles each one visits.",
    ),
    kernel=Exercise(
        "your flash-attention kernel",
        hint="Write the body of my_online_softmax_update in order: the new running maximum, then p (this tile's "
        "exponentials, shifted by that maximum), then alpha (how much the old running values shrink when the maximum "
        "grows), then l_i and acc. Are l_i and acc both rescaled before this tile's share is added?",
    ),
    shape_bytes=Exercise(
        "score-matrix bytes at your shape",
        explain="batch x heads x seq_q x seq_k x {itemsize} bytes ({dtype}), read from the softmax's input.",
        hint="batch * heads * seq * seq * bytes per element",
    ),
    shape_kernels=Exercise(
        "kernels per call at your shape",
        explain="{what} per call: two batched products, the scaling, the copy inside masked_fill (on a GPU a "
        f"device-to-device memcpy, not a kernel), the fill, the softmax. None depends on the sizes; {_GQA}.",
        hint="Count the steps of manual_attention, and remember what masked_fill (out of place) does first.",
    ),
)
check, hint, summary = EXERCISES.check, EXERCISES.hint, EXERCISES.summary
reveal, answered, evidence = EXERCISES.reveal, EXERCISES.answered, EXERCISES.evidence  # answers once right or asked for
assert_all_correct, reset = EXERCISES.assert_all_correct, EXERCISES.reset


_record = EXERCISES.report


# -- the learner's kernel ------------------------------------------------------------------------

# (batch, heads, seq, head_dim, causal): lengths that are no multiple of any tile, both masks.
CPU_CASES = ((1, 2, 37, 16, True), (2, 1, 50, 32, False), (1, 1, 70, 16, True))
GPU_CASES = ((2, 4, 1000, 64, True), (1, 2, 333, 64, False), (1, 8, 2048, 128, True))
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 2e-2, torch.float16: 1e-2}


def check_attention_kernel(
    fn: Callable | None, cases: Sequence[tuple] | None = None, dtype: torch.dtype | None = None
) -> Feedback:
    """Run the learner's ``fn(q, k, v, out, causal)`` on awkward lengths (``out`` NaN-filled) against the float64
    reference; all-NaN output is "not answered yet", an exception is feedback."""
    if fn is None or fn is Ellipsis:
        return _record("kernel", MISSING, "write my_online_softmax_update, run its cell, then run this cell again")
    if not callable(fn):
        raise TypeError(f"pass your launcher, e.g. my_attention (fn(q, k, v, out, causal)), got {type(fn).__name__}")
    ensure_interpreter_ready()
    device = torch.device("cuda" if triton_mode() == "cuda" and torch.cuda.is_available() else "cpu")
    dtype = dtype or (torch.bfloat16 if device.type == "cuda" else torch.float32)
    if dtype not in TOLERANCE:
        raise ValueError(f"dtype must be one of {list(TOLERANCE)}, got {dtype}")
    tol, worst = TOLERANCE[dtype], 0.0
    cases = list(cases or (GPU_CASES if device.type == "cuda" else CPU_CASES))
    for i, (b, h, s, d, causal) in enumerate(cases):
        g = torch.Generator().manual_seed(100 + i)
        q, k, v = (torch.randn(b, h, s, d, generator=g).to(device, dtype) for _ in range(3))
        out = torch.full_like(q, float("nan"))
        where = f"[{b}, {h}, {s}, {d}] {str(dtype).removeprefix('torch.')}, causal={causal}"
        try:
            with warnings.catch_warnings():  # the interpreter's numpy warns on 0 / 0 in an unfinished kernel
                warnings.simplefilter("ignore", RuntimeWarning)
                fn(q, k, v, out, causal)
            if device.type == "cuda":
                torch.cuda.synchronize()
        except Exception as err:  # noqa: BLE001 - feedback, not a traceback
            msg = str(err).strip().splitlines()[-1][:300] if str(err).strip() else ""
            return _record("kernel", WRONG, f"your kernel raised {type(err).__name__}: {msg} (on {where}).")
        finite = torch.isfinite(out)
        if not bool(finite.any()) and not bool(torch.isinf(out).any()):
            return _record("kernel", MISSING, "the output is still all NaN: nothing is written yet")
        if not bool(finite.all()):
            bad = int((~finite).sum())
            return _record(
                "kernel",
                WRONG,
                f"{bad} of {out.numel()} outputs are NaN or inf on {where}. Is l_i rescaled by alpha? Is the first "
                "tile's alpha exp2(-inf) = 0, not NaN?",
            )
        err = relative_error(out, attention_reference(q, k, v, causal))
        worst = max(worst, err)
        if not err <= tol:
            return _record("kernel", WRONG, f"relative error {err:.1e} on {where}; the limit is {tol:.0e}.")
    where = "GPU" if device.type == "cuda" else "Triton CPU interpreter"
    return _record("kernel", RIGHT, f"matches the float64 reference: largest relative error {worst:.1e} (limit {tol:.0e}) on {len(cases)} cases, {where}.", fn)  # fmt: skip


# -- predictions at the learner's own shape -------------------------------------------------------

# The compute operators of the hand-written attention on a CPU (one kernel each on a GPU).
MANUAL_COMPUTE_OPS = ("aten::bmm", "aten::mul", "aten::clone", "aten::masked_fill_", "aten::_softmax")
MAX_PREDICTION_SCORE_BYTES = {"cpu": 2**28, "cuda": 2**32}


def check_attention_prediction(
    shape: AttentionShape | None, score_bytes: int | None, kernels: int | None
) -> tuple[Feedback, Feedback]:
    """Profile the hand-written attention at the learner's `shape` here; check the score-matrix bytes and the kernels per call.

    Kernels per call: on a GPU kernels and copies (cuBLAS's workspace memsets not counted); on a CPU
    the compute operators (ATen runs each inline).
    """  # fmt: skip
    if shape is None:
        unknown = {"itemsize": "?", "dtype": "?", "what": "kernels"}  # nothing measured yet
        return check("shape_bytes", None, 0, details=unknown), check("shape_kernels", None, 0, details=unknown)
    if not isinstance(shape, AttentionShape):
        raise TypeError(f"my_shape must be a helpers.nb07.AttentionShape, got {type(shape).__name__}")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    nbytes = score_matrix_bytes(shape, default_dtype(device))
    if nbytes > MAX_PREDICTION_SCORE_BYTES[device.type]:  # checked before any tensor is made
        raise ValueError(
            f"at {shape.describe()} one score matrix is {nbytes / 1e6:,.0f} MB: pick a shape under "
            f"{MAX_PREDICTION_SCORE_BYTES[device.type] / 1e6:,.0f} MB here, so the check runs in seconds"
        )
    built = workloads.manual(device, None, shape)
    trace = profile(built.fn, *built.inputs, steps=1, warmup=1, label="your_shape")
    if device.type == "cuda":
        measured, what = kernels_per_forward(trace, kinds=("kernel", "memcpy")), "GPU kernels and copies"
    else:
        ops = trace.ops().set_index("name")
        measured = int(sum(ops.loc[o, "calls"] for o in MANUAL_COMPUTE_OPS if o in ops.index) // len(trace.steps))
        what = "compute operators"
    dtype = dict(itemsize=built.dtype.itemsize, dtype=str(built.dtype).removeprefix("torch."))
    return (
        check("shape_bytes", score_bytes, op_input(trace, "aten::_softmax").nbytes, details=dtype),
        check("shape_kernels", kernels, measured, details={"what": what}),
    )


# -- views ---------------------------------------------------------------------------------------

# Refuse sweeps whose hand-written attention would need more than this many bytes per score matrix.
MAX_SCORE_BYTES = {"cpu": 2**30, "cuda": 16 * 2**30}


def score_sweep(seqs: Sequence[int], heads: int = 4, head_dim: int = 64, batch: int = 1, repeats: int = 5, device=None, log: Callable[[str], None] | None = None) -> pd.DataFrame:  # fmt: skip
    """Per sequence length: the score matrix predicted and measured (the softmax's recorded input), the plan's
    bytes, causal GFLOP, and for the hand-written attention and SDPA the median ms per call and peak MB."""
    if not seqs:
        raise ValueError("give at least one sequence length")
    dev = workload_device(device)
    dtype = default_dtype(dev)
    shapes = [AttentionShape(batch=batch, heads=heads, seq=positive_int("seq", s), head_dim=head_dim) for s in seqs]
    for shape in shapes:  # every length checked before anything is allocated
        if score_matrix_bytes(shape, dtype) > MAX_SCORE_BYTES[dev.type]:
            raise ValueError(f"seq {shape.seq}: one score matrix would be over the {MAX_SCORE_BYTES[dev.type] / 1e9:.1f} GB this sweep allows here")  # fmt: skip
    rows, sdpa = [], sdpa_fn(None)
    for shape in shapes:
        built = workloads.manual(dev, dtype, shape)
        predicted = score_matrix_bytes(shape, dtype)
        if log:
            log(f"seq {shape.seq}: {shape.describe()}: profiling")  # its size in MB would answer the growth guess
        q, k, v = built.inputs
        trace = profile(built.fn, q, k, v, steps=1, warmup=1, label=f"manual_{shape.seq}")
        rows.append(
            {
                "seq": shape.seq,
                "predicted_score_mb": predicted / 1e6,
                "measured_score_mb": op_input(trace, "aten::_softmax").nbytes / 1e6,
                "plan_mb": float(manual_attention_plan(shape, dtype)["bytes"].sum()) / 1e6,
                "gflop": attention_flops(shape, "causal") / 1e9,
                "manual_ms": time_per_call(built.fn, q, k, v, repeats=repeats, warmup=1) * 1e3,
                "sdpa_ms": time_per_call(sdpa, q, k, v, repeats=repeats, warmup=1) * 1e3,
                "manual_peak_mb": peak_memory(built.fn, q, k, v) / 1e6,
                "sdpa_peak_mb": peak_memory(sdpa, q, k, v) / 1e6,
            }
        )
    frame = pd.DataFrame(rows)
    frame.attrs["shape"] = f"batch {batch}, {heads} heads, head dim {head_dim}, {dtype} on {dev}"
    return frame


def timing_rounds(fns: Mapping[str, Callable], *inputs, rounds: int = 5, repeats: int = 3) -> dict[str, list[float]]:
    """Milliseconds per call of each function, `rounds` times (each the median of `repeats` calls), interleaved."""
    out: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(positive_int("rounds", rounds)):
        for name, fn in fns.items():
            out[name].append(time_per_call(fn, *inputs, repeats=repeats, warmup=1) * 1e3)
    return out


def faster_of(rounds: Mapping[str, Sequence[float]]) -> str | Tie:
    """The name of the two whose rounds are faster, or a :class:`Tie` when the difference is inside the spread
    (:func:`~helpers.lessons.rounds.too_close`)."""
    (a, ra), (b, rb) = rounds.items()
    verdict = compare_rounds(ra, rb)
    if verdict.tie:
        return Tie(f"{a} against {b}: {verdict.describe('ms')}; {verdict.why('ms')}", str)
    return a if verdict.a_faster else b


# The names a learner may write for SDPA's backends (the keys of sdpa_backends' table).
BACKEND_ALIASES = {"flashattention": "flash", "flash attention": "flash", "memory efficient": "efficient",
                   "mem efficient": "efficient", "cudnn attention": "cudnn"}  # fmt: skip


def _canonical(answer: object, aliases: Mapping[str, str]) -> object:
    """A learner's name in any case, with spaces, underscores or hyphens, as the table's key (else as written)."""
    if not isinstance(answer, str):
        return answer
    key = " ".join(answer.strip().lower().split())
    for form in (key, key.replace("_", " "), key.replace("-", " ")):
        if form in aliases:
            return aliases[form]
    return key


def check_cpu_choice(answer: object, expected: str) -> Feedback:
    """SDPA's backend on a CPU: the learner's name (any case, the usual spellings) against the one that ran."""
    return check("cpu_choice", _canonical(answer, BACKEND_ALIASES), expected)


# The names a learner may write for each side of the sliding-window race.
WINDOW_ALIASES = {"flex": "flex", "flexattention": "flex", "flex attention": "flex", "sdpa": "sdpa",
                  "scaled dot product attention": "sdpa"}  # fmt: skip


def check_faster_window(answer: object, rounds: Mapping[str, Sequence[float]], details: Mapping) -> Feedback:
    """The sliding-window race: the learner's ``"sdpa"`` or ``"flex"`` against the rounds (a tie accepts either)."""
    return check("faster_window", _canonical(answer, WINDOW_ALIASES), faster_of(rounds), details=dict(details))


# A kernel is launched by the innermost operator: the clone's copy by aten::copy_ inside aten::clone.
_LAUNCHER_ALIASES = {"aten::copy_": "aten::clone"}


def plan_kernel_costs(kernels: pd.DataFrame, shape: AttentionShape, dtype: torch.dtype | str) -> pd.DataFrame:
    """Each kernel of one hand-written call with the bytes and FLOPs of its plan step, matched in order by the
    launching op (unexplained kernels counted in ``attrs["unmatched"]``)."""
    missing = {"short_name", "duration_us", "launched_by"} - set(kernels.columns)
    if missing:
        raise ValueError(f"kernels must be a helpers.kernel_table(...) frame; missing columns {sorted(missing)}")
    unused, rows, unmatched = list(manual_attention_plan(shape, dtype).itertuples()), [], 0
    for k in kernels.itertuples():
        op = _LAUNCHER_ALIASES.get(str(k.launched_by), str(k.launched_by))
        # the clone inside masked_fill is a device-to-device memcpy on a GPU: a pass over the scores all the same
        counted = getattr(k, "kind", "kernel") in ("kernel", "memcpy")
        step = next((p for p in unused if p.aten_op == op), None) if counted else None
        if step is None:
            unmatched += 1
            continue
        unused.remove(step)
        flops = None if pd.isna(step.flops) else int(step.flops)
        rows.append({"name": step.step, "kernel": k.short_name, "duration_us": float(k.duration_us), "bytes": int(step.bytes), "flops": flops})  # fmt: skip
    out = pd.DataFrame(rows, columns=["name", "kernel", "duration_us", "bytes", "flops"])
    out["flops"] = out["flops"].astype(object).where(out["flops"].notna(), None)  # None, not NaN: no FLOPs counted
    out.attrs["unmatched"], out.attrs["steps_without_kernel"] = unmatched, [p.step for p in unused]
    return out


def gpu_view(name: str) -> Trace | None:
    """A GPU profile of workload `name` (a key of ``workloads.GPU_VIEWS``): live on a GPU, else the H200 reference, else None."""
    if name not in workloads.GPU_VIEWS:
        raise ValueError(f"unknown view {name!r}; known: {', '.join(workloads.GPU_VIEWS)}")
    if torch.cuda.is_available():
        try:
            built = workloads.GPU_VIEWS[name](torch.device("cuda"))
            return profile(built.fn, *built.inputs, label=name)
        except (ImportError, RuntimeError):  # e.g. no cuDNN attention on this GPU: show the recording instead
            pass
    return reference_trace(f"h200_{name}", missing_ok=True)


def flash_config_table() -> pd.DataFrame:
    """The course kernel's GPU tile configurations, with the shared memory their K/V pipeline and Q tile need at head dim 128."""
    rows = []
    for c in GPU_CONFIGS:
        kv_kb, q_kb = 2 * c.block_n * 128 * 2 * c.num_stages // 1024, c.block_m * 128 * 2 // 1024
        rows.append({"BLOCK_M": c.block_m, "BLOCK_N": c.block_n, "num_warps": c.num_warps, "num_stages": c.num_stages, "kv_smem_kb_at_d128": kv_kb, "q_smem_kb_at_d128": q_kb})  # fmt: skip
    return pd.DataFrame(rows)


# -- the benchmark --------------------------------------------------------------------------------

LIVE_BENCHMARK = ("--head-dims", "128", "--seqs", "4096", "--variants", "sdpa-flash,sdpa-cudnn,sdpa-efficient,course,sdpa-math", "--budget-s", "150")  # fmt: skip


def run_benchmark(timeout_s: float = 420.0, ceilings: Ceilings | None = None) -> Results:
    """A short run of ``python -m benchmarks attention`` on this GPU, as a program (one line on screen when done);
    its results file read back. Given `ceilings` (the lesson's one set), its tables divide by them."""
    out = LOCAL_TRACES_DIR / "attention_benchmark.json"
    args = ["-m", "benchmarks", "attention", *LIVE_BENCHMARK, "--out", str(out), *readings.ceilings_args(ceilings, LOCAL_TRACES_DIR)]  # fmt: skip
    readings.run_quietly(args, timeout_s, out)
    return load_results(out)


def wall_and_kernel_times(results: Results, head_dim: int, seq: int) -> pd.DataFrame:
    """Per variant at one (head_dim, seq) of an attention benchmark run: the profiled kernel time per call beside
    the timed wall time per call, fastest first; ``wall_over_kernel`` above 1 is time between and around kernels."""
    rows = results.table("rows")
    at = rows[(rows["head_dim"] == head_dim) & (rows["seq"] == seq) & (rows["status"] == "ok")]
    if at.empty:
        raise ValueError(f"{results.name} has no row at head_dim {head_dim}, seq {seq}")
    out = at[["variant", "batch", "kernels_per_call", "kernel_us", "time_us"]].sort_values("time_us")
    return out.assign(wall_over_kernel=out["time_us"] / out["kernel_us"]).reset_index(drop=True)


def benchmark_roofline(results: Results) -> go.Figure:
    """The stored ``roofline`` table of an attention benchmark run, drawn against the ceilings its tables divide by."""
    judged, roof = results.table("judged_against").iloc[0], results.table("roofline")
    ceilings = reference_ceilings() if judged["source"] == "reference" else ceilings_from_dict(results.data["ceilings"])
    fig = roofline_figure(roof, ceilings)
    return fig.update_layout(title=f"causal attention, head dim {roof['head_dim'].iloc[0]}, seq {roof['seq'].iloc[0]}: {results.label}")  # fmt: skip
