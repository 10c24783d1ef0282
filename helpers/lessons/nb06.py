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
from .mlp_results import LIVE_LEFT_OUT, mlp_ceilings, mlp_roofline, run_mlp_benchmark, sweep_figure
from .nb06_readings import TIE_SHARE, _tie, available_rows, race_sentence, speedup_phrase, training_view
from .nb06_sweep import mark_disturbed, sweep_disturbed, sweep_winners_read
from .nb06_times import disturbed_times, hiding_sentence, replay_under_kernels_sentence

__all__ = [
    "PLANS", "FusedGeGLUMLP", "SimpleGeGLUMLP", "build_variant", "config_table", "geglu", "geglu_reference",
    "kernel_device", "plan_bytes", "plan_floor_us", "plan_kernels", "plans_frame", "plans_table",
    "reference_forward", "saved_bytes", "time_geglu_kernel", "variant_table", "pack_gate_up", "geglu_bytes",
    "geglu_mlp_flops", "mlp_ceilings", "mlp_roofline", "run_mlp_benchmark", "sweep_figure", "triton_mode",
    "clocks_disagree", "disturbed_times", "hiding_sentence", "sync_disturbed", "floor_bound_sentence", "graph_disturbed", "graphed_sentence", "race_sentence", "speedup_phrase",
    "available_rows", "training_view", "LIVE_LEFT_OUT", "mark_disturbed", "sweep_disturbed", "sweep_winners_read", "replay_under_kernels_sentence",
]  # fmt: skip

