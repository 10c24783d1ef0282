"""The three descriptions of the environment (pyproject.toml, environment.yml, Makefile) agree."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~ ;\[]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _pyproject() -> dict[str, str]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(meta["dependencies"])
    for extra in ("course", "test"):
        reqs += meta["optional-dependencies"][extra]
    return {_name(r): r.replace(" ", "") for r in reqs}


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


def test_same_packages():
    py, env = _pyproject(), _environment_yml()
    assert set(py) == set(env), f"only in pyproject: {set(py) - set(env)}; only in environment.yml: {set(env) - set(py)}"


def test_same_version_bounds_except_the_torch_pin():
    py, env = _pyproject(), _environment_yml()
    differing = {n for n in py if n != "torch" and py[n] != env[n]}
    assert not differing, {n: (py[n], env[n]) for n in differing}


def test_torch_pin_matches_makefile():
    pin = re.search(r"^TORCH_VERSION \?= (\S+)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert _environment_yml()["torch"] == f"torch=={pin}"
    assert pin.startswith("2.13")


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test\b", ci, re.M)
