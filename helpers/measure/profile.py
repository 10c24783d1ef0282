"""`profile()`: record a few steps of a function or module with the right settings for the device."""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch.profiler import ProfilerActivity, record_function, schedule

from ..trace import files as tracefile
from ..trace.categories import RECORDER_WAIT
from ..trace.model import Trace, TraceInfo
from .device import device_name, infer_device, synchronize

# Bounds on profile()'s loops: the profiler keeps every event of every profiled step in memory,
# and warm-up calls only need to reach a steady state.
MAX_STEPS = 100
MAX_WARMUP = 1000
_WHY_BOUNDED = {
    "steps": "every profiled step keeps all its events in memory until the trace is built, so a long "
    "profile grows without limit (profile a few steps: one already shows every kernel).",
    "warmup": "warm-up calls only bring caches, compilation and clocks to a steady state; a handful is enough.",
}


# Kineto's own progress notices, printed on the process's C-level stderr at each start and stop.
_NOTICE = re.compile(rb"^(USDT|STAGE):\S* .*(profiler_start|profiler_stop|Completed Stage)")


@contextlib.contextmanager
def profiler_notices_dropped() -> Iterator[None]:
    """Drop Kineto's ``USDT: ... profiler_start`` notices from stderr; every other line is written out after."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no file descriptor 2 to redirect (an embedded interpreter)
        yield
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            try:
                sys.stderr.flush()
            except ValueError:
                pass
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            kept = [line for line in sink.read().splitlines(keepends=True) if not _NOTICE.match(line)]
            if kept:
                os.write(2, b"".join(kept))


def key_averages_frame(prof: Any, group_by_input_shape: bool = False) -> pd.DataFrame:
    """Any ``torch.profiler.profile`` you ran as a DataFrame, one row per op: ``key_averages().table()``'s numbers
    as columns (device fields read under both torch spellings); with a ``schedule``, every active step torch keeps."""
    if not hasattr(prof, "key_averages"):
        raise TypeError(f"key_averages_frame needs a torch.profiler.profile object, got {type(prof).__name__}")
    kwargs: dict[str, Any] = {"group_by_input_shape": bool(group_by_input_shape)}
    try:
        try:
            averages = prof.key_averages(acc_events=True, **kwargs)  # every active step (torch >= 2.4)
        except TypeError:
            averages = prof.key_averages(**kwargs)
    except (AssertionError, RuntimeError, AttributeError) as err:
        raise ValueError(
            f"this profiler holds no results yet ({type(err).__name__}: {err}): read it after the "
            "`with torch.profiler.profile(...)` block has ended, or in on_trace_ready"
        ) from None
    rows = []
    for e in averages:

        def pick(*names: str) -> float:
            for n in names:
                v = getattr(e, n, None)
                if v is not None:
                    return float(v)
            return 0.0

        row = {
            "name": e.key,
            "calls": int(e.count),
            "self_cpu_us": pick("self_cpu_time_total"),
            "cpu_total_us": pick("cpu_time_total"),
            "self_device_us": pick("self_device_time_total", "self_cuda_time_total"),
            "device_total_us": pick("device_time_total", "cuda_time_total"),
        }
        if group_by_input_shape:
            row["input_shapes"] = str(getattr(e, "input_shapes", "") or "")
        rows.append(row)
    columns = ["name", "calls", "self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us"]
    columns += ["input_shapes"] if group_by_input_shape else []
    out = pd.DataFrame(rows, columns=columns)
    if group_by_input_shape and not out.empty and not (out["input_shapes"].str.strip("[] ") != "").any():
        raise ValueError(
            "group_by_input_shape=True, but this profile holds no input shapes: record it with "
            "torch.profiler.profile(..., record_shapes=True)"
        )
    return out.sort_values(["device_total_us", "cpu_total_us"], ascending=False, kind="stable").reset_index(drop=True)


def profile(
    fn_or_module: Callable,
    *inputs: Any,
    steps: int = 3,
    warmup: int = 2,
    label: str | None = None,
    record_shapes: bool = True,
    with_stack: bool = False,
    grad: bool = False,
    kwargs: dict | None = None,
    profile_memory: bool = False,
) -> Trace:
    """Profile `steps` calls of ``fn_or_module(*inputs)`` and return a :class:`Trace`. Activities follow the inputs'
    device; `warmup` calls run unprofiled first; every step holds one call in ``record_function(label)`` and
    ends with a synchronise; ``no_grad`` unless `grad`.
    """
    if not callable(fn_or_module):
        raise TypeError(
            f"profile() needs a function or an nn.Module to call, got {type(fn_or_module).__name__}. "
            "Pass e.g. profile(model, x) or profile(lambda: a @ b)."
        )
    for name, value, low, high in (("steps", steps, 1, MAX_STEPS), ("warmup", warmup, 0, MAX_WARMUP)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if value > high:
            raise ValueError(
                f"{name}={value:,} is more than {high:,}: {_WHY_BOUNDED[name]} To time many calls, use "
                "helpers.time_per_call or helpers.time_end_to_end, which keep no events."
            )
    kwargs = dict(kwargs or {})
    device = infer_device(fn_or_module, inputs, kwargs)
    if device.type == "meta":
        raise ValueError(
            "the inputs (or the module's parameters) are on the 'meta' device: meta tensors have shapes but "
            "no data, so nothing runs and there is nothing to profile. Build the model on a real device, or "
            "materialise it with module.to_empty(device='cpu') and load its weights, then profile."
        )
    if device.type == "cuda" and not torch.cuda.is_available():  # pragma: no cover - defensive
        raise ValueError("inputs are on CUDA but torch.cuda.is_available() is False")
    label = label or (
        type(fn_or_module).__name__
        if isinstance(fn_or_module, torch.nn.Module)
        else getattr(fn_or_module, "__name__", "fn")
    )
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)

    grad_ctx = torch.enable_grad if grad else torch.no_grad

    def call(phase: str, i: int) -> Any:
        try:
            return fn_or_module(*inputs, **kwargs)
        except Exception as err:
            shapes = [tuple(t.shape) for t in inputs if isinstance(t, torch.Tensor)]
            raise RuntimeError(
                f"{label} raised {type(err).__name__} during {phase} call {i + 1} (input shapes {shapes}): {err}"
            ) from err

    with grad_ctx():
        for i in range(warmup):
            call("warm-up", i)
        synchronize(device)

        captured: dict[str, Any] = {}
        with tempfile.TemporaryDirectory(prefix="course-trace-") as tmp:
            trace_file = Path(tmp) / "trace.json"

            def on_ready(prof: torch.profiler.profile) -> None:
                prof.export_chrome_trace(str(trace_file))
                captured["profiler"] = prof

            options = dict(
                activities=activities,
                schedule=schedule(wait=0, warmup=1, active=steps, repeat=1),
                on_trace_ready=on_ready,
                record_shapes=record_shapes,
                with_stack=with_stack,
                profile_memory=bool(profile_memory),
            )
            with profiler_notices_dropped(), torch.profiler.profile(**options) as prof:
                for i in range(steps + 1):  # one profiler warm-up step, then the active steps
                    with record_function(label):
                        call("profiled", i)
                    with record_function(RECORDER_WAIT):
                        synchronize(device)
                    prof.step()
            if "profiler" not in captured:  # pragma: no cover - torch calls on_trace_ready at the cycle's end
                raise RuntimeError("the profiler finished without producing a trace")
            document = tracefile.read_document(trace_file)

    info = TraceInfo(
        label=label,
        source="live",
        device=device_name(device),
        torch_version=torch.__version__,
        recorded_on=_dt.date.today().isoformat(),
        extra={"steps": steps, "warmup": warmup},
    )
    document.pop("traceName", None)  # a temporary path that no longer exists
    # key_averages() is built on demand: torch's own parsing of the events takes longer than the rest of a
    # profile together, and few readers ask for it
    prof = captured["profiler"]
    return Trace(document, info, profiler_table=lambda: key_averages_frame(prof))
