"""Lesson 06, writing your own fused kernels: what this notebook alone uses."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..kernels.gate_up import pack_gate_up
from ..kernels.gate_up_tuning import config_table
from ..kernels.geglu_pointwise import geglu
from ..kernels.launch_plans import plans_table
from ..kernels.modules import FusedGeGLUMLP
from ..measure.memory import saved_bytes
from ..mlp.model import SimpleGeGLUMLP, geglu_reference, reference_forward
from ..mlp.plans import PLANS, geglu_bytes, geglu_mlp_flops, plan_bytes, plan_floor_us, plan_kernels, plans_frame
from ..mlp.variants import build_variant, variant_table
from ..triton_env import triton_mode
from .exercises import Exercise, Exercises, Feedback
from .kernel_exercises import check_geglu_kernel as _check_geglu_kernel
from .kernel_exercises import kernel_device, time_geglu_kernel
from .mlp_results import mlp_ceilings, mlp_roofline, run_mlp_benchmark, sweep_figure

__all__ = [
    "PLANS", "FusedGeGLUMLP", "SimpleGeGLUMLP", "build_variant", "config_table", "geglu", "geglu_reference",
    "kernel_device", "plan_bytes", "plan_floor_us", "plan_kernels", "plans_frame", "plans_table",
    "reference_forward", "saved_bytes", "time_geglu_kernel", "variant_table", "pack_gate_up", "geglu_bytes",
    "geglu_mlp_flops", "mlp_ceilings", "mlp_roofline", "run_mlp_benchmark", "sweep_figure", "triton_mode",
]  # fmt: skip

EXERCISES = Exercises(
    "06",
    geglu_kernel=Exercise(
        "kernel 1: GeGLU in Triton",
        hint="Load gate and up with the mask (as float32), compute gelu_tanh(g) * u, store it with the mask.",
        source="reference",
    ),
    bytes_saved=Exercise(
        "bytes kernel 2 does not move",
        explain="gate and up ([tokens, hidden] each) are written by the GEMMs and read by the GeGLU: four passes of "
        "{tensor_mb:.0f} MB; and one GEMM reads x once where two GEMMs read it twice.",
        hint="Which [tokens, hidden] tensors can stay in registers? Each of them was written once and read once.",
        rel_tol=0.01,
        source="computed",
    ),
    predicted_speedup=Exercise(
        "predicted speed-up of kernel 2's plan",
        explain="Both plans do the same GEMM FLOPs; the pointwise-fused plan adds the GeGLU pass, memory bound at "
        "{geglu_us:.1f} us.",
        hint="Floor of a plan = sum of its kernels' floors. The GEMMs cost FLOPs / matmul rate; the GeGLU bytes / "
        "bandwidth.",
        rel_tol=0.01,
        source="computed",
    ),
    fused_kernels_per_forward=Exercise(
        "kernels per forward, course-fused",
        explain="One Triton kernel for gate, up and the GeGLU; one cuBLAS GEMM for the down projection.",
        hint="Which of eager's five kernels does kernel 2 replace?",
    ),
    sync_can_beat_kernels=Exercise(
        "a synchronised call beats its kernels",
        explain="The kernels of one call run one after another on the GPU, and the wall clock also counts the "
        "host's work before the first kernel starts and the wait at the end. The smallest margin in this "
        "recording: {margin_us:.0f} us ({variant}).",
        hint="The kernels of one forward depend on each other: can they overlap?",
    ),
    gate_tiles_at_128=Exercise(
        "tiles of the gate GEMM at M=128",
        explain="ceil(128 / 256) x ceil(3072 / 128) = 1 x 24: only 24 of the SMs get a tile.",
        hint="Tiles = ceil(rows / tile rows) x ceil(columns / tile columns).",
        source="computed",
    ),
    kept=Exercise(
        "[tokens, hidden] tensors kept for the backward",
        explain="Eager keeps gate and up (for the GeLU and the product), gelu(gate) (for the product) and h (for "
        "the down projection); save mode keeps gu (two) and h; recompute keeps only x.",
        hint="Which tensors does each backward formula read?",
    ),
    fp8_target_at_blog=Exercise(
        "FP8 at 1.4x the bf16 fused kernel, at the blog's shape",
        explain="At the blog's shape the FP8 path (quantizing x included) ran at {blog:.2f}x the bf16 kernel, at 4096 -> 14336 at "
        "{big:.2f}x.",
        hint="What does the FP8 path do to x before its GEMM, and how long does that take next to a short GEMM?",
    ),
)
check, hint, summary = EXERCISES.check, EXERCISES.hint, EXERCISES.summary
assert_all_correct, reset = EXERCISES.assert_all_correct, EXERCISES.reset


def check_geglu_kernel(fn, **kwargs) -> Feedback:
    """Check the learner's GeGLU launcher and record the result in this lesson's book."""
    return EXERCISES.record("geglu_kernel", _check_geglu_kernel(fn, **kwargs))


def sync_margin(times: pd.DataFrame) -> dict[str, object]:
    """The variant whose synchronised call is closest to its kernel time, and that margin (us)."""
    if not {"variant", "kernel_us", "e2e_sync_us"} <= set(times.columns):
        raise ValueError("times needs the columns variant, kernel_us and e2e_sync_us")
    rows = times.dropna(subset=["kernel_us", "e2e_sync_us"])
    if rows.empty:
        raise ValueError("no variant has both a kernel time and a synchronised time")
    margin = rows["e2e_sync_us"] - rows["kernel_us"]
    i = margin.idxmin()
    return {"variant": str(rows.loc[i, "variant"]), "margin_us": float(margin[i])}


# A difference of one run within this share of the larger number is read as a tie: without rounds the lesson
# has no spread, and on a shared GPU single timings move by more than a few percent.
TIE_SHARE = 0.10


def _tie(x: float, y: float, share: float = TIE_SHARE) -> bool:
    return abs(x - y) <= share * max(abs(x), abs(y))


def host_lead_sentence(times: pd.DataFrame, a: str = "course-fused", b: str = "compile") -> str:
    """Whether ``a``'s kernel-time lead over ``b`` grows, shrinks or is lost once each call is synchronised."""
    t = times.set_index("variant")
    missing = {a, b, "eager"} - set(t.index)
    if missing:
        raise ValueError(f"times has no row for {sorted(missing)}")
    ka, kb, sa, sb = (float(t.loc[v, c]) for c, v in (("kernel_us", a), ("kernel_us", b), ("e2e_sync_us", a),
                                                       ("e2e_sync_us", b)))  # fmt: skip
    oa, ob = (float(t.loc[v, "host_overhead_us"]) for v in (a, b))
    lead_k, lead_s = kb - ka, sb - sa
    if _tie(sa, sb):
        verdict = f"a tie within {TIE_SHARE:.0%} (kernel-time lead {lead_k:.0f} us)"
    elif lead_s < 0:
        verdict = (
            f"{b} is ahead by {-lead_s:.0f} us: the extra host work of {a} eats its kernel-time lead of {lead_k:.0f} us"
            if lead_k > 0
            else f"{b} is ahead by {-lead_s:.0f} us"
        )
    elif lead_k <= 0:
        verdict = f"{a} is ahead by {lead_s:.0f} us with no kernel-time lead: its host work is the smaller"
    elif lead_s > lead_k:
        verdict = f"{a}'s smaller host work makes its kernel-time lead of {lead_k:.0f} us grow to {lead_s:.0f} us"
    else:
        verdict = f"{a}'s extra host work shrinks its kernel-time lead of {lead_k:.0f} us to {lead_s:.0f} us"
    return (
        f"Host overhead per call (synchronised minus kernel time): {a} {oa:.0f} us, {b} {ob:.0f} us, eager "
        f"{float(t.loc['eager', 'host_overhead_us']):.0f} us. Synchronised, {a} takes {sa:.0f} us against {b}'s "
        f"{sb:.0f} us: {verdict}. These are single numbers of one run, without their spread: a difference of a "
        "few percent may be that run's noise."
    )


