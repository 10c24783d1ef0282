"""What each trace event category means: one owner for the category sets every reader uses.

Kineto writes a ``cat`` per event; which ones run on the device, which launch device work, and
which are the profiler's own spans decide how a trace becomes lanes, trees and tables.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# Categories of events that run on the device (drawn on GPU stream lanes).
DEVICE_CATEGORIES = frozenset({"kernel", "gpu_memset", "gpu_memcpy", "gpu_user_annotation"})
# Device categories that are work (a kernel, a memset, a memcpy), as opposed to annotations.
DEVICE_WORK_KIND = {"kernel": "kernel", "gpu_memset": "memset", "gpu_memcpy": "memcpy"}
# Host-side categories that take part in the dispatch tree.
HOST_TREE_CATEGORIES = frozenset(
    {
        "cpu_op",
        "user_annotation",
        "cuda_runtime",
        "cuda_driver",
        "overhead",
        "cpu_instant_event",
        "xpu_runtime",
        "privateuse1_runtime",
    }
)
LAUNCH_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "xpu_runtime", "privateuse1_runtime"})
# Host events that are not part of a program's work (the profiler's own spans).
IGNORED_CATEGORIES = frozenset({"Trace", "trace"})
STEP_PREFIX = "ProfilerStep#"


def device_work_mask(events: pd.DataFrame) -> np.ndarray:
    """Rows of an events table that are device work: kernels, memsets and memcpys on a device lane.

    The one definition of "a kernel row" (device annotations such as ``gpu_user_annotation`` are
    not work: they span the kernels they annotate).
    """
    return events["on_device"].to_numpy() & events["cat"].isin(list(DEVICE_WORK_KIND)).to_numpy()
