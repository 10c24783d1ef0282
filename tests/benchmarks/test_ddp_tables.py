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


def test_every_table_the_lesson_reads_is_stored_and_read_as_stored():
    read = _tables_read()
    assert {"runs", "communication", "overlap", "predictions"} <= read
    recorded = load_results(nb09.REFERENCE_RESULTS)
    for name in read:
        stored = DATA["tables"][name]
        frame = recorded.table(name)
        assert list(frame.columns) == stored["columns"]
        rows = [[None if v != v else v for v in row] for row in frame.itertuples(index=False, name=None)]
        assert rows == stored["rows"], name


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
