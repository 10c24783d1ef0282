"""Uninstall what only the tests need (Playwright, pytest, the linters) from the Space image.

    .venv/bin/python space/drop_test_tools.py            # uninstall them (the Dockerfile runs this after `make install`)
    .venv/bin/python space/drop_test_tools.py --list     # only print their names

`make install` installs every pinned package, tests' tools included (the same environment on
every machine). A Space serves lessons: a browser driver and test runners in it are weight and
attack surface for nothing. The packages to drop are computed, not listed by hand: those required
(directly or through their own requirements) by the ``test`` extra of pyproject.toml and by
neither the course's dependencies nor its ``course`` extra. Run in the same Docker ``RUN`` as
``make install``, so they never land in an image layer. ``pip check`` must pass afterwards.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent


def _closure(requirements: list[str]) -> set[str]:
    """Names of the installed distributions `requirements` need, with their own requirements, recursively."""
    seen: set[str] = set()
    todo = [(Requirement(r), "") for r in requirements]
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({**default_environment(), "extra": extra}):
            continue
        name = canonicalize_name(req.name)
        extras = sorted(req.extras)
        key = name + "[" + ",".join(extras) + "]"
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # not installed (an optional extra of something, or already dropped)
        for sub in dist.requires or []:
            for ask in ["", *extras]:
                todo.append((Requirement(sub), ask))
    return {key.split("[", 1)[0] for key in seen}


def test_only_packages(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """Installed distributions needed by the ``test`` extra alone."""
    project = tomllib.loads(pyproject.read_text())["project"]
    extras = project.get("optional-dependencies", {})
    kept = _closure(list(project["dependencies"]) + list(extras.get("course", [])))
    tests = _closure(list(extras.get("test", [])))
    installed = {canonicalize_name(d.metadata["Name"]) for d in importlib.metadata.distributions()}
    return sorted((tests - kept) & installed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print the packages, uninstall nothing")
    args = parser.parse_args(argv)
    names = test_only_packages()
    if args.list or not names:
        print("\n".join(names) or "nothing to drop")
        return 0
    print(f"dropping {len(names)} packages only the tests use: {' '.join(names)}", flush=True)
    subprocess.run([sys.executable, "-m", "pip", "uninstall", "--yes", "--quiet", *names], check=True)
    subprocess.run([sys.executable, "-m", "pip", "check"], check=True)  # nothing the course uses went with them
    return 0


if __name__ == "__main__":
    sys.exit(main())
