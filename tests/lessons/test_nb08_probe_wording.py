"""Lesson 08's wording, from a learner probe: the replayed steps' caption names both traces its rows come from,
recorded results say they read the same on every machine, the backward's ratio is set beside what besides GEMMs
it holds, and the profiler's CPUAllocator warning under the memory table is explained."""

from __future__ import annotations

import json
from pathlib import Path

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "08_whole_model.ipynb"


def sources() -> list[str]:
    return ["".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"]]


def test_the_replays_caption_describes_every_replay_not_only_the_first():
    cell = next(s for s in sources() if "replay_table = pd.DataFrame(rows)" in s)
    assert "next(iter(replays.values())).info.describe()" not in cell
    assert "for label, t in replays.items()" in cell and "t.info.describe()" in cell


def test_recorded_results_and_the_backward_are_worded_as_measured():
    text = "\n".join(sources())
    assert "on every machine:**" not in text and text.count("(read the same on every machine):**") == 2
    assert "soon repeats itself" not in text and "the machine lent" not in text
    assert "SDPA's backward" in text and "loss's gradient" in text


def test_the_memory_tables_allocator_warning_is_explained_after_it():
    cells = sources()
    table = next(i for i, s in enumerate(cells) if "memory_prof.key_averages().table(" in s)
    assert "Memory block of unknown size was allocated before the profiling" in cells[table + 1].replace("\n", " ")
