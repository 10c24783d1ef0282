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


# ------------------------------------------------------------------ hostile inputs (issue 23)


def test_two_resets_in_the_same_second_keep_both_backups(lessons):
    made = make_learner_copies(lessons)
    _edit_answer(made[0].path, "first = 1")
    one = make_learner_copies(lessons, force=["00"])[0].backup
    _edit_answer(made[0].path, "second = 2")
    two = make_learner_copies(lessons, force=["00"])[0].backup
    assert one != two and _answers(one)[0] == "first = 1" and _answers(two)[0] == "second = 2"


def test_backups_never_take_an_existing_name(lessons, monkeypatch):
    """Even when the clock gives two runs the same microsecond, the second backup gets its own name."""
    import datetime as dt

    import make_learner_copies as mlc

    frozen = dt.datetime(2026, 12, 1, 12, 0, 0, 123456)
    monkeypatch.setattr(mlc._dt, "datetime", type("Frozen", (dt.datetime,), {"now": classmethod(lambda cls: frozen)}))
    made = make_learner_copies(lessons)
    backups = []
    for answer in ("a = 1", "b = 2", "c = 3"):
        _edit_answer(made[0].path, answer)
        backups.append(make_learner_copies(lessons, force=["00"])[0].backup)
    assert len(set(backups)) == 3
    assert [_answers(b)[0] for b in backups] == ["a = 1", "b = 2", "c = 3"]


def test_resets_at_once_keep_every_backup(lessons):
    """Two `make learner-reset NB=00` started together: both finish, no backup is overwritten."""
    make_learner_copies(lessons)
    procs = [
        subprocess.Popen(
            [sys.executable, str(SCRIPT), "--src", str(lessons), "--force", "00"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    backups = sorted((lessons / "learner" / "backups").iterdir())
    assert len(backups) == 3 and all(nbformat.read(b, as_version=4).cells for b in backups)
    assert not [p for p in (lessons / "learner").iterdir() if p.name.endswith(".tmp")]


def test_a_failed_write_leaves_the_old_copy_whole(lessons, tmp_path, monkeypatch):
    """A full disk while writing: the old notebook stays under its name, no half-written one, no temp file."""
    import errno

    import make_learner_copies as mlc

    scratch = tmp_path / "scratch"
    made = make_learner_copies(lessons, scratch)
    _edit_answer(made[0].path, "mine = 1")
    before = made[0].path.read_bytes()

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(mlc.os, "fsync", full)
    results = make_learner_copies(lessons, scratch, fresh=True)
    monkeypatch.undo()
    assert [r.action for r in results] == ["failed", "failed"] and "No space left" in results[0].error
    assert made[0].path.read_bytes() == before
    assert sorted(p.name for p in scratch.iterdir()) == sorted(r.path.name for r in made)


@pytest.mark.parametrize("how", ["same", "dotdot", "slash", "link"])
def test_copies_never_go_into_the_lessons_folder(lessons, tmp_path, how):
    before = {p.name: p.read_bytes() for p in lessons.iterdir()}
    link = tmp_path / "looks-elsewhere"
    link.symlink_to(lessons, target_is_directory=True)
    dest = {
        "same": str(lessons),
        "dotdot": str(lessons / "learner" / ".."),
        "slash": str(lessons) + "//",
        "link": str(link),
    }[how]
    with pytest.raises(ValueError, match="lessons' own folder"):
        make_learner_copies(lessons, Path(dest), fresh=True)
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--src", str(lessons), "--dest", dest, "--fresh"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "lessons' own folder" in out.stderr
    assert {p.name: p.read_bytes() for p in lessons.iterdir()} == before


def test_the_repositorys_lessons_folder_is_refused_whatever_the_source(lessons, tmp_path, monkeypatch):
    import make_learner_copies as mlc

    fake_repo_lessons = tmp_path / "repo" / "notebooks"
    fake_repo_lessons.mkdir(parents=True)
    monkeypatch.setattr(mlc, "NOTEBOOKS_DIR", fake_repo_lessons)
    with pytest.raises(ValueError, match="lessons' own folder"):
        mlc.make_learner_copies(lessons, tmp_path / "repo" / "." / "notebooks/", fresh=True)
    assert not any(fake_repo_lessons.iterdir())


def test_one_corrupt_lesson_is_reported_and_the_others_copied(lessons, tmp_path):
    (lessons / "00_broken.ipynb").write_text('{"cells": [')  # truncated JSON
    results = make_learner_copies(lessons)
    by_name = {r.path.name: r for r in results}
    assert by_name["00_broken.ipynb"].action == "failed" and "00_broken" not in str(
        [p.name for p in (lessons / "learner").iterdir()]
    )
    assert [r.action for r in results if r.path.name != "00_broken.ipynb"] == ["created", "created"]
    # a plain run (make lab, the Space) still succeeds with a warning; the test copies fail at the end
    plain = subprocess.run(
        [sys.executable, str(SCRIPT), "--src", str(lessons)], capture_output=True, text=True, timeout=60
    )
    assert plain.returncode == 0 and "1 lesson(s) failed" in plain.stderr and "00_broken.ipynb" in plain.stderr
    fresh = subprocess.run(
        [sys.executable, str(SCRIPT), "--src", str(lessons), "--dest", str(tmp_path / "t"), "--fresh"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert fresh.returncode == 1 and len(list((tmp_path / "t").glob("*.ipynb"))) == 2