def hiding_sentence(times: pd.DataFrame) -> str:
    """Which variants' host work hid behind the GPU's back to back (within the tie share of the kernel time)."""
    if not {"variant", "kernel_us", "e2e_nosync_us"} <= set(times.columns):
        raise ValueError("times needs the columns variant, kernel_us and e2e_nosync_us")
    t = times.dropna(subset=["kernel_us", "e2e_nosync_us"])
    if t.empty:
        raise ValueError("no variant has both a kernel time and a back-to-back time")
    hidden = t[t["e2e_nosync_us"] <= (1 + TIE_SHARE) * t["kernel_us"]]["variant"].tolist()
    exposed = t[t["e2e_nosync_us"] > (1 + TIE_SHARE) * t["kernel_us"]]
    parts = []
    if hidden:
        parts.append(
            f"Back to back in this run, the host's work hid behind the GPU's for {', '.join(map(str, hidden))} "
            f"(within {TIE_SHARE:.0%} of their kernel time): there the kernel time decides."
        )
    if not exposed.empty:
        shown = ", ".join(
            f"{r.variant} ({r.e2e_nosync_us:.0f} us against {r.kernel_us:.0f} us of kernels)"
            for r in exposed.itertuples()
        )
        parts.append(
            f"It did not for {shown}: their host took longer to issue a call than the GPU took to run it, so the "
            "host set the pace even without waiting."
        )
    return " ".join(parts)


def training_sentence(
    training: pd.DataFrame, modes: Sequence[str] = ("course-fused-save", "course-fused-recompute")
) -> str:
    """What the training steps say: the fastest variant, each fused mode against eager (a tie within the tie
    share), time and memory, with the caveat of a single run."""
    if not {"variant", "step_us", "peak_mb"} <= set(training.columns) or training.empty:
        raise ValueError("training must be a non-empty table with the columns variant, step_us and peak_mb")
    t = training.dropna(subset=["step_us"]).set_index("variant")
    fastest = t["step_us"].idxmin()
    parts = [f"Fastest step here: **{fastest}** ({t.loc[fastest, 'step_us']:.0f} us)."]
    if "eager" in t.index:
        e = t.loc["eager"]
        for mode in (m for m in modes if m in t.index):
            r = t.loc[mode]
            if _tie(r["step_us"], e["step_us"]):
                speed = f"level with it, within {TIE_SHARE:.0%}"
            else:
                speed = "slower" if r["step_us"] > e["step_us"] else "faster"
            parts.append(
                f"`{mode}`: {r['step_us'] / e['step_us']:.2f}x eager's step time ({speed}), "
                f"{r['peak_mb']:.0f} MB peak against eager's {e['peak_mb']:.0f} MB."
            )
    parts.append(
        "Each step time is one run without its spread: on a shared GPU a step can move between runs by more than "
        "these differences, so read the times as this run's, and the peak memory (which does not move) as the firm result."
    )
    return " ".join(parts)
