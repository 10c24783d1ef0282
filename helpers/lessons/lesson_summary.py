"""A lesson's summary as its learner copy shows it: the full lesson's markdown cells tagged ``summary``, shown once
every exercise is done, since the summary states their answers (:meth:`Exercises.lesson_summary`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SUMMARY_TAG = "summary"


@dataclass(frozen=True)
class NotYet:
    """Stands where the summary would be while exercises are open."""

    lesson: str
    open_keys: tuple[str, ...]

    def _text(self, code: str) -> str:
        calls = ", ".join(f"{code}nb{self.lesson}.reveal({k!r}){code}" for k in self.open_keys)
        return (
            "The summary states the answers of this lesson's exercises: it shows here once each one is right (a "
            f"guess: checked) or revealed. Still open: {calls}. Meanwhile, write your own summary in three lines, "
            "then compare."
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

    found = sorted(p for p in Path(folder).glob(f"{lesson}_*.ipynb") if p.is_file())
    if not found:
        raise ValueError(f"no lesson {lesson} in {folder}: the summary is read from the full lesson there")
    nb = nbformat.read(found[0], as_version=4)
    cells = [c.source for c in nb.cells if c.cell_type == "markdown" and SUMMARY_TAG in c.metadata.get("tags", [])]
    if not cells:
        raise ValueError(f"{found[0].name} has no markdown cell tagged {SUMMARY_TAG!r}")
    return "\n\n".join(cells)
