"""A lesson's summary as its learner copy shows it: the full lesson's markdown cells tagged ``summary``, shown once
every exercise is done, since the summary states their answers (:meth:`Exercises.lesson_summary`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SUMMARY_TAG = "summary"


@dataclass(frozen=True)
class NotYet:
    """Stands where the summary would be while exercises are open: (key, title) of each."""

    lesson: str
    open_exercises: tuple[tuple[str, str], ...]

    def _text(self, code: str) -> str:
        listed = "; ".join(
            f"{title} (answer it; after a try, {code}nb{self.lesson}.reveal({key!r}){code} shows the answer)"
            for key, title in self.open_exercises
        )
        return (
            "The summary states the answers of this lesson's exercises, so it shows here once each one is right, "
            f"revealed, or (a guess) checked; then run this cell again. Meanwhile, write your own summary in three "
            f"lines. Still open: {listed}."
        )

    def __repr__(self) -> str:
        return f"({self._text('')})"

    def _repr_markdown_(self) -> str:
        return f"*{self._text('`')}*"


@dataclass(frozen=True)
class Summary:
    """The summary's markdown, rendered as such in Jupyter."""

    text: str

    def __repr__(self) -> str:
        return self.text

    def _repr_markdown_(self) -> str:
        return self.text


def summary_text(lesson: str, folder: Path) -> str:
    """The markdown of the cells tagged ``summary`` in ``<folder>/<lesson>_*.ipynb`` (the heading above them is a
    cell of its own, which the learner copy keeps)."""
    import nbformat  # here, not at import: only this call reads a notebook

    # the lesson's own file (NN_topic.ipynb), not a copy beside it such as NN_topic-Copy1.ipynb
    found = sorted(p for p in Path(folder).glob(f"{lesson}_*.ipynb") if re.fullmatch(r"\d\d_[a-z0-9_]+\.ipynb", p.name))
    if len(found) != 1:
        names = ", ".join(p.name for p in found) or "none"
        raise ValueError(f"need one lesson {lesson} in {folder} to read its summary from; found {names}")
    nb = nbformat.read(found[0], as_version=4)
    cells = [c.source for c in nb.cells if c.cell_type == "markdown" and SUMMARY_TAG in c.metadata.get("tags", [])]
    if not cells:
        raise ValueError(f"{found[0].name} has no markdown cell tagged {SUMMARY_TAG!r}")
    return "\n\n".join(cells)
