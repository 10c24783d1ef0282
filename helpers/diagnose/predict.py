"""From a finding's bound, measured under the profiler, to the saving a fix should show without it.

The profiler costs a roughly fixed time per recorded operator (its enter and exit bookkeeping), so
a region of ``n`` operators that took ``T`` profiled takes about ``T - n * c`` unprofiled, where
``c`` is the per-operator cost measured on the same step (profiled minus unprofiled step time,
over its operators). One ratio for the whole step would over-scale a fix made of few long operators
and under-scale one made of many tiny ones.
"""

from __future__ import annotations

import math

import pandas as pd


def overhead_per_operator(profiled_step_us: float, unprofiled_step_us: float, ops_per_step: float) -> float:
    """The profiler's cost per recorded operator (us): the profiled step's extra time over its operators."""
    for name, v in (("profiled_step_us", profiled_step_us), ("unprofiled_step_us", unprofiled_step_us)):
        if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise ValueError(f"{name} must be a positive number of microseconds, got {v!r}")
    if not isinstance(ops_per_step, (int, float)) or ops_per_step <= 0:
        raise ValueError(f"ops_per_step must be a positive count, got {ops_per_step!r}")
    return max(float(profiled_step_us) - float(unprofiled_step_us), 0.0) / float(ops_per_step)


def unprofiled_saving(findings: pd.DataFrame, overhead_us: float) -> pd.Series:
    """Per finding: its bound with the profiler's cost taken out (us per step).

    The bound is a share of its evidence's time (``time_us``, holding ``ops_per_step`` operators);
    unprofiled that evidence takes ``time_us - ops_per_step * overhead_us``, and the same share of it
    is the predicted saving. A finding with no operators of its own (device work) keeps its bound.
    """
    if not isinstance(findings, pd.DataFrame) or not {"saving_upper_bound_us", "time_us", "ops_per_step"} <= set(
        findings.columns
    ):
        raise TypeError("findings must be the table returned by helpers.diagnose.diagnose")
    if not isinstance(overhead_us, (int, float)) or not math.isfinite(overhead_us) or overhead_us < 0:
        raise ValueError(f"overhead_us must be a non-negative number of microseconds, got {overhead_us!r}")
    t = findings["time_us"].astype(float)
    kept = (1.0 - findings["ops_per_step"].astype(float) * overhead_us / t.where(t > 0)).clip(lower=0.0)
    return (findings["saving_upper_bound_us"].astype(float) * kept.fillna(1.0)).rename("predicted_unprofiled_us")
