"""Make learner copies of the notebooks (solutions replaced by prompts), never overwriting a learner's work.

    python scripts/make_learner_copies.py                 # create the copies that are missing in notebooks/learner/
    python scripts/make_learner_copies.py --force 03      # regenerate one (the old copy is backed up first)
    python scripts/make_learner_copies.py --dest build/learner-test --fresh   # a scratch set for the tests

A cell tagged ``solution`` is replaced by its ``learner_source`` metadata when it has one, otherwise
every top-level assignment ``name = ...`` in it becomes ``name = None  # your answer``, so the
checker shows "not answered yet". Outputs are stripped from the copies.

A copy that exists is the learner's: it is kept as it is, even when the lesson changed since (the
script says so and how to get the new version). ``--force NAME`` regenerates one copy after saving
the old one to ``<dest>/backups/``. The learner folder may be a symbolic link (a Space keeps it on
its persistent /data volume); a link to a folder that does not exist yet gets that folder.
"""

from __future__ import annotations

import argparse
import ast
import datetime as _dt
import hashlib
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

# The repository this script belongs to, before any installed copy of helpers.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers.paths import NOTEBOOKS_DIR  # noqa: E402

SOLUTION_TAG = "solution"
LEARNER_DIR = NOTEBOOKS_DIR / "learner"
BACKUPS = "backups"
BANNER = (
    "**Learner copy.** Cells that held a solution now ask for your answer; each check cell tells you "
    "whether you are right. Your edits here are yours: `make lab` never overwrites them. The full lesson, "
    "with the solutions, is `notebooks/{name}` (one folder up); `make learner-reset NB={stem}` gives you a "
    "fresh copy of this one (the old one is kept in `notebooks/learner/backups/`)."
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


def lesson_hash(nb: nbformat.NotebookNode) -> str:
    """A short fingerprint of a lesson's cells: tells whether a copy was made from the current version."""
    text = "\n".join(f"{c.cell_type}:{c.source}" for c in nb.cells)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


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
    copy.cells.insert(0, nbformat.v4.new_markdown_cell(BANNER.format(name=name, stem=Path(name).stem)))
    copy.metadata["course"] = {"learner_copy": True, "solutions_replaced": replaced, "lesson_hash": lesson_hash(nb)}
    return copy


@dataclass(frozen=True)
class CopyResult:
    """What happened to one learner copy: ``created``, ``kept`` (the learner's, untouched), ``regenerated``."""

    path: Path
    action: str
    backup: Path | None = None
    outdated: bool = False  # kept, but made from an older version of the lesson


def _lessons(src: Path) -> list[Path]:
    return sorted(src.glob("[0-9][0-9]_*.ipynb"))


def _match(names: list[str], lessons: list[Path]) -> set[Path]:
    """Lessons named by "03", "03_geglu_mlp_eager" or "03_geglu_mlp_eager.ipynb" (ValueError otherwise)."""
    chosen = set()
    for name in names:
        key = Path(name).name.removesuffix(".ipynb")
        found = [p for p in lessons if p.stem == key or p.stem.split("_", 1)[0] == key]
        if len(found) != 1:
            raise ValueError(f"no single lesson named {name!r}; lessons: {', '.join(p.stem for p in lessons)}")
        chosen.add(found[0])
    return chosen


def _prepare(dest: Path) -> None:
    """Make `dest` a folder; a symbolic link to a folder that does not exist yet gets that folder."""
    if dest.is_symlink() and not dest.exists():
        Path(os.path.realpath(dest)).mkdir(parents=True, exist_ok=True)
    dest.mkdir(parents=True, exist_ok=True)


def _outdated(path: Path, lesson: nbformat.NotebookNode) -> bool:
    try:
        made_from = nbformat.read(path, as_version=4).metadata.get("course", {}).get("lesson_hash")
    except Exception:  # an unreadable copy is the learner's business; it is kept all the same
        return False
    return made_from != lesson_hash(lesson)


def make_learner_copies(
    src: Path = NOTEBOOKS_DIR, dest: Path | None = None, force: list[str] | tuple[str, ...] = (), fresh: bool = False
) -> list[CopyResult]:
    """Learner copies of every ``NN_*.ipynb`` in `src`, in `dest` (default ``src/learner``).

    Missing copies are created; existing ones are kept untouched. `force` names lessons to
    regenerate ("03" or "03_geglu_mlp_eager"): their old copy is first moved to
    ``dest/backups/<name>-<time>.ipynb``. `fresh` rewrites every copy without backups, for a
    scratch folder only (refused for the learner folder of the repository).
    """
    dest = Path(dest) if dest is not None else Path(src) / "learner"
    if fresh and dest.resolve() == LEARNER_DIR.resolve():
        raise ValueError(f"--fresh would overwrite the learners' own copies in {dest}; use --force NAME instead")
    lessons = _lessons(Path(src))
    forced = _match(list(force), lessons)
    _prepare(dest)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    results = []
    for path in lessons:
        nb = nbformat.read(path, as_version=4)
        out = dest / path.name
        if out.exists() and not fresh and path not in forced:
            results.append(CopyResult(out, "kept", outdated=_outdated(out, nb)))
            continue
        backup = None
        if out.exists() and not fresh:
            (dest / BACKUPS).mkdir(exist_ok=True)
            backup = dest / BACKUPS / f"{path.stem}-{stamp}.ipynb"
            shutil.copy2(out, backup)
        action = "created" if not out.exists() else "regenerated"
        nbformat.write(learner_notebook(nb, path.name), out)
        results.append(CopyResult(out, action, backup))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=NOTEBOOKS_DIR)
    parser.add_argument("--dest", type=Path, default=None, help="default: <src>/learner")
    parser.add_argument(
        "--force", nargs="+", default=[], metavar="NAME", help="regenerate these copies (backed up first)"
    )
    parser.add_argument("--fresh", action="store_true", help="rewrite every copy, no backups (scratch folders only)")
    args = parser.parse_args(argv)
    try:
        results = make_learner_copies(args.src, args.dest, args.force, args.fresh)
    except ValueError as err:
        parser.error(str(err))
    for r in results:
        note = f" (old copy saved as {r.backup})" if r.backup else ""
        if r.outdated:
            note = f" (yours; the lesson changed since: `make learner-reset NB={r.path.stem[:2]}` for the new one)"
        print(f"{r.action:11s} {r.path}{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
