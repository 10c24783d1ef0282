"""The tables notebook 09 shows of the 2-GPU recording: stored in h200x2_ddp.json, up to date with its raw data,
read by name, and shown as stored (no acceptance target among them)."""

from __future__ import annotations

import json
import re

import pytest

from benchmarks import ddp
from benchmarks.common import RESULTS_DIR, stored_table
from helpers.lessons import nb09
from helpers.lessons.results import load_results
from helpers.paths import NOTEBOOKS_DIR

DATA = json.loads((RESULTS_DIR / f"{nb09.REFERENCE_RESULTS}.json").read_text())
NOTEBOOK = NOTEBOOKS_DIR / "09_several_gpus.ipynb"


def _code() -> str:
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


def _tables_read() -> set[str]:
    return set(re.findall(r"\.(?:table|value)\(\s*\"(\w+)\"", _code()))


@pytest.mark.parametrize("name", sorted(ddp.tables(DATA)))
def test_the_stored_tables_are_what_the_raw_data_gives_today(name):
    """`python -m benchmarks rejudge ddp` has nothing to change."""
    frame, about = ddp.tables(DATA)[name]
    assert stored_table(frame, about) == DATA["tables"][name]


def _cells(frame) -> list[list]:
    """A frame's cells as a results file stores them (missing values as None, whatever the column's type)."""
    return [[None if v is None or v != v else v for v in row] for row in frame.itertuples(name=None)]


def test_every_table_the_lesson_reads_is_stored_and_read_as_stored():
    read = _tables_read()
    assert {"runs", "communication", "predictions"} <= read  # the per-rank views come from the traces
    recorded = load_results(nb09.REFERENCE_RESULTS)
    for name in read:
        stored = DATA["tables"][name]
        frame = recorded.table(name)
        assert list(frame.columns) == stored["columns"]
        assert [row[1:] for row in _cells(frame)] == stored["rows"], name


def test_the_lesson_shows_no_acceptance_target():
    assert "targets" not in _tables_read() and '"met"' not in _code()


def test_the_recorded_numbers_the_lesson_quotes_are_cells_of_the_stored_tables():
    recorded = load_results(nb09.REFERENCE_RESULTS)
    one = [p for p in DATA["predictions"] if p["to"] == "ddp_one_bucket"][0]
    assert recorded.value("predictions", "predicted_change_ms", to="ddp_one_bucket") == one["predicted_change_ms"]
    assert (
        recorded.value("runs", "step_ms", configuration="ddp_bucket25")
        == DATA["runs"]["ddp_bucket25"]["summary"]["step_ms"]
    )
    hidden = recorded.value("communication", "overlap_pct", configuration="ddp_bucket25")
    overlap = DATA["runs"]["ddp_bucket25"]["analysis"]["overlap"]
    assert hidden == pytest.approx(
        100 * sum(o["overlap_us"] for o in overlap) / sum(o["communication_us"] for o in overlap)
    )


def test_the_lessons_gpu_path_reads_runs_on_gpus_into_the_same_tables(tmp_path):
    """On GPUs notebook 09 reads its own runs with `python -m benchmarks ddp --runs` (a program); fed the recorded
    H200 runs, that gives the recording's stored tables, cell for cell."""
    for name in ("ddp_bucket25", "ddp_one_bucket"):
        (tmp_path / name).symlink_to(nb09.reference_run(name))
    live, recorded = nb09.gpu_results(tmp_path), load_results(nb09.REFERENCE_RESULTS)
    assert "measured live" in live.label and live.path == tmp_path / "ddp.json"
    for table, key in (("runs", "configuration"), ("communication", "configuration"), ("predictions", "to")):
        mine = live.table(table).set_index(key).drop(columns=["reason"], errors="ignore")
        theirs = recorded.table(table).set_index(key).loc[mine.index, mine.columns]
        # the same cells, floats up to the last bits (a sum's order may differ between machines)
        assert [[pytest.approx(v, rel=1e-12) if isinstance(v, float) else v for v in row] for row in _cells(mine)] == (
            _cells(theirs)
        ), table
