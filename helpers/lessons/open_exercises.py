"""Used by notebooks 00-02: the expected answer of an open exercise, computed from the profile of the
learner's own choice, so the check verifies the reasoning, never a number copied from a cell above.
"""

from __future__ import annotations

import pandas as pd

from ..trace.aten_ops import aten_family, computes
from ..trace.model import Trace, check_trace
from ..trace.queries import op_call_times


def busiest_op(trace: Trace, under: str | None = None) -> str:
    """Used by notebooks 00 and 02: the ATen operator that does the arithmetic of a profiled call (under `under`):
    with kernels, the one whose own kernels take most device time; on a CPU, the most own time per call (median)."""
    check_trace(trace)
    names = None
    if under is not None:
        chain = trace.chain(under)
        names = set(chain.loc[(chain["kind"] == "op") & (chain["depth"] > 0), "name"])
        if not names:
            raise ValueError(f"nothing runs under {under!r} in {trace.info.describe()}")
    if trace.device_lanes:
        ops = trace.ops()
        score = pd.Series((ops["self_device_us"] / ops["calls"]).to_numpy(), index=ops["name"])
    else:
        per_call = op_call_times(trace)
        score = per_call.set_index("name")["self_median_us"]
    score = score[
        score.index.map(lambda n: n.startswith("aten::") and computes(n) and aten_family(n) != "copy").to_numpy(
            dtype=bool
        )
    ]
    if names is not None:
        score = score[score.index.isin(names)]
    if score.empty or not (score > 0).any():
        raise ValueError(f"no ATen operator with measured work in {trace.info.describe()}")
    return str(score.idxmax())
