"""Make learner copies of the notebooks: solution cells replaced by a prompt.

    python scripts/make_learner_copies.py     # notebooks/NN_*.ipynb -> notebooks/learner/NN_*.ipynb

A cell tagged ``solution`` is replaced by its ``learner_source`` metadata when it has one, otherwise
every top-level assignment ``name = ...`` in it becomes ``name = None  # your answer``, so the
checker shows "not answered yet". Outputs are stripped from the copies.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

import nbformat

# The repository this script belongs to, before any installed copy of helpers.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers.paths import NOTEBOOKS_DIR  # noqa: E402

SOLUTION_TAG = "solution"
BANNER = (
    "**Learner copy.** Cells that held a solution now ask for your answer; each check cell tells you "
    "whether you are right. The full notebook is `../{name}`."
)


def blank_solution(source: str) -> str:
    """Replace each top-level assignment's value by ``None``; keep comments out, keep names."""
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        raise ValueError(
            f"solution cell is not valid Python ({err}); give it a 'learner_source' in its metadata"
        ) from err
    lines = []
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = ", ".join(ast.unparse(t) for t in targets)
            lines.append(f"{names} = None  # your answer")
    if not lines:
        raise ValueError("a solution cell without assignments needs a 'learner_source' in its metadata")
    return "\n".join(lines)


def learner_notebook(nb: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """A learner copy of `nb` (the input is not modified)."""
    copy = nbformat.from_dict(nb)
    replaced = 0
    for cell in copy.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        if SOLUTION_TAG in cell.get("metadata", {}).get("tags", []):
            custom = cell.metadata.get("learner_source")
            cell.source = custom if custom is not None else blank_solution(cell.source)
            cell.metadata["tags"] = [t for t in cell.metadata["tags"] if t != SOLUTION_TAG] + ["exercise"]
            replaced += 1
    if replaced == 0:
        raise ValueError(f"{name} has no cell tagged {SOLUTION_TAG!r}: nothing to turn into an exercise")
    copy.cells.insert(0, nbformat.v4.new_markdown_cell(BANNER.format(name=name)))
    copy.metadata["course"] = {"learner_copy": True, "solutions_replaced": replaced}
    return copy


def make_learner_copies(src: Path = NOTEBOOKS_DIR, dest: Path | None = None) -> list[Path]:
    """Write learner copies of every ``NN_*.ipynb`` in `src` into `dest` (default ``src/learner``)."""
    dest = dest or src / "learner"
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(src.glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        out = dest / path.name
        nbformat.write(learner_notebook(nb, path.name), out)
        written.append(out)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=NOTEBOOKS_DIR)
    parser.add_argument("--dest", type=Path, default=None)
    args = parser.parse_args(argv)
    for out in make_learner_copies(args.src, args.dest):
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
