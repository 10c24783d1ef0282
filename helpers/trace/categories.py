"""What each trace event category means: the one owner of the category sets every reader uses
(device, launch, profiler spans; torch 1.8-1.9 names mapped to today's; device records that are not work)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

# Categories of torch 1.8-1.9 traces -> the names torch has written since.
CATEGORY_ALIASES = {
    "Operator": "cpu_op",
    "Kernel": "kernel",
    "Runtime": "cuda_runtime",
    "Memcpy": "gpu_memcpy",
    "Memset": "gpu_memset",
    "Python": "python_function",
    "Trace": "Trace",
}
# Categories of events that run on the device (drawn on device stream lanes).
DEVICE_CATEGORIES = frozenset({
    "kernel", "gpu_memset", "gpu_memcpy", "gpu_user_annotation", "cuda_sync", "cuda_profiler_range", "mtia_ccp_events"
})  # fmt: skip
# Device categories that are work (a kernel, a memset, a memcpy), as opposed to annotations.
DEVICE_WORK_KIND = {"kernel": "kernel", "gpu_memset": "memset", "gpu_memcpy": "memcpy"}
# MTIA records all device activity under one category: the event name says what it was.
MTIA_CATEGORY = "mtia_ccp_events"
MTIA_WORK_KIND = {"pe_exe": "kernel", "remote": "kernel", "merge": "kernel", "dma_request": "memcpy"}
# Device categories that are never work, and why (said when a trace has no kernels).
NOT_WORK = {
    "gpu_user_annotation": "GPU-side copies of record_function ranges",
    "cuda_sync": "synchronisation records (a stream or event wait seen from the GPU)",
    "cuda_profiler_range": "CUPTI range-profiler records: kernels replayed to read hardware counters, whose "
    "durations are replay times, not kernel times",
}
# Host-side categories that take part in the dispatch tree.
HOST_TREE_CATEGORIES = frozenset({
    "cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "overhead", "cpu_instant_event", "xpu_runtime",
    "privateuse1_runtime", "mtia_runtime"
})  # fmt: skip
LAUNCH_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "xpu_runtime", "privateuse1_runtime", "mtia_runtime"})
# Host events that are not part of a program's work (the profiler's own spans).
IGNORED_CATEGORIES = frozenset({"Trace", "trace"})
STEP_PREFIX = "ProfilerStep#"
# helpers.profile waits for the device at the end of every step it records, under this label, so that a
# diagnosis can tell the recorder's wait from a synchronisation the program itself makes.
RECORDER_WAIT = "helpers.profile: wait for the device"
# A launch call that runs a whole captured graph (many kernels, one call, one correlation id).
GRAPH_LAUNCH_PATTERN = r"GraphLaunch"


def canonical_category(cat: str) -> str:
    """Today's name of a category (``'Kernel'`` -> ``'kernel'``); other names unchanged."""
    return CATEGORY_ALIASES.get(cat, cat)


def work_kinds(events: pd.DataFrame) -> np.ndarray:
    """Per row: "kernel", "memset" or "memcpy" for device work, "" otherwise: the one definition of a kernel row."""
    out = np.full(len(events), "", dtype=object)
    rows = np.flatnonzero(
        events["on_device"].to_numpy() & events["cat"].isin([*DEVICE_WORK_KIND, MTIA_CATEGORY]).to_numpy()
    )
    if len(rows):
        cats = events["cat"].to_numpy(dtype=object)[rows]
        kinds = np.full(len(rows), "", dtype=object)
        for category, kind in DEVICE_WORK_KIND.items():
            kinds[cats == category] = kind
        mtia = np.flatnonzero(cats == MTIA_CATEGORY)
        if len(mtia):
            names = events["name"].to_numpy(dtype=object)[rows[mtia]]
            kinds[mtia] = [MTIA_WORK_KIND.get(name, "") for name in names]
        out[rows] = kinds
    return out


def device_work_mask(events: pd.DataFrame) -> np.ndarray:
    """Rows of an events table that are device work: kernels, memsets and memcpys on a device lane."""
    on_device = events["on_device"].to_numpy()
    cat = events["cat"]
    mask = on_device & cat.isin(list(DEVICE_WORK_KIND)).to_numpy()
    mtia = on_device & (cat == MTIA_CATEGORY).to_numpy()
    if mtia.any():
        names = events["name"].to_numpy(dtype=object)
        rows = np.flatnonzero(mtia)
        mask[rows] = [name in MTIA_WORK_KIND for name in names[rows]]
    return mask


# Inductor's generated C++ kernels on a CPU (``graph_0_cpp_fused_...``): the CPU's kind of device work.
CPU_GENERATED_KERNEL = re.compile(r"^(?:graph_\d+_)?cpp_fused_")
