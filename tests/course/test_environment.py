"""The descriptions of the environment agree: pyproject.toml (what the package needs),
requirements.lock (the exact versions `make install` uses), environment.yml (conda, written from the
lock) and the Makefile's torch pin."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import lock_environment
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~ ;\[]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _environment_yml() -> dict[str, str]:
    pip_section = False
    found = {}
    for line in (ROOT / "environment.yml").read_text().splitlines():
        if line.strip() == "- pip:":
            pip_section = True
            continue
        m = re.match(r"^\s{6}- (.+)$", line)
        if pip_section and m and not m.group(1).startswith("-e"):
            found[_name(m.group(1))] = m.group(1).replace(" ", "")
    return found


def test_lock_pins_every_declared_dependency_and_environment_yml_follows_it():
    assert lock_environment.check() == []


def test_lock_pins_exact_versions_and_leaves_the_torch_build_out():
    pins = lock_environment.read_lock()
    assert pins and all(re.fullmatch(r"[A-Za-z0-9_.\-]+==[^=\s]+", p) for p in pins), pins
    names = {_name(p) for p in pins}
    assert not {n for n in names if lock_environment.TORCH_BUILD.match(n)}, (
        "torch, triton, nvidia-* follow the torch pin"
    )


def test_every_declared_bound_holds_for_the_locked_version():
    from packaging.requirements import Requirement

    locked = {_name(p): p.split("==")[1] for p in lock_environment.read_lock()}
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = list(meta["dependencies"]) + [d for deps in meta["optional-dependencies"].values() for d in deps]
    for dep in declared:
        req = Requirement(dep)
        if lock_environment.TORCH_BUILD.match(req.name):
            continue
        assert req.specifier.contains(locked[_name(req.name)], prereleases=True), (dep, locked[_name(req.name)])


def test_torch_pin_matches_makefile():
    pin = lock_environment.torch_pin()
    assert _environment_yml()["torch"] == f"torch=={pin}"
    assert pin.startswith("2.13")


def test_requires_python_is_what_the_tests_need():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["requires-python"] == ">=3.11", "the tests import tomllib (Python 3.11+)"


@pytest.mark.parametrize("target", ["install", "test", "lab"])
def test_makefile_installs_from_the_lock(target):
    makefile = (ROOT / "Makefile").read_text()
    assert "-r requirements.lock" in makefile and "--no-deps -e ." in makefile
    assert re.search(rf"^{target}:", makefile, re.M)


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test\b", ci, re.M)


def test_makefile_installs_triton_when_the_torch_build_brings_none():
    """The CPU wheel of torch has no triton, and the course is installed with --no-deps: without this
    rule a clean install cannot import helpers.kernels (CI failed this way once)."""
    from packaging.requirements import Requirement

    makefile = (ROOT / "Makefile").read_text()
    version = re.search(r"^TRITON_VERSION \?= (\S+)$", makefile, re.M).group(1)
    rule = makefile[makefile.index("$(STAMP):") :]
    torch_at = rule.index('pip install --quiet "torch==$(TORCH_VERSION)"')
    triton_at = rule.index(
        'import triton" 2>/dev/null || $(BIN)/python -m pip install --quiet "triton==$(TRITON_VERSION)"'
    )
    assert torch_at < triton_at < rule.index("$(LOCK_INSTALL)"), "triton after torch, before the lock"
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = list(meta["dependencies"]) + [d for deps in meta["optional-dependencies"].values() for d in deps]
    (triton,) = [Requirement(d) for d in declared if _name(d) == "triton"]
    assert triton.specifier.contains(version), f"TRITON_VERSION {version} does not meet pyproject's {triton}"


def test_the_spaces_lock_hashes_every_pin():
    """requirements-space.lock: the pins of requirements.lock, each with the SHA-256 of the Space's wheel."""
    pins = lock_environment.read_lock()
    space = (ROOT / "requirements-space.lock").read_text()
    assert lock_environment.read_lock(ROOT / "requirements-space.lock") == pins
    entries = [e for e in re.split(r"\n(?=[A-Za-z0-9])", space.split("\n", 2)[2]) if e.strip()]
    assert len(entries) == len(pins) and all(re.search(r"--hash=sha256:[0-9a-f]{64}", e) for e in entries)
    assert not [p for p in lock_environment.check() if "requirements-space.lock" in p]


@pytest.mark.parametrize(
    "hashes, expected",
    [("1", "--require-hashes --only-binary=:all: -r requirements-space.lock"), ("", "-r requirements.lock")],
)
def test_make_install_checks_hashes_when_asked(tmp_path, hashes, expected):
    out = subprocess.run(
        ["make", "-n", "install", f"VENV={tmp_path / 'venv'}", f"HASHES={hashes}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    lock_line = next(line for line in out.stdout.splitlines() if "requirements" in line and "pip install" in line)
    assert lock_line.endswith(expected), lock_line
