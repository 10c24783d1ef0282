"""Write the exact versions every install uses, and the conda environment derived from them.

    python scripts/lock_environment.py           # rewrite requirements.lock and environment.yml
    python scripts/lock_environment.py --check   # exit 1 if they disagree with pyproject.toml

``requirements.lock`` pins every package the course installs (``pip freeze`` of a fresh
``make install``), except torch and what comes with its build: torch is pinned by the Makefile's
``TORCH_VERSION`` (a CPU wheel on a laptop, a CUDA wheel with its own triton and nvidia-* libraries
on a GPU machine); the CPU wheel brings no triton, so the Makefile adds its ``TRITON_VERSION``.
``make install`` installs torch, then the lock, then the course package itself without
dependencies, so 40 workshop machines get the same versions.
``environment.yml`` is written from the same lock for conda users.

Run it from a virtual environment made by ``make install`` (it reads that environment).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
ENV_YML = ROOT / "environment.yml"
# Packages that follow the torch build (CPU or CUDA): never pinned in the lock.
TORCH_BUILD = re.compile(r"^(torch|triton|nvidia-.*|cuda-.*|pytorch-triton.*)$", re.I)
PROJECT = "profiling-course-helpers"


def torch_pin() -> str:
    return re.search(r"^TORCH_VERSION \?= (\S+)$", (ROOT / "Makefile").read_text(), re.M).group(1)


def frozen() -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pip", "freeze", "--exclude-editable"], capture_output=True, text=True, check=True
    ).stdout
    lines = []
    for line in out.splitlines():
        name = re.split(r"[=<>@ ]", line, maxsplit=1)[0]
        if not line or line.startswith("#") or " @ " in line or TORCH_BUILD.match(name) or name == PROJECT:
            continue
        lines.append(line)
    return sorted(lines, key=str.lower)


def lock_text(pins: list[str]) -> str:
    head = (
        "# Exact versions for `make install` (scripts/lock_environment.py writes this file; do not edit).\n"
        f"# torch is pinned by the Makefile (TORCH_VERSION = {torch_pin()}); a CUDA build brings its own triton\n"
        "# and nvidia-* libraries, the CPU build gets the Makefile's TRITON_VERSION: none are listed here.\n"
    )
    return head + "\n".join(pins) + "\n"


def environment_text(pins: list[str]) -> str:
    lines = [
        "# Conda environment for the course (Hugging Face Spaces, workshops), written by",
        "# scripts/lock_environment.py from requirements.lock: the same exact versions as `make install`.",
        "name: profiling-course",
        "channels:",
        "  - conda-forge",
        "dependencies:",
        "  - python=3.11",
        "  - pip",
        "  - pip:",
        f"      - torch=={torch_pin()}",
    ]
    lines += [f"      - {p}" for p in pins] + ["      - -e ."]
    return "\n".join(lines) + "\n"


def read_lock() -> list[str]:
    return [line.strip() for line in LOCK.read_text().splitlines() if line.strip() and not line.startswith("#")]


def check() -> list[str]:
    """Problems: declared dependencies missing from the lock, environment.yml out of date."""
    problems = []
    pins = read_lock()
    locked = {re.split(r"==", p)[0].lower().replace("_", "-") for p in pins}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = list(project["dependencies"]) + [d for deps in project["optional-dependencies"].values() for d in deps]
    for dep in declared:
        name = re.split(r"[<>=!~\[ ;]", dep, maxsplit=1)[0].lower().replace("_", "-")
        if not TORCH_BUILD.match(name) and name not in locked:
            problems.append(f"{name} is a dependency in pyproject.toml but not pinned in requirements.lock")
    if ENV_YML.read_text() != environment_text(pins):
        problems.append("environment.yml differs from what requirements.lock gives: run scripts/lock_environment.py")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check; exit 1 on a disagreement")
    args = parser.parse_args(argv)
    if not args.check:
        pins = frozen()
        LOCK.write_text(lock_text(pins))
        ENV_YML.write_text(environment_text(pins))
        print(f"wrote {LOCK.name} ({len(pins)} pins) and {ENV_YML.name}")
    problems = check()
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
