"""Fixtures for the browser tests: JupyterLab from this environment on loopback, Debian's Chromium.

The browser is Debian's ``chromium`` package (``make browser-deps``), driven by Playwright's Python
package with ``executable_path``; Playwright's own browser download is never used. Where there is
no Chromium the tests are skipped with the reason, except when ``COURSE_REQUIRE_BROWSER=1`` (as
``.ci/run`` sets it): then they fail, so CI can never pass without having run them.

Screenshots and a short report per notebook go to ``test-output/browser/`` (git-ignored;
``COURSE_TEST_OUTPUT`` moves it).
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import labdriver  # noqa: E402  (this folder's driver module)

REPO = Path(__file__).resolve().parents[2]
OUTPUT = Path(os.environ.get("COURSE_TEST_OUTPUT") or REPO / "test-output") / "browser"
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
REQUIRED = os.environ.get("COURSE_REQUIRE_BROWSER", "").strip() not in ("", "0")


def unavailable(reason: str) -> None:
    """Skip, or fail when the browser tests are required (CI)."""
    if REQUIRED:
        pytest.fail(f"{reason} (COURSE_REQUIRE_BROWSER is set: the browser tests must run here)")
    pytest.skip(reason)


@dataclass
class Browser:
    """A Chromium context whose requests off this machine are aborted and listed in `blocked`."""

    context: object
    blocked: list[str] = field(default_factory=list)

    def new_page(self):
        return self.context.new_page()


@pytest.fixture(scope="module")
def output_dir() -> Path:
    OUTPUT.mkdir(parents=True, exist_ok=True)
    return OUTPUT


@pytest.fixture(scope="module")
def chromium_executable() -> str:
    """Debian's Chromium and Playwright, or a skip (a failure in CI) saying what is missing."""
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        unavailable(f"no Chromium at {CHROMIUM}: `make browser-deps` installs Debian's (or set CHROMIUM_PATH)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        unavailable("the playwright package is not installed: `make install` installs the test extras")
    return CHROMIUM


@pytest.fixture(scope="module")
def browser(chromium_executable, tmp_path_factory) -> Browser:
    # Module scope, not session: the browser is closed before this worker runs other tests.
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = labdriver.launch_chromium(
            playwright, chromium_executable, tmp_path_factory.mktemp("chromium-profile")
        )
        wrapper = Browser(context)
        labdriver.block_outside_requests(context, wrapper.blocked)
        try:
            yield wrapper
        finally:
            context.close()


@pytest.fixture(scope="module")
def lab(chromium_executable, tmp_path_factory, output_dir):
    """JupyterLab serving an empty temporary folder; tests copy notebooks into ``lab.root``.

    Notebooks run from a copy, never from notebooks/ itself: nothing a test does can write
    outputs into the committed lessons (and a copy elsewhere is also how learners use them).
    """
    server = labdriver.JupyterLab(tmp_path_factory.mktemp("lab-root"), tmp_path_factory.mktemp("lab-state"))
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.copy(server.log_path, output_dir / "jupyterlab.log")
