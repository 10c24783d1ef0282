"""The stored tables of an MLP benchmark run: what notebooks 04 and 06 show, and the acceptance targets.

Each table is derived once, here, from the run's raw measurements (:class:`BenchResults`) and
stored in the results file; lessons read it back unchanged with ``helpers.load_results``.
``targets`` are the course kernel's goals: printed after a run and checked by tests, never shown
in a lesson.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from .results import BenchResults
from .targets import check_targets

RESULTS = ("h200_mlp_variants",)
SWEEP_METRICS = ("kernel_us", "e2e_nosync_us", "e2e_sync_us", "graphed_us")


def setup(r: BenchResults) -> pd.DataFrame:
    """One row: the main shape, dtype and the ceilings every rate of the run divides by."""
    c, s = r.ceilings, r.shape
    return pd.DataFrame(
        [
            {
                "device": r.provenance.get("device"),
                "sms": r.provenance.get("sms"),
                "on_gpu": r.on_gpu,
                "batch": s.batch,
                "seq": s.seq,
                "tokens": s.tokens,
                "dim": s.dim,
                "hidden": s.hidden,
                "dtype": str(r.dtype).removeprefix("torch."),
                "ceilings": c.label,
                "bandwidth_tbps": c.bandwidth_tbps,
                "matmul_tflops": c.matmul_tflops,
                "ridge_flop_per_byte": c.ridge_flop_per_byte,
            }
        ]
    )


def kernels(r: BenchResults) -> pd.DataFrame:
    """The kernels each measured variant launches per forward, with the variant's name."""
    frames = [r.kernels(name).assign(variant=name) for name in r.measured()]
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return out[["variant", *[c for c in out.columns if c != "variant"]]] if len(out) else out


def sweep_winners(r: BenchResults) -> pd.DataFrame:
    """Per sweep size and metric: the fastest variant, the runner-up and the margin."""
    frames = []
    for metric in SWEEP_METRICS:
        try:
            w = r.sweep_winners(metric)
        except ValueError:  # an older or a CPU run lacks this time
            continue
        frames.append(w.rename(columns={f"fastest_{metric}": "fastest_us"}).assign(metric=metric))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def tables(data: dict[str, Any]) -> dict[str, tuple[pd.DataFrame, str]]:
    """Every stored table of a run: name -> (table, what it holds)."""
    r = BenchResults(data, source="live" if data.get("live") else "file")
    roofline = r.roofline_frame()
    return {
        "setup": (setup(r), "the main shape and the ceilings every rate divides by"),
        "variants": (r.table(), "one row per variant at the main shape: kernels, times, rates, floors, error"),
        "kernels": (kernels(r), "the kernels of each variant per forward, with their role"),
        "pointwise": (r.pointwise(), "the GeGLU pointwise work of each variant and its % of the memory floor"),
        "roofline": (roofline, "each variant on the roofline: FLOP/byte and achieved TFLOP/s"),
        "training": (r.training(), "one row per training variant: step time, peak memory, saved bytes"),
        "shapes": (r.shapes_table(), "every shape preset: times and ratios to torch.compile"),
        "sweep": (r.sweep(), "time per forward against M for each variant, with the floor"),
        "sweep_winners": (sweep_winners(r), "per M and timing method: the fastest variant and its margin"),
        "targets": (check_targets(r), "the course kernel's acceptance targets (for tests; never in a lesson)"),
    }
