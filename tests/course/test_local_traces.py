"""Test runs never save over a learner's traces (issue 23): notebook 00 saved `traces/local/linear.json.gz`
during `make test`, replacing the learner's own. The repository's conftest.py points every pytest run
(and the notebook kernels nbmake starts, which inherit its environment) at build/test-traces/."""

from __future__ import annotations

import os
import subprocess
import sys

import helpers
import helpers.paths
from helpers import paths

SHOW = "import helpers; from helpers.trace.saving import SAVING; print(helpers.paths.LOCAL_TRACES_DIR); print(SAVING.default_dir)"


def _run(value: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != paths.LOCAL_TRACES_ENV}
    if value is not None:
        env[paths.LOCAL_TRACES_ENV] = value
    return subprocess.run(
        [sys.executable, "-c", SHOW], env=env, cwd=paths.REPO_ROOT, capture_output=True, text=True, timeout=120
    )


def test_this_test_run_saves_outside_the_learners_folder():
    assert helpers.paths.LOCAL_TRACES_DIR.resolve() != (paths.TRACES_DIR / "local").resolve()
    assert helpers.paths.LOCAL_TRACES_DIR.resolve().is_relative_to((paths.REPO_ROOT / "build").resolve())


def test_a_test_runs_saves_go_to_the_configured_folder(tmp_path, linear_trace):
    learner = paths.TRACES_DIR / "local" / "linear.json.gz"
    before = learner.read_bytes() if learner.exists() else None
    saved = linear_trace.save()  # what notebook 00 does
    assert saved.parent.resolve() == helpers.paths.LOCAL_TRACES_DIR.resolve()
    assert (learner.read_bytes() if learner.exists() else None) == before


def test_the_folder_comes_from_the_environment(tmp_path):
    out = _run(str(tmp_path / "mine"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(tmp_path / "mine")] * 2
    plain = _run(None)
    assert plain.stdout.split() == [str(paths.TRACES_DIR / "local")] * 2


def test_a_folder_among_the_reference_traces_is_refused():
    out = _run(str(paths.TRACES_DIR / "mine"))
    assert out.returncode != 0 and "inside the reference traces folder" in out.stderr
    assert paths.local_traces_dir(str(paths.TRACES_DIR / "local" / "sub")) == paths.TRACES_DIR / "local" / "sub"
    assert paths.local_traces_dir("build/x") == paths.REPO_ROOT / "build" / "x"
