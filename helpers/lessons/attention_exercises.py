"""Used by notebook 07: checks for the attention exercises (the learner's kernel, their predictions).

- :func:`check_attention_kernel`: the learner's flash-attention launcher ``fn(q, k, v, out, causal)``
  runs on awkward lengths (no multiple of any tile) with ``out`` filled with NaN first, and is
  compared with the float64 reference. Feedback, never a traceback; a kernel whose output is all
  NaN (the learner copy's skeleton: the update returns its inputs) is "not answered yet".
- :func:`check_attention_prediction`: the learner picks a shape and predicts the score-matrix bytes
  and the kernels of the hand-written attention there; it is profiled live and compared.
- :func:`gpu_view`: the live GPU profile of one of notebook 07's workloads on a GPU, else the H200
  reference trace, else None (not recorded yet).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import torch

from ..attention.costs import AttentionShape, score_matrix_bytes
from ..attention.workloads import GPU_VIEWS, manual
from ..kernels.flash_attention import attention_reference
from ..measure.numerics import relative_error
from ..measure.profile import profile
from ..measure.workload import default_dtype
from ..paths import reference_trace_path
from ..trace.model import Trace, load_trace
from ..trace.queries import kernels_per_forward, op_input
from ..triton_env import ensure_interpreter_ready
from .exercises import Feedback, check
from .kernel_exercises import kernel_device

EXPECTED = "matches the float64 reference"
Launcher = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, bool], object]
# (batch, heads, seq, head_dim, causal): lengths that are no multiple of any tile, both masks.
CPU_CASES: tuple[tuple[int, int, int, int, bool], ...] = (
    (1, 2, 37, 16, True),
    (2, 1, 50, 32, False),
    (1, 1, 70, 16, True),
)
GPU_CASES: tuple[tuple[int, int, int, int, bool], ...] = (
    (2, 4, 1000, 64, True),
    (1, 2, 333, 64, False),
    (1, 8, 2048, 128, True),
)
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 2e-2, torch.float16: 1e-2}
# The compute operators of the hand-written attention on a CPU (one kernel each on a GPU).
MANUAL_COMPUTE_OPS = ("aten::bmm", "aten::mul", "aten::clone", "aten::masked_fill_", "aten::_softmax")
MAX_PREDICTION_SCORE_BYTES = {"cpu": 2**28, "cuda": 2**32}


def check_attention_kernel(
    fn: Launcher | None,
    name: str = "your flash-attention kernel",
    cases: Sequence[tuple[int, int, int, int, bool]] | None = None,
    dtype: torch.dtype | None = None,
) -> Feedback:
    """Used by notebook 07: run ``fn(q, k, v, out, causal)`` on awkward lengths against the float64 reference.

    Defaults: float32 in the CPU interpreter on three small cases (tolerance 1e-4); bf16 on a GPU on
    three larger ones (tolerance 2e-2). Returns :class:`helpers.exercises.Feedback`.
    """
    hint = "Write the body of my_online_softmax_update: the new maximum, p, alpha, then l_i and acc"
    if fn is None or fn is Ellipsis:
        return check(name, None, EXPECTED, hint=hint)
    if not callable(fn):
        raise TypeError(f"pass your launcher, e.g. my_attention (fn(q, k, v, out, causal)), got {type(fn).__name__}")
    ensure_interpreter_ready()
    device = kernel_device()
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
            return check(name, f"your kernel raised {type(err).__name__}: {msg}", EXPECTED, explain=f"on {where}.")
        finite = torch.isfinite(out)
        if not bool(finite.any()):
            return check(name, None, EXPECTED, hint=f"the output is all NaN or inf: nothing is computed yet. {hint}")
        if not bool(finite.all()):
            bad = int((~finite).sum())
            return check(
                name,
                f"{bad} of {out.numel()} outputs are NaN or inf",
                EXPECTED,
                explain=f"on {where}. Is l_i rescaled by alpha? Is the first tile's alpha exp2(-inf) = 0, not NaN?",
            )
        err = relative_error(out, attention_reference(q, k, v, causal))
        worst = max(worst, err)
        if not err <= tol:
            return check(
                name,
                f"relative error {err:.1e} on {where}",
                EXPECTED,
                explain=f"the limit is {tol:.0e}. Both l_i and acc must be multiplied by alpha = exp2(m_old - m_new) "
                "before the new tile is added; p = exp2(qk * qk_scale - m_new).",
            )
    return check(
        name,
        EXPECTED,
        EXPECTED,
        explain=f"largest relative error {worst:.1e} (limit {tol:.0e}) on {len(cases)} cases, "
        f"{'GPU' if device.type == 'cuda' else 'Triton CPU interpreter'}.",
    )


def check_attention_prediction(
    shape: AttentionShape | None, score_bytes: int | None, kernels: int | None
) -> tuple[Feedback, Feedback]:
    """Used by notebook 07: profile the hand-written attention at the learner's `shape` here and check two predictions.

    `score_bytes`: one score matrix, in bytes, in this device's dtype (float32 on a CPU, bf16 on a
    GPU), read from the profile's recorded softmax input. `kernels`: per call, the device operations
    on a GPU (kernels and copies: the copy inside masked_fill runs as a device-to-device memcpy, not
    a kernel; cuBLAS's workspace memsets are not counted), or the compute operators on a CPU (where
    ATen runs each inline: bmm, mul, the copy inside masked_fill, masked_fill_, softmax).
    """
    names = ("score-matrix bytes at your shape", "kernels per call at your shape")
    if shape is None:
        return tuple(check(n, None, "measured", hint="set my_shape = helpers.AttentionShape(...)") for n in names)  # type: ignore[return-value]
    if not isinstance(shape, AttentionShape):
        raise TypeError(f"my_shape must be a helpers.AttentionShape, got {type(shape).__name__}")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    nbytes = score_matrix_bytes(shape, default_dtype(device))
    if nbytes > MAX_PREDICTION_SCORE_BYTES[device.type]:  # checked before any tensor is made
        raise ValueError(
            f"at {shape.describe()} one score matrix is {nbytes / 1e6:,.0f} MB: pick a shape under "
            f"{MAX_PREDICTION_SCORE_BYTES[device.type] / 1e6:,.0f} MB here, so the check runs in seconds"
        )
    built = manual(device, None, shape)
    trace = profile(built.fn, *built.inputs, steps=1, warmup=1, label="your_shape")
    measured_bytes = op_input(trace, "aten::_softmax").nbytes
    if device.type == "cuda":
        measured_kernels = kernels_per_forward(trace, kinds=("kernel", "memcpy"))
        what = "GPU kernels and copies"
    else:
        ops = trace.ops().set_index("name")
        measured_kernels = int(
            sum(ops.loc[o, "calls"] for o in MANUAL_COMPUTE_OPS if o in ops.index) // len(trace.steps)
        )
        what = "compute operators"
    dtype = str(built.dtype).removeprefix("torch.")
    return (
        check(
            names[0],
            score_bytes,
            measured_bytes,
            explain=f"batch x heads x seq_q x seq_k x {built.dtype.itemsize} bytes ({dtype}), read from the softmax's input.",
            hint="batch * heads * seq * seq * bytes per element",
        ),
        check(
            names[1],
            kernels,
            measured_kernels,
            explain=f"{what} per call: two batched products, the scaling, the copy inside masked_fill (on a GPU a "
            "device-to-device memcpy, not a kernel), the fill, the softmax. None of them depends on the shape.",
            hint="count the steps of manual_attention, and remember what masked_fill (out of place) does first",
        ),
    )


def gpu_view(name: str) -> Trace | None:
    """Used by notebook 07: a GPU profile of workload `name`: live on a GPU, else the H200 reference, else None.

    `name` is a key of ``helpers.attention.workloads.GPU_VIEWS`` (e.g. ``"attention_manual"``); the
    reference trace is ``traces/h200_<name>.json.gz``, recorded from the same workload.
    """
    if name not in GPU_VIEWS:
        raise ValueError(f"unknown view {name!r}; known: {', '.join(GPU_VIEWS)}")
    if torch.cuda.is_available():
        try:
            built = GPU_VIEWS[name](torch.device("cuda"))
            return profile(built.fn, *built.inputs, label=name)
        except (ImportError, RuntimeError):  # e.g. no cuDNN attention on this GPU: show the recording instead
            pass
    try:
        return load_trace(reference_trace_path(f"h200_{name}"))
    except FileNotFoundError:
        return None
