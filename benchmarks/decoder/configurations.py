"""The decoder benchmark's matrix: every configuration of notebook 08's final table, its uses and sizes.

A :class:`Run` is a :class:`helpers.decoder.layers.Configuration` (how the model is built and run),
what it is, and which uses are measured: ``prefill`` (prompt tokens per second), ``decode`` (time
per step at batch 1), ``train`` (step time, peak memory). :data:`RUNS` is in the final table's
order, eager first; :data:`ORDER` is the order of measurement.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from helpers.checks import positive_int
from helpers.decoder.config import get_config
from helpers.decoder.layers import Configuration
from helpers.decoder.workloads import CONFIGURATIONS as SHARED
from helpers.decoder.workloads import GPU_SIZES, Sizes

USES = ("prefill", "decode", "train")


@dataclass(frozen=True)
class Run:
    """One row of the final table: the configuration, what it is, the uses it is measured in."""

    configuration: Configuration
    what: str
    uses: tuple[str, ...] = USES

    @property
    def name(self) -> str:
        return self.configuration.name


COURSE = {"mlp": "fused", "fused_qkv": True}  # the course's layers: fused gate+up MLP kernel, one QKV GEMM
DECODE = ("decode",)
RUNS: dict[str, Run] = {
    r.name: r
    for r in (
        # the configurations notebook 08 and the recorded traces run too (helpers.decoder.workloads)
        Run(SHARED["eager"], "the model as written: eager PyTorch, SDPA (PyTorch's choice of backend)"),
        Run(SHARED["eager+graph"], "eager, each decode step replayed from a CUDA graph", DECODE),
        Run(Configuration("compile", compiled=True), "torch.compile of every block (regional)"),
        Run(SHARED["compile+graph"], "compiled blocks, each decode step replayed from a CUDA graph", DECODE),
        Run(
            Configuration("course", **COURSE),
            "the course's layers: one QKV GEMM, the fused gate+up GeGLU MLP kernel",
        ),
        Run(
            Configuration("course+graph", graph=True, **COURSE),
            "the course's layers, decode replayed from a CUDA graph",
            DECODE,
        ),
        Run(
            Configuration("course+compile", compiled=True, **COURSE),
            "the course's layers inside compiled blocks (the kernels run as they are)",
            ("prefill", "train"),
        ),
        Run(
            Configuration("course+compile+graph", compiled=True, graph=True, **COURSE),
            "the course's layers in compiled blocks, decode replayed from a CUDA graph",
            DECODE,
        ),
        Run(
            Configuration("course-concat+compile+graph", mlp="course", fused_qkv=True, compiled=True, graph=True),
            "gate and up in one cuBLAS GEMM with the course's GeGLU kernel, one QKV GEMM, compiled blocks, "
            "decode replayed from a CUDA graph",
            DECODE,
        ),
        Run(
            Configuration(
                "course-gemv+compile+graph", mlp="course", fused_qkv=True, decode_gemv=True, compiled=True, graph=True
            ),
            "course-concat+compile+graph with each decode step's projections as the course's batch-1 GEMV kernels "
            "(RMSNorm, GeGLU and the residual adds folded into them)",
            DECODE,
        ),
        Run(
            Configuration(
                "course-gemv-attn+compile+graph",
                mlp="course",
                attention="course",
                fused_qkv=True,
                decode_gemv=True,
                compiled=True,
                graph=True,
            ),
            "course-gemv+compile+graph with each decode step's attention as the course's split-KV kernel "
            "(flash-decoding: the position read on the device, the cache past it skipped)",
            DECODE,
        ),
        Run(
            Configuration("course+flash", attention="course", **COURSE),
            "the course's layers and its flash-attention kernel",
            ("prefill", "train"),
        ),
        Run(SHARED["recompute"], "eager, each MLP recomputed in the backward (torch.utils.checkpoint)", ("train",)),
        Run(
            Configuration("course+recompute", recompute=True, **COURSE),
            "the course's layers, the fused MLP in its recompute mode",
            ("train",),
        ),
        Run(Configuration("sdpa-flash", sdpa_backend="flash"), "eager, SDPA forced to FlashAttention-2", ("prefill",)),
        Run(
            Configuration("sdpa-efficient", sdpa_backend="efficient"),
            "eager, SDPA forced to the memory-efficient kernel",
            ("prefill",),
        ),
        Run(Configuration("sdpa-cudnn", sdpa_backend="cudnn"), "eager, SDPA forced to cuDNN attention", ("prefill",)),
        Run(
            Configuration("sdpa-math", sdpa_backend="math"),
            "eager, SDPA forced to the math composite (the score matrix in memory)",
            ("prefill",),
        ),
    )
}

# Priority order: what needs no compile first (a few seconds each), then the compiled configurations
# (tens of seconds of compile each), then the rest. A second run (--resume) fills what the first skipped.
ORDER = (
    "eager",
    "eager+graph",
    "recompute",
    "course+recompute",
    "course",
    "course+graph",
    "compile+graph",
    "compile",
    "course+compile",
    "course+compile+graph",
    "course-concat+compile+graph",
    "course-gemv+compile+graph",
    "course-gemv-attn+compile+graph",
    "course+flash",
    "sdpa-flash",
    "sdpa-efficient",
    "sdpa-cudnn",
    "sdpa-math",
)
# The CPU smoke run: these configurations (None: all their uses), at sizes Triton's interpreter manages.
QUICK = {"eager": None, "recompute": None, "sdpa-math": None, "course": ("prefill",)}
QUICK_SIZES = Sizes(prefill_batch=1, prompt_len=16, decode_prompt_len=8, decode_steps=4, train_batch=2, train_seq=32)

# Training memory of the 1b preset: what does not grow with the batch is bf16 weights, gradients and
# AdamW's two states (8 bytes per parameter); the rest grows per sequence. Estimated from the eager
# training peak stored in h200_decoder.json (tests/benchmarks/test_decoder_sizes.py checks it).
TRAIN_STATE_BYTES_PER_PARAMETER = 8
TRAIN_BYTES_PER_1024_TOKENS = 2.2e9
MEMORY_USE = 0.8  # of the GPU's memory a training step may plan on (the allocator, cuBLAS workspaces, CUDA)


def gpu_sizes(total_memory_bytes: int) -> Sizes:
    """:data:`GPU_SIZES` with the training batch halved until the 1b preset's step is expected to fit in
    80% of `total_memory_bytes` (an 80 GB GPU keeps the full batch; below one sequence's worth it stays 1)."""
    positive_int("total_memory_bytes", total_memory_bytes)
    state = TRAIN_STATE_BYTES_PER_PARAMETER * get_config("1b").num_parameters()
    per_sequence = TRAIN_BYTES_PER_1024_TOKENS * GPU_SIZES.train_seq / 1024
    batch = GPU_SIZES.train_batch
    while batch > 1 and state + batch * per_sequence > MEMORY_USE * total_memory_bytes:
        batch //= 2
    return replace(GPU_SIZES, train_batch=batch)
