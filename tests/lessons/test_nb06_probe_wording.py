"""Lesson 06's text as a learner probe read it: nothing before a guess gives its answer away, and a
recorded table is introduced the same way everywhere."""

from __future__ import annotations

import nbformat
import pytest

from helpers.paths import NOTEBOOKS_DIR


@pytest.fixture(scope="module")
def cells():
    return nbformat.read(NOTEBOOKS_DIR / "06_writing_fused_kernels.ipynb", as_version=4).cells


def _index(cells, start: str) -> int:
    return next(i for i, c in enumerate(cells) if c.cell_type == "code" and c.source.startswith(start))


def test_the_kept_tensors_are_not_told_before_the_guess(cells):
    before = "\n".join(c.source for c in cells[: _index(cells, "kept = ")] if c.cell_type == "markdown")
    for giveaway in ("keeps `gu` and `h`", "keeps only `x`"):
        assert giveaway not in before
    after = "\n".join(c.source for c in cells[_index(cells, "kept = ") :] if c.cell_type == "markdown")
    assert "keeps only `x`" in after


def test_replays_under_the_kernel_time_are_counted_and_explained():
    import pandas as pd

    from helpers import nb06

    times = pd.DataFrame(
        [("eager", 234.7, 236.6), ("compile", 206.5, 205.5), ("course-fused", 177.9, 173.9)],
        columns=["variant", "kernel_us", "graphed_us"],
    )
    text = nb06.replay_under_kernels_sentence(times)
    assert text.startswith("2 of 3 variants") and "course-fused, 173.9 against 177.9 us" in text
    assert "profiler lengthens" in text
    assert nb06.replay_under_kernels_sentence(times.assign(graphed_us=times["kernel_us"] + 1)) == ""


def test_a_variant_slower_than_eager_in_training_is_named():
    import pandas as pd

    from helpers import nb06

    training = pd.DataFrame(
        [
            ("eager", 704.7, 753.5, 319.3),
            ("compile", 1219.0, 1287.9, 218.6),
            ("course-fused-save", 798.1, 820.8, 190.3),
            ("course-fused-recompute", 937.0, 963.2, 168.3),
        ],
        columns=["variant", "step_us", "step_wall_us", "peak_mb"],
    )
    text = nb06.training_sentence(training, live=False)
    assert "compile (1.73x)" in text and "Slower than eager's step" in text


def test_recorded_tables_are_introduced_as_read_the_same_everywhere(cells):
    text = "\n".join(c.source for c in cells)
    assert "Recorded, on every machine:" not in text
    assert "Recorded (read the same on every machine):" in text


def test_the_bytes_saved_hint_counts_the_reads_of_x():
    from helpers import nb06

    assert "x read" in nb06.EXERCISES.book["bytes_saved"].hint.replace("is x read", "x read")


def test_the_config_table_has_a_caption_for_its_columns_and_kinds():
    from helpers import nb06

    text = nb06.config_caption(nb06.config_table())
    for word in ("`us`", "`reference_us`", "`backward`", "`forward_gu`", "`forward`"):
        assert word in text


def test_the_kernel_check_says_which_dtypes_it_tested_on_a_cpu(cells):
    i = next(i for i, c in enumerate(cells) if "nb06.check_geglu_kernel(my_geglu)" in c.source)
    after = cells[i + 1].source
    assert "float32 only on a CPU" in after and "bf16" in after
