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

``requirements-space.lock`` (``--hashes``) holds the same pins with the SHA-256 of the wheel the
Space's image installs (Linux x86_64, CPython 3.11), fetched with ``pip download``: the Dockerfile
installs it with ``make install HASHES=1`` (``pip install --require-hashes --only-binary=:all:``),
so a changed file on the index fails the build. requirements.lock itself carries no hashes: one
hash per pin would make pip refuse every other platform's wheel (a learner's macOS or ARM laptop).
Not hash-checked even in the Space: torch (the Makefile's TORCH_VERSION, a CUDA build whose
nvidia-* and triton dependencies follow it) and the course package itself (installed editable from
the image's own files).

Run it from a virtual environment made by ``make install`` (it reads that environment).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
ENV_YML = ROOT / "environment.yml"
SPACE_LOCK = ROOT / "requirements-space.lock"
# The Space's image (Dockerfile: python:3.11-slim on x86_64); a 3.11 release recent enough for every pin.
SPACE_PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "linux_x86_64")
SPACE_PYTHON = "3.11.7"
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


def read_lock(path: Path = LOCK) -> list[str]:
    """The ``name==version`` pins of a lock file (hash options left out)."""
    pins = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip().rstrip("\\").strip()
        if line and not line.startswith("--"):
            pins.append(line.split()[0])
    return pins


def _canonical(pin: str) -> tuple[str, str]:
    from packaging.utils import canonicalize_name

    name, version = pin.split("==", 1)
    return canonicalize_name(name), version


def space_lock_text(pins: list[str], wheels: Path) -> str:
    """The pins with the SHA-256 of the Space's wheel of each (downloaded into `wheels`)."""
    from packaging.utils import parse_wheel_filename
    from packaging.version import Version

    digests: dict[tuple[str, str], list[str]] = {}
    for wheel in sorted(wheels.glob("*.whl")):
        name, version, _, _ = parse_wheel_filename(wheel.name)
        digests.setdefault((name, str(version)), []).append(hashlib.sha256(wheel.read_bytes()).hexdigest())
    lines = [
        "# requirements.lock with the SHA-256 of the wheel the Space's image installs (Linux x86_64, CPython 3.11);",
        "# written by scripts/lock_environment.py --hashes, installed by `make install HASHES=1` (--require-hashes).",
    ]
    for pin in pins:
        name, version = _canonical(pin)
        found = digests.get((name, str(Version(version))))
        if not found:
            raise SystemExit(f"no wheel of {pin} was downloaded for the Space's platform: cannot hash it")
        lines.append(pin + "".join(f" \\\n    --hash=sha256:{d}" for d in found))
    return "\n".join(lines) + "\n"


def download_space_wheels(dest: Path) -> None:
    """``pip download`` of every pin, the Space's wheel of each, into `dest` (needs the package index)."""
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "-d", str(dest)]
    cmd += [a for p in SPACE_PLATFORMS for a in ("--platform", p)]
    cmd += ["--python-version", SPACE_PYTHON, "--implementation", "cp", "-r", str(LOCK)]
    subprocess.run(cmd, check=True)


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
    if not SPACE_LOCK.is_file() or sorted(map(_canonical, read_lock(SPACE_LOCK))) != sorted(map(_canonical, pins)):
        problems.append(
            f"{SPACE_LOCK.name} does not pin what requirements.lock pins: run scripts/lock_environment.py --hashes"
        )
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check; exit 1 on a disagreement")
    parser.add_argument("--hashes", action="store_true", help=f"also write {SPACE_LOCK.name} (downloads the wheels)")
    args = parser.parse_args(argv)
    if not args.check:
        pins = frozen()
        LOCK.write_text(lock_text(pins))
        ENV_YML.write_text(environment_text(pins))
        print(f"wrote {LOCK.name} ({len(pins)} pins) and {ENV_YML.name}")
    if args.hashes and not args.check:
        with tempfile.TemporaryDirectory() as wheels:
            download_space_wheels(Path(wheels))
            SPACE_LOCK.write_text(space_lock_text(read_lock(), Path(wheels)))
        print(f"wrote {SPACE_LOCK.name} (the Space's wheels, hashed)")
    problems = check()
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
