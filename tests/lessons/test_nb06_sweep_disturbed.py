"""Lesson 06's sweep over M read with the main table's consistency rules: readings that contradict each other
(or the main table) are flagged, and no wall-time winner is named at their size."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from helpers import nb06

COLS = ["m", "variant", "kernel_us", "graphed_us", "e2e_nosync_us", "e2e_sync_us", "status"]
# rows of the recorded H200 sweep
SWEEP = pd.DataFrame(
    [
        (1024, "eager", 36.97, 43.12, 106.79, 106.02, "ok"),
        (1024, "compile", 33.20, 39.05, 184.39, 172.15, "ok"),
        (1024, "course-geglu", 33.60, 39.69, 165.88, 157.80, "ok"),
        (1024, "course-geglu-cat", 31.05, 36.46, 157.56, 153.20, "ok"),
        (1024, "course-fused", 31.54, 35.45, 83.53, 85.77, "ok"),
        (2048, "eager", 62.97, 68.91, 102.99, 112.24, "ok"),
        (2048, "compile", 60.34, 64.27, 158.61, 155.40, "ok"),
        (2048, "course-geglu", 57.29, 66.73, 363.24, 318.35, "ok"),
        (2048, "course-geglu-cat", 54.50, 60.50, 318.85, 173.83, "ok"),
        (2048, "course-fused", 47.42, 52.36, 123.64, 123.66, "ok"),
        (4096, "eager", 121.56, 129.61, 162.35, 208.59, "ok"),
        (4096, "compile", 107.82, 115.96, 362.54, 358.71, "ok"),
        (4096, "course-geglu", 106.78, 114.39, 395.81, 409.22, "ok"),
        (4096, "course-geglu-cat", 102.49, 109.14, 422.97, 422.01, "ok"),
        (4096, "course-fused", 90.34, 101.20, 215.88, 248.47, "ok"),
        (8192, "eager", 234.66, 239.30, 254.08, 310.90, "ok"),
        (8192, "compile", 203.98, 209.48, 373.49, 420.01, "ok"),
        (8192, "course-fused", 176.86, 177.68, 206.31, 294.79, "ok"),
    ],
    columns=COLS,
)
MAIN = pd.DataFrame(
    [("eager", 234.7, 240.7, 276.1), ("compile", 206.5, 210.9, 280.3), ("course-fused", 177.9, 180.4, 289.0)],
    columns=["variant", "kernel_us", "e2e_nosync_us", "e2e_sync_us"],
)


def _flagged(main=None, main_m=None) -> set[tuple[int, str]]:
    d = nb06.sweep_disturbed(SWEEP, main, main_m)
    return set(zip(d["m"], d["variant"]))


def test_back_to_back_slower_than_synchronised_is_flagged_in_the_sweep():
    assert {(2048, "course-geglu"), (2048, "course-geglu-cat")} <= _flagged()


def test_host_work_cannot_grow_with_m():
    # compile issued calls back to back in 159 us at M = 2048: at 4096 its 108 us of kernels cannot make 363 us
    assert (4096, "compile") in _flagged()
    assert (4096, "eager") not in _flagged() and (1024, "compile") not in _flagged()


def test_the_main_table_is_a_second_reading_at_its_size():
    assert (8192, "compile") not in _flagged()
    assert (8192, "compile") in _flagged(MAIN, 8192)
    assert (8192, "eager") in _flagged(MAIN, 8192)  # 311 us synchronised against 276 us
    assert (8192, "course-fused") in _flagged(MAIN, 8192)


def test_no_wall_time_winner_from_disturbed_readings():
    table, text = nb06.sweep_winners_read(SWEEP, MAIN, 8192)
    for m in (2048, 4096, 8192):
        for metric in ("e2e_nosync_us", "e2e_sync_us"):
            assert table.loc[m, ("fastest", metric)] != "eager"
            assert "not declared" in table.loc[m, ("fastest", metric)]
    assert table.loc[1024, ("fastest", "e2e_nosync_us")] == "course-fused"
    assert table.loc[2048, ("fastest", "kernel_us")] == "course-fused"
    assert "6 of 8 wall-time cells left out" in text
    assert "course-geglu-cat" in text


def test_disturbed_readings_are_marked_on_the_wall_time_figures():
    fig = go.Figure()
    marked = nb06.mark_disturbed(fig, SWEEP, "e2e_nosync_us", relative_to="compile", main=MAIN, main_m=8192)
    crosses = [t for t in marked.data if t.name == "disturbed (other work or clocks)"]
    assert len(crosses) == 1 and len(crosses[0].x) == len(nb06.sweep_disturbed(SWEEP, MAIN, 8192))
    assert len(nb06.mark_disturbed(go.Figure(), SWEEP, "kernel_us").data) == 0