EXERCISES = Exercises(
    "06",
    # in the order the notebook asks them, each named as the variable the learner fills in
    fused_kernels_per_forward=Exercise(
        "kernels per forward, course-fused",
        explain="One Triton kernel for gate, up and the GeGLU; one cuBLAS GEMM for the down projection.",
        hint="Which of eager's five kernels does kernel 2 replace?",
    ),
    my_geglu_kernel=Exercise(
        "kernel 1: GeGLU in Triton",
        hint="Load gate and up with the mask (as float32), compute gelu_tanh(g) * u, store it with the mask.",
        source="reference",
    ),
    bytes_saved=Exercise(
        "bytes kernel 2 does not move",
        explain="gate and up ([tokens, hidden] each) are written by the GEMMs and read by the GeGLU: four passes of "
        "{tensor_mb:.0f} MB; and one GEMM reads x once where two GEMMs read it twice.",
        hint="Which [tokens, hidden] tensors can stay in registers? Each of them was written once and read once. "
        "And how many times is x read by two GEMMs, against one?",
        rel_tol=0.01,
        source="computed",
        show=lambda b: f"{b / 1e6:.0f} MB",
    ),
    predicted_speedup=Exercise(
        "predicted speed-up of kernel 2's plan",
        explain="Both plans do the same GEMM FLOPs; the pointwise-fused plan adds the GeGLU pass, memory bound at "
        "{geglu_us:.1f} us.",
        hint="Floor of a plan = sum of its kernels' floors. The GEMMs cost FLOPs / matmul rate; the GeGLU bytes / "
        "bandwidth.",
        rel_tol=0.01,
        source="computed",
        show=lambda r: f"{r:.2f}x",
    ),
    sync_can_beat_kernels=Exercise(
        "a synchronised call beats its kernels",
        explain="The kernels of one call run one after another on the GPU, and the wall clock also counts the "
        "host's work before the first kernel starts and the wait at the end. The smallest margin in {where}: "
        "{margin_us:.0f} us ({variant}).",
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
    fp8_at_1_4x_at_blog=Exercise(
        "FP8 at 1.4x the bf16 fused kernel, at the blog's shape",
        explain="At the blog's shape the FP8 path (quantizing x included) ran at {blog:.2f}x the bf16 kernel, at 4096 -> 14336 at "
        "{big:.2f}x.",
        hint="What does the FP8 path do to x before its GEMM, and how long does that take next to a short GEMM?",
    ),
)
check, hint, summary = EXERCISES.check, EXERCISES.hint, EXERCISES.summary
reveal, answered, evidence = EXERCISES.reveal, EXERCISES.answered, EXERCISES.evidence  # answers once right or asked for
assert_all_correct, reset = EXERCISES.assert_all_correct, EXERCISES.reset


def check_geglu_kernel(fn, **kwargs) -> Feedback:
    """Check the learner's GeGLU launcher and record the result in this lesson's book."""
    return EXERCISES.record("my_geglu_kernel", _check_geglu_kernel(fn, **kwargs))


def sync_margin(times: pd.DataFrame, live: bool = False) -> dict[str, object]:
    """The variant whose synchronised call is closest to its kernel time, that margin (us), and where it was
    measured (``"this run"`` when `live`, else ``"this recording"``)."""
    if not isinstance(live, bool):
        raise TypeError(f"live must be True or False, got {live!r}")
    if not {"variant", "kernel_us", "e2e_sync_us"} <= set(times.columns):
        raise ValueError("times needs the columns variant, kernel_us and e2e_sync_us")
    rows = times.dropna(subset=["kernel_us", "e2e_sync_us"])
    if rows.empty:
        raise ValueError("no variant has both a kernel time and a synchronised time")
    margin = rows["e2e_sync_us"] - rows["kernel_us"]
    i = margin.idxmin()
    where = "this run" if live else "this recording"
    return {"variant": str(rows.loc[i, "variant"]), "margin_us": float(margin[i]), "where": where}


def host_lead_sentence(times: pd.DataFrame, a: str = "course-fused", b: str = "compile") -> str:
    """Whether ``a``'s kernel-time lead over ``b`` grows, shrinks or is lost once each call is synchronised. A
    variant whose synchronised call took longer than issuing it plus its kernels (:func:`sync_disturbed`) gets no
    host overhead, and no lead is read from its synchronised time."""
    t = times.set_index("variant")
    missing = {a, b, "eager"} - set(t.index)
    if missing:
        raise ValueError(f"times has no row for {sorted(missing)}")
    ka, kb, sa, sb = (float(t.loc[v, c]) for c, v in (("kernel_us", a), ("kernel_us", b), ("e2e_sync_us", a),
                                                       ("e2e_sync_us", b)))  # fmt: skip
    oa, ob = (float(t.loc[v, "host_overhead_us"]) for v in (a, b))
    lead_k, lead_s = kb - ka, sb - sa
    disturbed = sync_disturbed(times)
    both = [v for v in (a, b) if v in disturbed]
    if both:
        verdict = (
            f"the synchronised {'times' if len(both) > 1 else 'time'} of {' and '.join(both)} contradict"
            f"{'' if len(both) > 1 else 's'} the other clocks (longer than issuing a call plus its kernels), so this "
            "run reads no lead from them"
        )
    elif _tie(sa, sb):
        verdict = f"a tie within {TIE_SHARE:.0%} (kernel-time lead {lead_k:.0f} us)"
    elif lead_s < 0:
        verdict = (
            f"{b} is ahead by {-lead_s:.0f} us: the extra host work of {a} eats its kernel-time lead of {lead_k:.0f} us"
            if lead_k > 0
            else f"{b} is ahead by {-lead_s:.0f} us"
        )
    elif lead_k <= 0:
        verdict = f"{a} is ahead by {lead_s:.0f} us with no kernel-time lead: its host work is the smaller"
    elif abs(lead_s - lead_k) <= TIE_SHARE * max(sa, sb):
        # the host overheads differ by exactly lead_s - lead_k: the tie share of the synchronised times decides
        verdict = (
            f"{a}'s kernel-time lead of {lead_k:.0f} us comes out at {lead_s:.0f} us synchronised: the host overheads "
            f"per call differ by {abs(oa - ob):.0f} us"
        )
    elif lead_s > lead_k:
        verdict = f"{a}'s smaller host work makes its kernel-time lead of {lead_k:.0f} us grow to {lead_s:.0f} us"
    else:
        verdict = f"{a}'s extra host work shrinks its kernel-time lead of {lead_k:.0f} us to {lead_s:.0f} us"
    overheads = ", ".join(
        f"{v} too disturbed to read" if v in disturbed else f"{v} {float(t.loc[v, 'host_overhead_us']):.0f} us"
        for v in (a, b, "eager")
    )
    return (
        f"Host overhead per call (synchronised minus kernel time): {overheads}. Synchronised, {a} takes {sa:.0f} us "
        f"against {b}'s {sb:.0f} us: {verdict}. These are single numbers of one run, without their spread: a difference of a "
        "few percent may be that run's noise."
    )


def sync_disturbed(times: pd.DataFrame) -> list[str]:
    """Variants whose synchronised call took longer than issuing it plus its kernels beyond the tie share: all a
    synchronised call waits for, so something else on the GPU or host (other work, or its clocks) made that clock,
    and the host overhead read from it, too long. (The other contradictions of :func:`disturbed_times` leave the
    synchronised time readable.)"""
    if not {"variant", "kernel_us", "e2e_sync_us"} <= set(times.columns):
        raise ValueError("times needs the columns variant, kernel_us and e2e_sync_us")
    if "enqueue_us" not in times.columns:
        return []
    t = times.dropna(subset=["kernel_us", "e2e_sync_us", "enqueue_us"])
    slow = t["e2e_sync_us"] > (1 + TIE_SHARE) * (t["enqueue_us"] + t["kernel_us"])
    return t.loc[slow, "variant"].astype(str).tolist()


def graph_disturbed(times: pd.DataFrame) -> list[str]:
    """Variants whose CUDA-graph replay took longer than their calls back to back, beyond the tie share: a replay
    removes the host's work, so only something else on the GPU (other work, or its clocks) makes it slower."""
    if not {"variant", "graphed_us", "e2e_nosync_us"} <= set(times.columns):
        raise ValueError("times needs the columns variant, graphed_us and e2e_nosync_us")
    t = times.dropna(subset=["graphed_us", "e2e_nosync_us"])
    return t.loc[t["graphed_us"] > (1 + TIE_SHARE) * t["e2e_nosync_us"], "variant"].astype(str).tolist()


def graphed_sentence(times: pd.DataFrame) -> str:
    """A warning when a graph replay was slower than back to back (:func:`graph_disturbed`), else nothing."""
    slow = graph_disturbed(times)
    if not slow:
        return ""
    t = times.set_index("variant")
    shown = ", ".join(f"{v} ({t.loc[v, 'graphed_us']:.0f} us against {t.loc[v, 'e2e_nosync_us']:.0f} us)" for v in slow)
    return (
        f"Replayed from a CUDA graph, {shown} took longer than back to back: a replay removes the host's work, so "
        "it cannot be slower than the same calls issued from Python. Something else on the GPU (other work, or its "
        "clocks) slowed those replays: "
        "read their graphed times as this run's noise, not as a ranking."
    )


def floor_bound_sentence(variants: pd.DataFrame, device: str, a: str = "course-fused", b: str = "compile") -> str:
    """The plans' floors with `device`'s own ceilings, the speed-up they allow, and the kernel-time ratio measured
    on the same device; a ratio beyond the floors' is put down to how far each variant runs from its floor."""
    need = {"variant", "kernel_us", "plan_floor_us", "pct_of_plan_floor"}
    if not need <= set(variants.columns):
        raise ValueError(f"variants needs the columns {sorted(need)}")
    t = variants.set_index("variant")
    if {a, b} - set(t.index):
        raise ValueError(f"variants has no row for {sorted({a, b} - set(t.index))}")
    fa, fb, ka, kb = (float(t.loc[v, c]) for c, v in (("plan_floor_us", a), ("plan_floor_us", b), ("kernel_us", a),
                                                      ("kernel_us", b)))  # fmt: skip
    text = (
        f"With the ceilings of {device} (where these kernels ran), the floors are {fa:.0f} us for {a} against "
        f"{fb:.0f} us for {b}: at equal distance from their floors, {a} is {fb / fa:.2f}x faster. Measured: "
        f"{kb / ka:.2f}x in kernel time"
    )
    if kb / ka > (1 + TIE_SHARE) * fb / fa:
        return text + (
            f", beyond that: {b} ran further from its floor ({t.loc[b, 'pct_of_plan_floor']:.0f}% of it) than {a} "
            f"({t.loc[a, 'pct_of_plan_floor']:.0f}%)."
        )
    if kb / ka >= (1 - TIE_SHARE) * fb / fa:
        return text + f", within {TIE_SHARE * 100:.0f} % of the {fb / fa:.2f}x the floors allow."
    return text + f", more than {TIE_SHARE * 100:.0f} % short of the {fb / fa:.2f}x the floors allow."


# Two clocks of one training step further apart than this share of the larger are read as disturbed.
CLOCKS_SHARE = 0.20


def clocks_disagree(training: pd.DataFrame, share: float = CLOCKS_SHARE) -> list[str]:
    """Variants whose step time by CUDA events (``step_us``) and by the wall clock (``step_wall_us``) differ by more
    than ``share`` of the larger; none when the table has no wall-clock column."""
    if "step_wall_us" not in training.columns:
        return []
    t = training.dropna(subset=["step_us", "step_wall_us"])
    gap = (t["step_us"] - t["step_wall_us"]).abs() > share * t[["step_us", "step_wall_us"]].max(axis=1)
    return t.loc[gap, "variant"].astype(str).tolist()


def training_sentence(
    training: pd.DataFrame,
    modes: Sequence[str] = ("course-fused-save", "course-fused-recompute"),
    live: bool = True,
) -> str:
    """What the training steps say: what each time column is, the fastest variant and each fused mode against
    eager (a tie within the tie share), time and memory, with the caveat of a single run. When the two clocks of a
    step disagree (:func:`clocks_disagree`), no variant is ranked on either: only the peak memory is compared.
    `live` says whether this machine ran the steps ("here") or a recording holds them ("in the recording")."""
    if not isinstance(live, bool):
        raise TypeError(f"live must be True or False, got {live!r}")
    if not {"variant", "step_us", "peak_mb"} <= set(training.columns) or training.empty:
        raise ValueError("training must be a non-empty table with the columns variant, step_us and peak_mb")
    where = "here" if live else "in the recording"
    split = clocks_disagree(training)
    t = training.dropna(subset=["step_us"]).set_index("variant")
    parts = []
    if "step_wall_us" in t.columns:
        parts.append(
            "`step_us` is the median of CUDA events recorded around each step; `step_wall_us` is the wall clock over "
            "all the steps back to back, divided by their number."
        )
    ranked = not split
    if split:
        shown = ", ".join(f"{v} ({t.loc[v, 'step_us']:.0f} against {t.loc[v, 'step_wall_us']:.0f} us)" for v in split)
        parts.append(
            f"The two clocks differ by more than {CLOCKS_SHARE:.0%} for {shown}: something else on the GPU or host "
            "(other work, or its clocks) moved one of them, so this run ranks no step time on either column."
        )
    else:
        fastest = t["step_us"].idxmin()
        level = [v for v in t.index if v != fastest and _tie(t.loc[v, "step_us"], t.loc[fastest, "step_us"])]
        if level:
            shown = ", ".join(f"{v} ({t.loc[v, 'step_us']:.0f} us)" for v in level)
            parts.append(
                f"Fastest step {where}: **{fastest}** ({t.loc[fastest, 'step_us']:.0f} us), level within "
                f"{TIE_SHARE:.0%} with {shown}: too close to call from one run."
            )
        else:
            parts.append(f"Fastest step {where}: **{fastest}** ({t.loc[fastest, 'step_us']:.0f} us).")
    if "eager" in t.index:
        e = t.loc["eager"]
        for mode in (m for m in modes if m in t.index):
            r = t.loc[mode]
            memory = f"{r['peak_mb']:.0f} MB peak against eager's {e['peak_mb']:.0f} MB."
            if not ranked:
                parts.append(f"`{mode}`: {memory}")
                continue
            if _tie(r["step_us"], e["step_us"]):
                speed = f"level with it, within {TIE_SHARE:.0%}"
            else:
                speed = "slower" if r["step_us"] > e["step_us"] else "faster"
            parts.append(f"`{mode}`: {r['step_us'] / e['step_us']:.2f}x eager's step time ({speed}), {memory}")
        others = [v for v in t.index if v not in (*modes, "eager")]
        slower = [v for v in others if t.loc[v, "step_us"] > (1 + TIE_SHARE) * e["step_us"]]
        if ranked and slower:
            shown = ", ".join(f"{v} ({t.loc[v, 'step_us'] / e['step_us']:.2f}x)" for v in slower)
            parts.append(
                f"Slower than eager's step {where}, beyond {TIE_SHARE:.0%}: {shown}. A forward that leads on kernel "
                "time does not make the training step faster: the step adds the backward's kernels, which these "
                "variants launch differently from eager."
            )
    parts.append(
        "Each step time is one run without its spread: on a shared GPU a step can move between runs by more than "
        "these differences, so read the times as this run's, and the peak memory (which does not move) as the firm result."
    )
    return " ".join(parts)


def config_caption(table: pd.DataFrame) -> str:
    """What the columns of :func:`config_table` mean, for the columns and kinds this table has."""
    from ..kernels.gate_up_tuning import KINDS

    parts = [
        "*How to read it:* `kind` is which kernel the row tunes: "
        + "; ".join(f"`{k}`, {KINDS[k]}" for k in KINDS if "kind" in table and k in set(table["kind"]))
        + "."
    ]
    if "us" in table.columns:
        parts.append(
            "`us` is the chosen `config`'s kernel time at that problem (`dim`, `hidden`, `m` tokens), replayed from a "
            "CUDA graph, so no host launch cost."
        )
    if "reference_us" in table.columns:
        parts.append(
            "`reference_us` is the same stage done the way `torch.compile` does it, timed the same way (forward: two "
            "cuBLAS GEMMs and a GeGLU kernel; backward: the cuBLAS `dh` GEMM and a GeGLU-backward kernel): `us` "
            "below it is a win for the fused kernel."
        )
    if "efficiency" in table.columns:
        parts.append(
            "`efficiency` is the tile's relative efficiency, which the default weighs against how full the last "
            "wave of tiles keeps the multiprocessors."
        )
    return " ".join(parts)
