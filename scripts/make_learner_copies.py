"""Make learner copies of the notebooks (solutions replaced by prompts), never overwriting a learner's work.

    python scripts/make_learner_copies.py                 # create the copies that are missing in notebooks/learner/
    python scripts/make_learner_copies.py --force 03      # regenerate one (the old copy is backed up first)
    python scripts/make_learner_copies.py --dest build/learner-test --fresh   # a scratch set for the tests

A cell tagged ``solution`` is replaced by its ``learner_source`` metadata when it has one, otherwise
every top-level assignment ``name = ...`` in it becomes ``name = None  # your answer``, so the
checker shows "not answered yet". A markdown cell tagged ``summary`` (the lesson's summary, which states
the answers) becomes ``nbNN.EXERCISES.lesson_summary()``, which shows it once the exercises are done. Outputs are
stripped from the copies.

A copy that exists is the learner's: it is kept as it is, even when the lesson changed since (the
script says so and how to get the new version). ``--force NAME`` regenerates one copy after saving
the old one to ``<dest>/backups/``. The learner folder may be a symbolic link (a Space keeps it on
its persistent /data volume); a link to a folder that does not exist yet gets that folder.

Nothing a learner made is lost: every copy is written to a temporary file in its folder, flushed
to disk, then renamed over its name (a full disk leaves the old file, never half a notebook);
backups get names no other run can take (microseconds, and an exclusive create); the copies never
go into the lessons' own folder. A lesson that cannot be read or turned into an exercise is
reported and skipped and the other copies are still made. Exit status: 0 when every copy was made
or kept; for a plain run (``make lab``, the Space) also when a lesson failed, with a warning, so
that JupyterLab still opens on the others; 1 with ``--fresh`` or ``--force`` (the test copies and an
explicit reset must not pass silently).
"""

from __future__ import annotations

import argparse
import ast
import datetime as _dt
import hashlib
import io
import os
import secrets
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

# The repository this script belongs to, before any installed copy of helpers.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers.lessons.lesson_summary import SUMMARY_TAG  # noqa: E402
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
    copy.cells = [_hide_summary(cell, name) for cell in copy.cells]
    copy.cells.insert(0, nbformat.v4.new_markdown_cell(BANNER.format(name=name, stem=Path(name).stem)))
    copy.metadata["course"] = {"learner_copy": True, "solutions_replaced": replaced, "lesson_hash": lesson_hash(nb)}
    return copy


def _hide_summary(cell: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """A cell tagged ``summary`` states the exercises' answers: in the copy it becomes a call that shows the full
    lesson's summary once they are done."""
    if SUMMARY_TAG not in cell.get("metadata", {}).get("tags", []):
        return cell
    if cell.cell_type != "markdown":
        raise ValueError(f"{name}: a cell tagged {SUMMARY_TAG!r} must be markdown")
    return nbformat.v4.new_code_cell(
        f"nb{name[:2]}.EXERCISES.lesson_summary()  # the lesson's summary: shown once every exercise above is done"
    )


@dataclass(frozen=True)
class CopyResult:
    """What happened to one learner copy: ``created``, ``kept`` (the learner's, untouched), ``regenerated``."""

    path: Path
    action: str  # created / kept / regenerated / failed
    backup: Path | None = None
    outdated: bool = False  # kept, but made from an older version of the lesson
    error: str | None = None  # why a lesson failed (its copy, if any, was left as it was)


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


def _refuse_lessons_folder(src: Path, dest: Path) -> None:
    """Copies carry the lessons' own file names: written into a lessons folder they would replace the lessons."""
    target = dest.resolve()  # follows links, `..` and trailing slashes, even for a folder not made yet
    for lessons in {Path(src).resolve(), NOTEBOOKS_DIR.resolve()}:
        if target == lessons:
            raise ValueError(
                f"--dest {dest} is the lessons' own folder ({lessons}): the copies would overwrite the lessons. "
                "Give another folder, e.g. build/learner-test"
            )


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(data: bytes, target: Path) -> None:
    """`data` under `target`, all or nothing: a temporary file in its folder, flushed to disk, then renamed."""
    tmp = target.with_name(f".{target.name}.incomplete-{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(target.parent)


def backup_copy(path: Path, folder: Path, stem: str) -> Path:
    """A copy of `path` in `folder` under a name no other run takes: the time to the microsecond, then a counter."""
    folder.mkdir(exist_ok=True)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    data = path.read_bytes()
    for n in range(1000):
        target = folder / (f"{stem}-{stamp}.ipynb" if n == 0 else f"{stem}-{stamp}-{n}.ipynb")
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)  # never an existing backup
        except FileExistsError:
            continue
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
        except BaseException:
            target.unlink(missing_ok=True)
            raise
        shutil.copystat(path, target)
        _fsync_dir(folder)
        return target
    raise FileExistsError(f"1000 backups of {stem} named {stamp} already exist in {folder}")


def _notebook_bytes(nb: nbformat.NotebookNode) -> bytes:
    buffer = io.StringIO()
    nbformat.write(nb, buffer)
    return buffer.getvalue().encode("utf-8")


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
    _refuse_lessons_folder(Path(src), dest)
    if fresh and dest.resolve() == LEARNER_DIR.resolve():
        raise ValueError(f"--fresh would overwrite the learners' own copies in {dest}; use --force NAME instead")
    lessons = _lessons(Path(src))
    forced = _match(list(force), lessons)
    _prepare(dest)
    results = []
    for path in lessons:
        out = dest / path.name
        try:
            nb = nbformat.read(path, as_version=4)
            if out.exists() and not fresh and path not in forced:
                results.append(CopyResult(out, "kept", outdated=_outdated(out, nb)))
                continue
            data = _notebook_bytes(learner_notebook(nb, path.name))  # made before anything is touched
        except Exception as err:  # one broken lesson must not stop the others (make lab still opens)
            results.append(CopyResult(out, "failed", error=f"{type(err).__name__}: {str(err)[:300]}"))
            continue
        backup = None
        action = "created" if not out.exists() else "regenerated"
        try:
            if out.exists() and not fresh:
                backup = backup_copy(out, dest / BACKUPS, path.stem)
            write_atomic(data, out)
        except OSError as err:  # a full disk, no permission: the old copy (if any) is still whole
            results.append(CopyResult(out, "failed", backup, error=f"could not write it: {err}"))
            continue
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
    failed = [r for r in results if r.action == "failed"]
    for r in results:
        note = f" (old copy saved as {r.backup})" if r.backup else ""
        if r.outdated:
            note = f" (yours; the lesson changed since: `make learner-reset NB={r.path.stem[:2]}` for the new one)"
        if r.action == "failed":
            note = f": the lesson could not be copied ({r.error}); {'your copy is untouched' if r.path.exists() else 'no copy made'}"
        print(f"{r.action:11s} {r.path}{note}")
    if failed:
        print(
            f"make_learner_copies: {len(failed)} lesson(s) failed, the other copies were made: "
            + ", ".join(r.path.name for r in failed),
            file=sys.stderr,
        )
        # a plain run feeds `make lab` and the Space: JupyterLab opens on the copies that worked
        return 1 if (args.fresh or args.force) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
