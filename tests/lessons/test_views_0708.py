"""The small views lessons 07 and 08 added: shares as percentages, the names each lesson re-exports."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers import nb07, nb08


def test_percent_shares_of_a_real_decode_breakdown():
    trace = nb08.reference_trace("h200_decoder_decode", missing_ok=True)
    if trace is None:
        pytest.skip("the H200 decode trace is not in this checkout")
    parts = nb08.part_breakdown(trace)
    shown = nb08.percent_shares(parts)
    # a share under 0.05 % shows as "<0.1": counted as zero here
    assert pd.to_numeric(shown["share_%"], errors="coerce").sum() == pytest.approx(100, abs=0.5)
    assert (shown["time_us"] == shown["time_us"].round(0)).all()
    assert "share" in parts.columns  # the breakdown itself is not changed
    with pytest.raises(TypeError, match="part_breakdown"):
        nb08.percent_shares(pd.DataFrame({"part": ["mlp"]}))


@pytest.mark.parametrize(
    ("lesson", "names"),
    [
        (nb07, ("triton_mode", "reference_ceilings", "roofline_frame", "peak_memory")),
        (
            nb08,
            (
                "profile_memory",
                "memory_peaks",
                "memory_figure",
                "allocator_history",
                "reference_trace",
                "memory_over_time_figure",
                "peak_memory_by_op",
            ),
        ),
    ],
)
def test_each_lesson_reexports_the_names_only_it_uses(lesson, names):
    for name in names:
        assert name in lesson.__all__ and getattr(lesson, name).__name__ == name
