"""Lesson 08's graph table on an H100: its measured speedup divides the one eager reading the table shows, while the
sentence under it gives the range over every reading, so the row says which eager step it used."""

from __future__ import annotations

import pytest

from helpers import nb08

# on screen: the fastest of three unprofiled eager rounds, and the unprofiled graph replay
EAGER_US, GRAPHED_US = 12154.5, 2401.9


@pytest.fixture(scope="module")
def traces():
    traces = {n: nb08.reference_trace(f"h200_decoder_{n}", missing_ok=True) for n in ("prefill", "decode")}
    if any(t is None for t in traces.values()):
        pytest.skip("the H200 reference traces of lesson 08 are not in this checkout")
    return traces


def test_the_measured_speedup_row_names_the_eager_step_it_divides(traces):
    table = nb08.graph_table(traces["decode"], traces["prefill"], EAGER_US, GRAPHED_US)["value"]
    rows = [r for r in table.index if r.startswith("speedup measured")]
    assert rows == ["speedup measured (over the eager row)"]
    assert table[rows[0]] == pytest.approx(EAGER_US / GRAPHED_US, abs=0.05)
    assert table["eager step, no profiler"] == EAGER_US
