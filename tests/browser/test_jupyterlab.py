"""The course in JupyterLab, in a real browser, as a learner sees it (issue 7).

For each lesson below: open it in JupyterLab (this environment, loopback, token), *Run > Run All
Cells* through the menu, then check the page, not only the kernel:

- no cell produced an error (cells tagged ``raises-exception`` excepted) and every cell ran;
- every HTML table of the outputs is on the page; in lesson 00, the table of ``Trace.ops()``;
- every plotly figure is drawn (SVG present), and each timeline shows one y-axis label per lane
  its figure declares (``layout.meta["lanes"]``) and one bar per event it drew;
- the exercise checker's feedback boxes are shown, all "right" in the full lesson and all
  "not answered yet" in the learner copy;
- no request left the machine (plotly.js and everything else come from the local server).

Screenshots of the page, the tables, the timelines and the feedback go to test-output/browser/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import labdriver
import nbformat
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"

# The lessons run in the browser, and what each must show besides rendered tables, timelines and
# exercise feedback: 00 (first profile: the ops() table; the H200 reference timeline with its GPU
# lane) and 03 (the GeGLU MLP: the H200 timeline).
LESSONS = {
    "00": {"ops_table": True, "gpu_lane": True},
    "03": {"ops_table": False, "gpu_lane": True},
}
# Bound on one Run All (seconds); a lesson on a 2-core CPU takes well under it.
RUN_TIMEOUT = float(os.environ.get("COURSE_BROWSER_RUN_TIMEOUT", "480"))
# Columns that identify a table of Trace.ops() (see helpers.trace.Trace.ops).
OPS_COLUMNS = {"name", "calls", "self_cpu_us", "cpu_total_us"}
LANE_NAME = re.compile(r"^(CPU \S+/\S+|GPU \S+ stream \S+)$")
RIGHT, MISSING = "right", "not answered yet"


def course_notebook(number: str) -> Path:
    return labdriver.find_lesson(number, NOTEBOOKS)


# What each cell of the notebook in front shows: tables (headers, rows) and feedback boxes.
_DOM_JS = """
() => Array.from(window.jupyterapp.shell.currentWidget.node.querySelectorAll('[data-course-cell]')).map((node) => ({
  index: Number(node.getAttribute('data-course-cell')),
  tables: Array.from(node.querySelectorAll('.jp-OutputArea-output table')).map((t) => ({
    headers: Array.from(t.querySelectorAll('thead th')).map((th) => th.textContent.trim()),
    rows: t.querySelectorAll('tbody tr').length,
  })),
  feedback: Array.from(node.querySelectorAll('.course-feedback')).map((f) => f.getAttribute('data-status')),
}))
"""


def _write_report(path: Path, run: labdriver.NotebookRun, blocked: list[str], extra: dict) -> None:
    """A small JSON next to the screenshots: timing, stderr shown to the learner, what was checked."""
    report = {
        "notebook": run.path,
        "run_all_seconds": round(run.seconds, 1),
        "code_cells": len(run.code_cells),
        "not_run": [c.index for c in run.not_run],
        "errors": run.unexpected_errors(),
        "page_errors": run.page_errors,
        "blocked_requests": blocked,
        "stderr_shown": {c.index: c.stderr for c in run.code_cells if c.stderr},
        **extra,
    }
    path.write_text(json.dumps(report, indent=2, default=str))


def run_in_lab(lab, browser, notebook: Path, output_dir: Path, label: str, timeout: float = RUN_TIMEOUT):
    """Copy `notebook` into the server's folder, Run All in a new page; returns (page, run, dom).

    ``run.blocked`` lists the requests off the machine that this page attempted.
    """
    shutil.copy(notebook, lab.root / notebook.name)
    first_blocked = len(browser.blocked)
    page = browser.new_page()
    try:
        run = labdriver.run_notebook(page, lab, notebook.name, timeout)
    except Exception:
        page.screenshot(path=str(output_dir / f"{label}__FAILED.png"))
        page.close()
        raise
    run.blocked = browser.blocked[first_blocked:]
    labdriver.cell_locator(page, 0)  # back to the top for the overview screenshot
    page.screenshot(path=str(output_dir / f"{label}.png"))
    dom = {cell["index"]: cell for cell in page.evaluate(_DOM_JS)}
    return page, run, dom


def assert_ran_cleanly(run: labdriver.NotebookRun) -> None:
    errors = run.unexpected_errors()
    assert not errors, f"{run.path}: error output in JupyterLab:\n\n" + "\n\n".join(errors)
    assert not run.not_run, f"{run.path}: Run All stopped before cells {[c.where() for c in run.not_run]}"
    assert not run.page_errors, f"{run.path}: JavaScript errors in the page: {run.page_errors}"
    assert not run.blocked, f"{run.path}: the page tried to reach the network: {run.blocked}"


def check_tables(run, dom) -> int:
    """Every HTML table in the outputs (DataFrames, feedback summaries) is on the page; returns how many."""
    total = 0
    for cell in run.code_cells:
        expected = sum(o["html_tables"] for o in cell.outputs)
        shown = len(dom[cell.index]["tables"])
        assert shown == expected, (
            f"{run.path} {cell.where()}: {expected} HTML table(s) in the outputs, {shown} on the page"
        )
        total += expected
    return total


def check_ops_table(page, run, dom, output_dir: Path, label: str) -> int:
    """At least one table with the columns of Trace.ops(), with rows, rendered as HTML; returns its cell."""
    cells = [
        i for i, cell in dom.items() if any(OPS_COLUMNS <= set(t["headers"]) and t["rows"] > 0 for t in cell["tables"])
    ]
    assert cells, (
        f"{run.path}: no HTML table with the columns of Trace.ops() {sorted(OPS_COLUMNS)} "
        f"on the page; tables seen: {[t['headers'] for c in dom.values() for t in c['tables']]}"
    )
    first = labdriver.cell_locator(page, cells[0])
    table = first.locator(".jp-OutputArea-output table").first
    table.wait_for(state="visible")
    first.screenshot(path=str(output_dir / f"{label}__ops_table.png"))
    return cells[0]


def check_figures(page, run, dom, output_dir: Path, label: str) -> list[dict]:
    """Every plotly output drawn; every timeline with all its lanes labelled and all its bars drawn."""
    drawn = []
    for cell in run.code_cells:
        expected = sum(labdriver.PLOTLY_MIME in o["mimes"] for o in cell.outputs)
        if not expected:
            continue
        # JupyterLab draws a figure once its cell is on screen: scroll there, as a learner does.
        node = labdriver.cell_locator(page, cell.index)
        graphs = node.locator(".js-plotly-plot")
        try:
            graphs.nth(expected - 1).wait_for(state="attached", timeout=30_000)
        except Exception:
            node.screenshot(path=str(output_dir / f"{label}__FAILED_figure_cell{cell.index}.png"))
        assert graphs.count() == expected, (
            f"{run.path} {cell.where()}: {expected} plotly figure(s) in the outputs, {graphs.count()} drawn "
            "on the page within 30 s"
        )
        for k in range(expected):
            graph = graphs.nth(k)
            graph.locator("svg.main-svg").first.wait_for(state="attached", timeout=30_000)
            info = graph.evaluate(labdriver.PLOTLY_DRAWN_JS)
            info["cell"] = cell.index
            where = f"{run.path} {cell.where()} figure {k}"
            assert info["svg"] >= 1 and info["width"] > 100 and info["height"] > 100, f"{where}: not drawn: {info}"
            if info["lanes"] is not None:  # a helpers timeline
                lanes = info["lanes"]
                assert lanes, f"{where}: the timeline declares no lanes"
                assert info["ticktext"] == lanes, f"{where}: y-axis ticktext {info['ticktext']} != lanes {lanes}"
                assert info["tick_labels"] == lanes, (
                    f"{where}: the page labels lanes {info['tick_labels']}, the figure has {lanes}"
                )
                bad = [lane for lane in lanes if not LANE_NAME.match(lane)]
                assert not bad, f"{where}: lane names not of the form 'CPU pid/tid' or 'GPU d stream s': {bad}"
                if info["webgl"]:
                    assert info["gl_canvases"] >= 1, f"{where}: a WebGL timeline without a canvas: {info}"
                else:
                    assert info["bars"] == info["drawn_events"] > 0, (
                        f"{where}: {info['bars']} bars on the page for {info['drawn_events']} drawn events"
                    )
                node.screenshot(path=str(output_dir / f"{label}__timeline_cell{cell.index}.png"))
            drawn.append(info)
    return drawn


def feedback_statuses(dom) -> list[tuple[int, str]]:
    return [(i, status) for i, cell in sorted(dom.items()) for status in cell["feedback"]]


@pytest.mark.parametrize("number", sorted(LESSONS))
def test_lesson_in_jupyterlab(number, lab, browser, output_dir):
    expect = LESSONS[number]
    notebook = course_notebook(number)
    label = notebook.stem
    page, run, dom = run_in_lab(lab, browser, notebook, output_dir, label)
    try:
        extra: dict = {}
        try:
            assert_ran_cleanly(run)
            extra["html_tables"] = check_tables(run, dom)
            if expect["ops_table"]:
                extra["ops_table_cell"] = check_ops_table(page, run, dom, output_dir, label)
            figures = check_figures(page, run, dom, output_dir, label)
            extra["figures"] = figures
            timelines = [f for f in figures if f["lanes"] is not None]
            assert timelines, f"{run.path}: no timeline (a figure with layout.meta['lanes']) on the page"
            if expect["gpu_lane"]:
                # A reference trace recorded on the H200 draws its GPU stream next to the CPU thread.
                assert any(lane.startswith("GPU") for f in timelines for lane in f["lanes"]), (
                    f"{run.path}: no timeline shows a GPU stream lane: {[f['lanes'] for f in timelines]}"
                )

            statuses = feedback_statuses(dom)
            extra["feedback"] = statuses
            assert statuses, f"{run.path}: no exercise feedback (div.course-feedback) on the page"
            wrong = [(i, s) for i, s in statuses if s != RIGHT]
            assert not wrong, f"{run.path}: the full lesson's exercises should all be right: {wrong}"
            labdriver.cell_locator(page, statuses[0][0]).screenshot(path=str(output_dir / f"{label}__feedback.png"))
        except AssertionError as failure:
            extra["failure"] = str(failure)
            raise
        finally:
            _write_report(output_dir / f"{label}.json", run, run.blocked, extra)
    finally:
        page.close()
        lab.shutdown_kernels()


def test_learner_copy_in_jupyterlab(lab, browser, output_dir, tmp_path):
    """The learner copy of lesson 00 (what `make lab` opens on a Space): runs, and asks for answers."""
    from make_learner_copies import learner_notebook

    source = course_notebook("00")
    copy = tmp_path / f"learner_{source.name}"
    nbformat.write(learner_notebook(nbformat.read(source, as_version=4), source.name), copy)
    label = copy.stem
    page, run, dom = run_in_lab(lab, browser, copy, output_dir, label)
    try:
        extra: dict = {}
        try:
            assert_ran_cleanly(run)
            extra["html_tables"] = check_tables(run, dom)
            statuses = feedback_statuses(dom)
            extra["feedback"] = statuses
            assert statuses, f"{run.path}: no exercise feedback on the page"
            assert {s for _, s in statuses} == {MISSING}, (
                f"{run.path}: a learner copy must ask for every answer ('{MISSING}'), got {statuses}"
            )
            labdriver.cell_locator(page, statuses[0][0]).screenshot(path=str(output_dir / f"{label}__feedback.png"))
        except AssertionError as failure:
            extra["failure"] = str(failure)
            raise
        finally:
            _write_report(output_dir / f"{label}.json", run, run.blocked, extra)
    finally:
        page.close()
        lab.shutdown_kernels()


def test_harness_reports_errors_stops_and_outside_requests(lab, browser, output_dir, tmp_path):
    """The checks above can fail: an error, the cells Run All then skips, a request off the machine."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    shown = nbformat.v4.new_code_cell("raise KeyError('shown on purpose')")
    shown.metadata["tags"] = ["raises-exception"]
    nb.cells = [
        nbformat.v4.new_code_cell("x = 1\nx"),
        shown,
        nbformat.v4.new_code_cell("raise ValueError('not on purpose')"),
        nbformat.v4.new_code_cell("y = 2"),
    ]
    path = tmp_path / "harness_check.ipynb"
    nbformat.write(nb, path)
    page, run, _ = run_in_lab(lab, browser, path, output_dir, "harness_check", timeout=120)
    try:
        # JupyterLab's Run All goes on after a cell tagged raises-exception and stops at the first
        # other error: the last cell never runs.
        assert [c.execution_count is not None for c in run.code_cells] == [True, True, True, False]
        assert [c.index for c in run.not_run] == [3]
        assert run.code_cells[1].errors[0]["ename"] == "KeyError"
        unexpected = run.unexpected_errors()
        assert len(unexpected) == 1 and "ValueError: not on purpose" in unexpected[0]
        with pytest.raises(AssertionError, match="ValueError: not on purpose"):
            assert_ran_cleanly(run)
        run.cells[2].outputs.clear()  # without the error, the skipped cell is what fails the check
        with pytest.raises(AssertionError, match="Run All stopped before cells"):
            assert_ran_cleanly(run)
        # A request off the machine is aborted and recorded.
        first = len(browser.blocked)
        page.evaluate("() => fetch('https://cdn.plot.ly/plotly-latest.min.js').then(() => 'loaded', () => 'failed')")
        assert browser.blocked[first:] == ["https://cdn.plot.ly/plotly-latest.min.js"]
        del browser.blocked[first:]
    finally:
        page.close()
        lab.shutdown_kernels()
