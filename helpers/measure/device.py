"""Where things run: device resolution, synchronisation, names and a measurement's provenance, one owner each."""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import os
import platform
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch


def resolve_device(device: torch.device | str | None = None) -> torch.device:
    """A concrete device: None means CUDA when available, else CPU; ``"cuda"`` gets its index."""
    if device is None:
        return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    if isinstance(device, str):
        try:
            device = torch.device(device)
        except RuntimeError as err:
            raise ValueError(f"not a device: {device!r} ({err}); use 'cpu' or 'cuda'") from None
    if not isinstance(device, torch.device):
        raise TypeError(f"device must be a torch.device, str or None, got {type(device).__name__}: {device!r}")
    if device.type == "cpu":
        return torch.device("cpu")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device} was asked for but no CUDA GPU is available here; use 'cpu'")
        index = torch.cuda.current_device() if device.index is None else device.index
        if not 0 <= index < torch.cuda.device_count():
            raise ValueError(f"device {device}: only {torch.cuda.device_count()} CUDA device(s) here")
        return torch.device("cuda", index)
    raise ValueError(f"the course measures on cpu and cuda devices, got {device}")


def synchronize(device: torch.device | None) -> None:
    """Wait until `device` has finished its queued work (nothing to wait for on a CPU)."""
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)


def device_of(values: Any) -> torch.device | None:
    """The device of the first tensor found in `values` (a tensor, or a list/tuple/dict of them)."""
    if isinstance(values, torch.Tensor):
        return values.device
    if isinstance(values, dict):
        values = list(values.values())
    if isinstance(values, (list, tuple)):
        for v in values:
            found = device_of(v)
            if found is not None:
                return found
    return None


def _tensors_in(obj: Any, found: list[tuple[str, torch.Tensor]], where: str) -> None:
    if isinstance(obj, torch.Tensor):
        found.append((where, obj))
    elif isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            _tensors_in(item, found, f"{where}[{i}]")
    elif isinstance(obj, dict):
        for key, item in obj.items():
            _tensors_in(item, found, f"{where}[{key!r}]")


def infer_device(fn: Callable, inputs: tuple, kwargs: dict | None = None) -> torch.device:
    """The device a call of `fn` runs on: the one its inputs (and a module's parameters) live on, ValueError if
    they are mixed. A function that takes no tensors (a closure over its model and data) gets the GPU when there
    is one: its kernels would otherwise go unrecorded by the profiler and unwaited for by a timer."""
    found: list[tuple[str, torch.Tensor]] = []
    _tensors_in(list(inputs), found, "inputs")
    _tensors_in(kwargs or {}, found, "kwargs")
    if isinstance(fn, torch.nn.Module):
        for name, t in list(fn.named_parameters())[:1000] + list(fn.named_buffers())[:1000]:
            found.append((f"module.{name}", t))
    kinds: dict[str, str] = {}
    for where, t in found:
        kinds.setdefault(str(t.device.type if t.device.type == "cpu" else t.device), where)
    if len(kinds) > 1:
        detail = ", ".join(f"{dev} ({where})" for dev, where in kinds.items())
        raise ValueError(
            f"inputs live on mixed devices: {detail}. Move the model and every input to one device, "
            "e.g. model.to('cuda') and x.to('cuda'), before profiling."
        )
    if not kinds:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(next(iter(kinds)))


def wait_device(fn: Callable, inputs: tuple) -> torch.device:
    """The device to synchronise around a call of ``fn(*inputs)``: its first tensor argument's; for a closure
    that takes none, as :func:`infer_device` (its module's, else the GPU when there is one)."""
    return device_of(inputs) or infer_device(fn, ())


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def device_name(device: torch.device) -> str:
    """What a table calls `device`: the GPU's name, or the CPU's with its torch threads."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return cpu_label(torch.get_num_threads())


def cpu_label(threads: int) -> str:
    """``CPU: <model> (<n> thread[s])``: the CPU's name with its torch threads, singular for one."""
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise ValueError(f"threads must be a positive int, got {threads!r}")
    return f"CPU: {cpu_name()} ({threads} thread{'' if threads == 1 else 's'})"


def package_version(package: str) -> str | None:
    """The installed version of a distribution, None when it is not installed."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git_commit() -> str | None:
    # The commit of the checkout this code runs from; a copy of the working tree sent to another
    # machine may carry a stale .git, so the sender can say it.
    if os.environ.get("COURSE_GIT_COMMIT"):
        return os.environ["COURSE_GIT_COMMIT"]
    try:
        out = subprocess.run(
            ["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def nvidia_smi(field: str) -> str | None:
    """One ``nvidia-smi --query-gpu`` field of the first GPU (e.g. ``"driver_version"``,
    ``"clocks.sm"``), without units; None without nvidia-smi or when it fails."""
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def provenance(device: torch.device, command: str | None = None) -> dict[str, Any]:
    """Where and when a measurement was made (device, versions, UTC date, command, git commit), stored with
    every committed result and reference trace."""
    from ..triton_env import triton_mode

    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        name, extra = (
            props.name,
            {
                "sms": props.multi_processor_count,
                "cuda": torch.version.cuda,
                "driver": nvidia_smi("driver_version"),
                "memory_gib": round(props.total_memory / 2**30),
                "capability": f"{props.major}.{props.minor}",
            },
        )
    else:
        name, extra = f"CPU: {cpu_name()}", {"threads": torch.get_num_threads()}
    return {
        "device": name,
        "device_type": device.type,
        **extra,
        "torch": torch.__version__,
        "triton": package_version("triton"),
        "liger_kernel": package_version("liger-kernel"),
        "triton_mode": triton_mode(),
        "python": platform.python_version(),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": command if command is not None else " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "git_commit": _git_commit(),
    }
