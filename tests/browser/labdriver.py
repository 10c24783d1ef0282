"""Drive the course the way a learner uses it: JupyterLab from this environment, in headless Chromium.

- :class:`JupyterLab` starts ``jupyter lab`` from the running Python (the project's venv) on a
  loopback port with a random token, in an isolated config/settings folder, and stops it again.
- :func:`launch_chromium` starts Debian's Chromium through Playwright (no browser download) with a
  fresh profile; :func:`block_outside_requests` aborts and records every request that leaves the
  machine, so a page that silently needs a CDN (plotly.js, say) fails the tests here as it would
  on a learner's offline laptop.
- :func:`run_notebook` opens a notebook, clicks *Run > Run All Cells* and waits, within a deadline,
  until every cell has run (or the run stopped at an error), then returns a :class:`NotebookRun`.

Every wait is bounded: a hung kernel, page or browser raises, it never blocks the test run.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

# Flags for Debian's Chromium as root on a closed network: no sandbox (root), no GPU, and none of
# Chromium's own background connections (update checks, sync, QUIC probes), which would only be
# refused here (the flags python.md lists for root on this network). The profile is a fresh folder.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}
VIEWPORT = {"width": 1400, "height": 1000}
PLOTLY_MIME = "application/vnd.plotly.v1+json"


def find_lesson(number: str, folder: Path) -> Path:
    """The lesson ``<number>_*.ipynb`` in `folder`; FileNotFoundError when there is not exactly one."""
    found = sorted(Path(folder).glob(f"{number}_*.ipynb"))
    if len(found) != 1:
        raise FileNotFoundError(f"expected one notebook {folder}/{number}_*.ipynb, found {[p.name for p in found]}")
    return found[0]


def free_loopback_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tail(path: Path, chars: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


# ------------------------------------------------------------------------------------- server
class JupyterLab:
    """``jupyter lab`` from `python` serving `root` on 127.0.0.1, isolated from the user's settings.

    Use as a context manager, or call :meth:`start` and :meth:`stop`. Documents are never
    autosaved (the settings turn autosave off), so nothing a test does is written back.
    """

    def __init__(
        self, root: Path, state_dir: Path, python: str = sys.executable, startup_timeout: float = 120.0
    ) -> None:
        self.root = Path(root)
        self.state_dir = Path(state_dir)
        self.python = python
        self.startup_timeout = startup_timeout
        self.token = secrets.token_hex(16)
        self.port = 0
        self.process: subprocess.Popen | None = None
        self.log_path = self.state_dir / "jupyterlab.log"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str = "lab") -> str:
        """A URL of this server that logs the browser in with the token."""
        sep = "&" if "?" in path else "?"
        return f"{self.base_url}/{path.lstrip('/')}{sep}token={self.token}"

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        bin_dir = str(Path(self.python).parent)
        env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
        # Keep the user's ~/.jupyter, lab settings and workspaces out of the test, and the test out of them.
        for var, sub in [
            ("JUPYTER_CONFIG_DIR", "config"),
            ("JUPYTER_RUNTIME_DIR", "runtime"),
            ("JUPYTERLAB_SETTINGS_DIR", "settings"),
            ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"),
            ("IPYTHONDIR", "ipython"),
        ]:
            path = self.state_dir / sub
            path.mkdir(parents=True, exist_ok=True)
            env[var] = str(path)
        env.pop("JUPYTER_TOKEN", None)  # the token is given on the command line
        env.pop("PLOTLY_RENDERER", None)  # plotly's own default, as a learner gets it
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def _write_settings(self) -> None:
        """User settings: no autosave (never write outputs back), no news or update checks (no network)."""
        settings = self.state_dir / "settings"
        for plugin, values in {
            "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
            "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
        }.items():
            path = settings / f"{plugin}.jupyterlab-settings"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))

    def start(self) -> JupyterLab:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        env = self._environment()
        self._write_settings()
        self.port = free_loopback_port()
        cmd = [
            self.python,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--ServerApp.root_dir={self.root}",
            f"--IdentityProvider.token={self.token}",
            # window.jupyterapp: lets the test read cell models (outputs, execution counts) exactly.
            "--LabApp.expose_app_in_browser=True",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly",
            "--ServerApp.terminals_enabled=False",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--ServerApp.allow_root=True")  # CI containers run as root
        log = self.log_path.open("wb")
        # Own process group: stop() can end the server and the kernels it started, and nothing else.
        self.process = subprocess.Popen(
            cmd, cwd=self.root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"jupyter lab exited with {self.process.returncode} while starting:\n{_tail(self.log_path)}"
                )
            if self.status() is not None:
                return self
            time.sleep(0.5)
        self.stop()
        raise TimeoutError(f"jupyter lab did not answer within {self.startup_timeout:.0f} s:\n{_tail(self.log_path)}")

    def status(self) -> dict[str, Any] | None:
        """The server's /api/status, or None when it does not answer (yet)."""
        request = urllib.request.Request(
            f"{self.base_url}/api/status", headers={"Authorization": f"token {self.token}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return json.load(response)
        except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
            return None

    def _api(self, method: str, path: str, timeout: float = 10.0) -> Any:
        request = urllib.request.Request(
            f"{self.base_url}/api/{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        """Shut down every running kernel (the next notebook starts with the machine to itself)."""
        for kernel in self._api("GET", "kernels"):
            self._api("DELETE", f"kernels/{kernel['id']}", timeout=30.0)

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM to the server's process group (server and its kernels), SIGKILL after `timeout`."""
        if self.process is None or self.process.poll() is not None:
            return
        pgid = self.process.pid  # the group's id: the server leads the session it was started in
        try:
            os.killpg(pgid, signal.SIGTERM)
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(pgid, signal.SIGKILL)
            self.process.wait(timeout=10)
        except ProcessLookupError:
            pass

    def __enter__(self) -> JupyterLab:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ------------------------------------------------------------------------------------ browser
def launch_chromium(playwright, executable: str, user_data_dir: Path, timeout_ms: int = 60_000):
    """A persistent Chromium context (fresh profile in `user_data_dir`) with the closed-network flags."""
    if Path(user_data_dir).exists():
        shutil.rmtree(user_data_dir)
    context = playwright.chromium.launch_persistent_context(
        str(user_data_dir),
        executable_path=executable,
        headless=True,
        args=CHROMIUM_FLAGS,
        viewport=VIEWPORT,
        timeout=timeout_ms,
    )
    context.set_default_timeout(30_000)
    context.set_default_navigation_timeout(60_000)
    return context


def is_loopback(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme in {"data", "blob", "file", "about", "chrome", "devtools"}:
        return True
    return (parts.hostname or "") in LOOPBACK_HOSTS


def block_outside_requests(context, record: list[str]) -> None:
    """Abort every request that would leave this machine and append its URL to `record`.

    The course must work offline (the Space may be offline, a laptop on a train is): anything that
    needs the network shows up in `record` and its failure shows up in what the page renders.
    """

    def handle(route) -> None:
        url = route.request.url
        if is_loopback(url):
            route.continue_()
        else:
            record.append(url)
            route.abort("internetdisconnected")

    context.route("**/*", handle)


# ---------------------------------------------------------------------------------- notebooks
# Reads the open notebook through JupyterLab's own models (exposed by --LabApp.expose_app_in_browser).
# Each cell's DOM node gets data-course-cell=<index> so the test can then look at what it renders.
_STATE_JS = """
(full) => {
  const panel = window.jupyterapp.shell.currentWidget;
  if (!panel || !panel.content || !panel.sessionContext) return null;
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  const cells = panel.content.widgets.map((cell, index) => {
    const model = cell.model;
    cell.node.setAttribute('data-course-cell', String(index));
    const prompt = cell.promptNode ? cell.promptNode.textContent : '';
    const info = {index, type: model.type, execution_count: model.type === 'code' ? model.executionCount : null,
                  pending: prompt.includes('*')};
    if (full) {
      info.source = model.sharedModel.getSource();
      info.tags = model.getMetadata('tags') || [];
      info.outputs = model.type === 'code' ? model.outputs.toJSON().map((out) => ({
        output_type: out.output_type, name: out.name || null, ename: out.ename || null,
        evalue: out.evalue || null, mimes: Object.keys(out.data || {}),
        html_tables: ((out.data && out.data['text/html'] ? [].concat(out.data['text/html']).join('') : '')
                      .match(/<table/g) || []).length,
        text: (Array.isArray(out.text) ? out.text.join('') : (out.text || '')).slice(0, 2000),
        traceback: (out.traceback || []).join('\\n').replace(/\\u001b\\[[0-9;]*m/g, '').slice(-3000),
      })) : [];
    }
    return info;
  });
  return {kernel: kernel ? kernel.status : 'none', ready: panel.sessionContext.isReady, cells};
}
"""


@dataclass
class CellRun:
    index: int
    type: str
    source: str
    tags: list[str]
    execution_count: int | None
    outputs: list[dict[str, Any]]

    @property
    def errors(self) -> list[dict[str, Any]]:
        return [o for o in self.outputs if o["output_type"] == "error"]

    @property
    def stderr(self) -> list[str]:
        return [o["text"] for o in self.outputs if o["output_type"] == "stream" and o["name"] == "stderr"]

    def has_mime(self, mime: str) -> bool:
        return any(mime in o["mimes"] for o in self.outputs)

    def where(self) -> str:
        first = next((line for line in self.source.splitlines() if line.strip()), "")
        return f"cell {self.index} ({first[:70]!r})"


@dataclass
class NotebookRun:
    """What a Run All produced, read from JupyterLab's models after the kernel went idle."""

    path: str
    seconds: float
    cells: list[CellRun]
    page_errors: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)  # requests off the machine, filled by the caller

    @property
    def code_cells(self) -> list[CellRun]:
        return [c for c in self.cells if c.type == "code"]

    @property
    def not_run(self) -> list[CellRun]:
        return [c for c in self.code_cells if c.execution_count is None and c.source.strip()]

    def unexpected_errors(self) -> list[str]:
        """Error outputs, except in cells tagged ``raises-exception`` (errors the lesson shows on purpose)."""
        found = []
        for cell in self.code_cells:
            if "raises-exception" in cell.tags:
                continue
            for err in cell.errors:
                found.append(f"{cell.where()}: {err['ename']}: {err['evalue']}\n{err['traceback']}")
        return found


def notebook_state(page, full: bool = False) -> dict[str, Any] | None:
    return page.evaluate(_STATE_JS, full)


def open_notebook(page, lab: JupyterLab, relpath: str, timeout_s: float = 120.0) -> None:
    """Open `relpath` (relative to the server root) and wait until its kernel is idle."""
    # ?reset: start from an empty workspace, not with the tabs an earlier page left open.
    page.goto(lab.url(f"lab/tree/{relpath}?reset"), wait_until="domcontentloaded")
    page.wait_for_function(
        "() => window.jupyterapp && window.jupyterapp.shell && window.jupyterapp.started !== undefined",
        timeout=timeout_s * 1000,
    )
    page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(state="visible", timeout=timeout_s * 1000)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        # A notebook without kernel metadata asks which kernel to use: accept the proposed one.
        dialog = page.locator(".jp-Dialog .jp-mod-accept")
        if dialog.count():
            dialog.first.click()
        state = notebook_state(page)
        if state and state["ready"] and state["kernel"] == "idle":
            return
        time.sleep(0.5)
    raise TimeoutError(
        f"the kernel of {relpath} was not idle within {timeout_s:.0f} s (last state: "
        f"{(notebook_state(page) or {}).get('kernel')})"
    )


def click_run_all(page) -> None:
    """Run > Run All Cells, through the menu bar as a learner does."""
    page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).click()
    page.locator('.lm-Menu-item[data-command="runmenu:run-all"]').click()


def wait_for_run(page, relpath: str, timeout_s: float) -> None:
    """Wait until every code cell has run, or the run stopped at an error; raise at the deadline."""
    deadline = time.monotonic() + timeout_s
    idle_polls = 0
    state: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        time.sleep(1.0)
        state = notebook_state(page)
        if not state:
            continue
        if state["kernel"] == "dead":
            raise RuntimeError(f"{relpath}: the kernel died during Run All (out of memory?)")
        code = [c for c in state["cells"] if c["type"] == "code"]
        busy = state["kernel"] != "idle" or any(c["pending"] for c in code)
        idle_polls = 0 if busy else idle_polls + 1
        if idle_polls >= 2:
            # Idle twice in a row: either everything ran, or JupyterLab stopped at an error and
            # cleared the queue. Which one is for the caller to judge from the cell models.
            return
    pending = [c["index"] for c in (state or {}).get("cells", []) if c.get("pending")]
    raise TimeoutError(
        f"{relpath}: Run All did not finish within {timeout_s:.0f} s; kernel "
        f"{(state or {}).get('kernel')}, cells still queued or running: {pending}"
    )


def run_notebook(page, lab: JupyterLab, relpath: str, timeout_s: float) -> NotebookRun:
    """Open `relpath`, Run All, wait (bounded), and return what every cell produced."""
    page_errors: list[str] = []
    page.on("pageerror", lambda exc: page_errors.append(str(exc)))
    open_notebook(page, lab, relpath)
    counts = "() => window.jupyterapp.shell.currentWidget.content.widgets.map((c) => c.model.executionCount ?? null)"
    page.evaluate(f"() => {{ window.__courseCountsBefore = JSON.stringify(({counts})()); }}")
    started = time.monotonic()
    click_run_all(page)
    # Run All has begun once a code cell is queued or running, or (a very quick notebook) has run.
    page.wait_for_function(
        f"() => window.jupyterapp.shell.currentWidget.content.widgets.some("
        f"(c) => c.promptNode && c.promptNode.textContent.includes('*'))"
        f" || JSON.stringify(({counts})()) !== window.__courseCountsBefore",
        timeout=30_000,
    )
    wait_for_run(page, relpath, timeout_s)
    seconds = time.monotonic() - started
    state = notebook_state(page, full=True)
    cells = [
        CellRun(
            index=c["index"],
            type=c["type"],
            source=c.get("source", ""),
            tags=c.get("tags", []),
            execution_count=c["execution_count"],
            outputs=c.get("outputs", []),
        )
        for c in state["cells"]
    ]
    return NotebookRun(path=relpath, seconds=seconds, cells=cells, page_errors=page_errors)


def current_panel(page) -> str:
    """A CSS selector for the notebook panel in front (other tabs may hold cells with the same index)."""
    panel_id = page.evaluate("() => window.jupyterapp.shell.currentWidget.id")
    return f'[id="{panel_id}"]'


def cell_locator(page, index: int):
    """The DOM node of cell `index`, scrolled into view (JupyterLab may skip rendering off-screen cells)."""
    page.evaluate("(i) => window.jupyterapp.shell.currentWidget.content.scrollToItem(i, 'auto', 0, 'start')", index)
    page.mouse.move(1, 1)  # no hover highlight in the screenshots
    locator = page.locator(f'{current_panel(page)} [data-course-cell="{index}"]')
    locator.scroll_into_view_if_needed()
    return locator


# Reads what plotly actually drew inside a graph div (the <div class="js-plotly-plot"> it renders into).
PLOTLY_DRAWN_JS = """
(gd) => {
  const layout = gd.layout || {};
  const full = gd._fullLayout || {};
  const meta = layout.meta || {};
  return {
    lanes: meta.lanes || null,
    drawn_events: meta.drawn_events === undefined ? null : meta.drawn_events,
    webgl: !!meta.webgl,
    ticktext: (layout.yaxis && layout.yaxis.ticktext) || null,
    tick_labels: Array.from(gd.querySelectorAll('.yaxislayer-above .ytick text, .yaxislayer-below .ytick text'))
                   .map((t) => t.textContent),
    svg: gd.querySelectorAll('svg.main-svg').length,
    bars: gd.querySelectorAll('.barlayer .point').length,
    gl_canvases: gd.querySelectorAll('canvas').length,
    width: gd.getBoundingClientRect().width,
    height: gd.getBoundingClientRect().height,
    title: (full.title && full.title.text) || '',
  };
}
"""
