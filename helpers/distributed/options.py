"""What one data-parallel run does: :class:`RunOptions`, shared by the launcher and the per-rank worker,
so the command line (:meth:`RunOptions.to_argv`) and its parser (:func:`parse_argv`) read one definition.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import asdict, dataclass, fields
from typing import Any

MODES = ("ddp", "fsdp")
# FSDP2 prefetching: "default" is fully_shard as it comes (the next block's all-gather issued one
# block ahead in the backward); "none" turns that off (each block all-gathers when its backward
# starts); "explicit" prefetches two blocks ahead in forward and backward
# (set_modules_to_forward_prefetch / set_modules_to_backward_prefetch).
PREFETCH = ("default", "none", "explicit")
STRAGGLER_KINDS = ("sleep", "work")
DEVICES = ("auto", "cpu", "cuda")
OPTIMIZERS = ("for-loop", "foreach", "fused")
SUMMARY = "summary.json"  # a run's folder: written by rank 0 last, after every rank's trace
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")


@dataclass(frozen=True)
class RunOptions:
    """One data-parallel training run (see the module docstring); every field has a CLI flag ``--field-name``."""

    mode: str = "ddp"  # "ddp" (DistributedDataParallel) or "fsdp" (torch.distributed.fsdp.fully_shard)
    config: str = "tiny"  # a decoder preset of helpers.DECODER_CONFIGS
    batch: int = 2  # sequences per rank per step
    seq: int = 64  # tokens per sequence
    bucket_cap_mb: float = 25.0  # DDP: gradient bucket size (DDP's own default is 25)
    prefetch: str = "default"  # FSDP: see PREFETCH
    straggler_rank: int = -1  # the rank that is made slow: -1 none, -2 one drawn at random (kept in summary.json)
    straggler_ms: float = 0.0  # how much slower per step
    straggler_kind: str = "sleep"  # "sleep" (the host sleeps before the step) or "work" (extra matmuls on the device)
    warmup: int = 3  # steps before anything is measured (DDP rebuilds its buckets after the first)
    timed_steps: int = 5  # steps timed without the profiler
    profile_steps: int = 2  # steps recorded by the profiler (after one profiler warm-up step)
    device: str = "auto"  # "cuda" when there is a GPU per rank, else "cpu" (gloo)
    optimizer: str = "fused"  # AdamW implementation (helpers.make_optimizer)
    seed: int = 0
    max_trace_mb: float = 0.0  # > 0: trim a rank's trace (flow arrows, strides) when its .json.gz is larger

    def __post_init__(self) -> None:
        for name, allowed in (
            ("mode", MODES),
            ("prefetch", PREFETCH),
            ("straggler_kind", STRAGGLER_KINDS),
            ("device", DEVICES),
            ("optimizer", OPTIMIZERS),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        for name in ("batch", "seq", "timed_steps", "profile_steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        for name in ("warmup", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        if self.warmup < 2:
            raise ValueError("warmup must be at least 2: DDP rebuilds its buckets after the first step")
        if self.profile_steps > 10 or self.timed_steps > 1000:
            raise ValueError("profile_steps must be <= 10 (traces stay small) and timed_steps <= 1000")
        for name in ("bucket_cap_mb", "straggler_ms", "max_trace_mb"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != value:
                raise ValueError(f"{name} must be a number >= 0, got {value!r}")
        if self.bucket_cap_mb == 0:
            raise ValueError("bucket_cap_mb must be > 0")
        if (
            isinstance(self.straggler_rank, bool)
            or not isinstance(self.straggler_rank, int)
            or self.straggler_rank < -2
        ):
            raise ValueError(f"straggler_rank must be a rank, -1 (none) or -2 (random), got {self.straggler_rank!r}")
        if self.straggler_rank != -1 and self.straggler_ms <= 0:
            raise ValueError("a straggler needs straggler_ms > 0 (how much slower it is per step)")
        from ..decoder.config import CONFIGS  # the presets are owned by the decoder

        if self.config not in CONFIGS:
            raise ValueError(f"config must be a decoder preset ({', '.join(CONFIGS)}), got {self.config!r}")

    @classmethod
    def of(cls, **options: Any) -> RunOptions:
        """Options from keyword arguments, with a clear error for a name that is not an option."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(f"unknown run option(s) {unknown}; the options are: {', '.join(sorted(known))}")
        return cls(**options)

    def to_argv(self) -> list[str]:
        """The command-line flags of these options (every field, so a log shows the whole run)."""
        out = []
        for f in fields(self):
            out += [f"--{f.name.replace('_', '-')}", str(getattr(self, f.name))]
        return out

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_run_name(name: str) -> str:
    """A run's name becomes a folder name: letters, digits, ``_ . -``, up to 80 characters."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(
            f"run name must be letters, digits, '_', '.', '-' (up to 80, not starting with a dot), got {name!r}"
        )
    return name


def parse_argv(argv: list[str] | None = None) -> tuple[RunOptions, str, str]:
    """``(options, run name, output folder)`` from the command line of ``scripts/ddp_step.py``."""
    ap = argparse.ArgumentParser(prog="ddp_step.py", description="One data-parallel training run, per rank.")
    # "--name", not "--run": torchrun would read "--run" as an abbreviation of its own "--run-path"
    ap.add_argument("--name", default="ddp_run", help="the run's name (its folder under traces/local/ by default)")
    ap.add_argument("--out", default=None, help="folder for rank<r>.json.gz and summary.json")
    for f in fields(RunOptions):
        kind = {"int": int, "float": float}.get(f.type if isinstance(f.type, str) else f.type.__name__, str)
        ap.add_argument(f"--{f.name.replace('_', '-')}", type=kind, default=f.default)
    args = vars(ap.parse_args(argv))
    run, out = check_run_name(args.pop("name")), args.pop("out")
    return RunOptions(**args), run, out
