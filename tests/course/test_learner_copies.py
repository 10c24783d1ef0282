"""Learner copies are the learner's: made when missing, never overwritten, regenerated only on request.

Issue 11: `make lab` used to regenerate every copy, wiping a learner's answers; `make test` ran the
learner's own copies. Now scripts/make_learner_copies.py creates missing copies only, `--force NAME`
backs the old copy up before regenerating it, `--fresh` is for scratch folders (make test), and the
learner folder may be a symbolic link (a Space keeps it on its persistent /data volume).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from make_learner_copies import LEARNER_DIR, main, make_learner_copies

from helpers.paths import NOTEBOOKS_DIR, REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "make_learner_copies.py"


@pytest.fixture
def lessons(tmp_path) -> Path:
    """Two small lessons in a folder of their own (the real ones are read, not written)."""
    src = tmp_path / "notebooks"
    src.mkdir()
    for path in sorted(NOTEBOOKS_DIR.glob("0[0-1]_*.ipynb")):
        (src / path.name).write_text(path.read_text())
    return src


def _edit_answer(path: Path, text: str) -> None:
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if "exercise" in c.metadata.get("tags", []))
    cell.source = text
    nbformat.write(nb, path)


def _answers(path: Path) -> list[str]:
    return [c.source for c in nbformat.read(path, as_version=4).cells if "exercise" in c.metadata.get("tags", [])]


def test_a_learners_edit_survives_another_run(lessons):
    first = make_learner_copies(lessons)
    assert [r.action for r in first] == ["created", "created"]
    copy = first[0].path
    _edit_answer(copy, "my_answer = 42")
    again = make_learner_copies(lessons)
    assert [r.action for r in again] == ["kept", "kept"] and not any(r.outdated for r in again)
    assert _answers(copy)[0] == "my_answer = 42"


def test_a_missing_copy_is_made_and_the_others_kept(lessons):
    made = make_learner_copies(lessons)
    _edit_answer(made[0].path, "mine = 1")
    made[1].path.unlink()
    again = make_learner_copies(lessons)
    assert [r.action for r in again] == ["kept", "created"]
    assert _answers(made[0].path)[0] == "mine = 1"


def test_force_regenerates_one_copy_after_a_backup(lessons):
    made = make_learner_copies(lessons)
    _edit_answer(made[0].path, "mine = 1")
    _edit_answer(made[1].path, "mine = 2")
    redone = make_learner_copies(lessons, force=["00"])
    assert [r.action for r in redone] == ["regenerated", "kept"]
    backup = redone[0].backup
    assert backup is not None and backup.parent.name == "backups" and _answers(backup)[0] == "mine = 1"
    assert _answers(made[0].path)[0] != "mine = 1" and _answers(made[1].path)[0] == "mine = 2"
    with pytest.raises(ValueError, match="no single lesson"):
        make_learner_copies(lessons, force=["99"])


def test_a_changed_lesson_is_reported_not_overwritten(lessons, capsys):
    made = make_learner_copies(lessons)
    nb = nbformat.read(lessons / made[0].path.name, as_version=4)
    nb.cells[0].source += "\n\nA new paragraph."
    nbformat.write(nb, lessons / made[0].path.name)
    before = made[0].path.read_text()
    assert main(["--src", str(lessons)]) == 0
    assert made[0].path.read_text() == before
    assert "lesson changed since" in capsys.readouterr().out


@pytest.mark.parametrize("target_exists", [True, False])
def test_the_learner_folder_may_be_a_symbolic_link(lessons, tmp_path, target_exists):
    """On a Space, notebooks/learner links to the persistent /data volume (space/start.sh)."""
    data = tmp_path / "data" / "learner"
    if target_exists:
        data.mkdir(parents=True)
    link = lessons / "learner"
    link.symlink_to(data, target_is_directory=True)
    made = make_learner_copies(lessons)
    assert {r.action for r in made} == {"created"} and link.is_symlink()
    assert sorted(p.name for p in data.glob("*.ipynb")) == [r.path.name for r in made]
    _edit_answer(made[0].path, "kept = True")
    assert [r.action for r in make_learner_copies(lessons)] == ["kept", "kept"]
    assert _answers(data / made[0].path.name)[0] == "kept = True"


def test_fresh_is_for_scratch_folders_only(lessons, tmp_path):
    scratch = tmp_path / "build" / "learner-test"
    make_learner_copies(lessons, scratch)
    _edit_answer(scratch / "00_setup_and_first_trace.ipynb", "x = 1")
    assert {r.action for r in make_learner_copies(lessons, scratch, fresh=True)} == {"regenerated"}
    assert not (scratch / "backups").exists()
    with pytest.raises(ValueError, match="learners' own copies"):
        make_learner_copies(NOTEBOOKS_DIR, LEARNER_DIR, fresh=True)


def test_the_command_line(lessons):
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--src", str(lessons), "--force", "00_setup_and_first_trace"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "created" in out.stdout
    bad = subprocess.run(
        [sys.executable, str(SCRIPT), "--src", str(lessons), "--force", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "no single lesson" in bad.stderr


def test_makefile_runs_lab_as_root_and_tests_fresh_copies():
    make = (REPO_ROOT / "Makefile").read_text()
    lab = make.split("\nlab:", 1)[1].split("\n\n", 1)[0]
    assert "$(ROOT_FLAG)" in lab and "--allow-root" in make.split("ROOT_FLAG :=", 1)[1].split("\n", 1)[0]
    assert "default_url=/lab/tree/learner" in lab
    test = make.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "learner-test" in test.splitlines()[0] and "--ignore=notebooks/learner" in test
    assert "make_learner_copies.py --dest $(LEARNER_TEST_DIR) --fresh" in make
