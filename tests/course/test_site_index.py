"""helpers.site without a browser: which notebooks, which command, what the index links.

The rendered pages themselves are checked in Chromium by tests/browser/test_site.py.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import build_site as site
import nbformat
import pytest


def _notebook(path: Path, *cells) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    nbformat.write(nb, path)
    return path


def test_course_notebooks_are_the_numbered_lessons_only(tmp_path):
    for name in ("01_b.ipynb", "00_a.ipynb", "scratch.ipynb"):
        _notebook(tmp_path / name)
    (tmp_path / "learner").mkdir()
    _notebook(tmp_path / "learner" / "00_a.ipynb")
    assert [p.name for p in site.course_notebooks(tmp_path)] == ["00_a.ipynb", "01_b.ipynb"]


def test_notebook_title_is_the_first_heading(tmp_path):
    path = _notebook(
        tmp_path / "00_x.ipynb",
        nbformat.v4.new_code_cell("# a comment, not a title"),
        nbformat.v4.new_markdown_cell("Intro\n\n## 00 · Setup <and> trace\n# later"),
    )
    assert site.notebook_title(path) == "00 · Setup <and> trace"
    assert site.notebook_title(_notebook(tmp_path / "01_y.ipynb")) == "01_y"


def test_render_runs_nbconvert_with_plotly_embedded(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, env, check: calls.append((cmd, env)))
    page = site.render_notebook(tmp_path / "00_x.ipynb", tmp_path / "out", timeout=42)
    ((cmd, env),) = calls
    assert cmd[1:] == [
        "-m",
        "jupyter",
        "nbconvert",
        "--execute",
        "--to",
        "html",
        "--ExecutePreprocessor.timeout=42",
        "--output-dir",
        str((tmp_path / "out").resolve()),
        str((tmp_path / "00_x.ipynb").resolve()),
    ]
    # The kernel inherits the renderer: an HTML copy of every figure, plotly.js inlined (never "connected", a CDN).
    assert env["PLOTLY_RENDERER"] == "plotly_mimetype+notebook"
    assert page == (tmp_path / "out" / "00_x.html").resolve()


def test_index_links_every_page_in_order(tmp_path):
    pages = [(tmp_path / "00_a.html", "00 · A & <b>"), (tmp_path / "01_b.html", "01 · B")]
    index = site.write_index(pages, tmp_path)
    text = index.read_text()
    assert text.index('href="00_a.html"') < text.index('href="01_b.html"')
    assert "00 · A &amp; &lt;b&gt;" in text


def test_build_site_needs_notebooks(tmp_path, monkeypatch):
    monkeypatch.setattr(site, "course_notebooks", lambda: [])
    with pytest.raises(FileNotFoundError, match="no notebooks"):
        site.build_site(None, tmp_path)


def test_a_failing_notebook_is_reported_and_the_rest_indexed(tmp_path, monkeypatch):
    def render(path, out_dir, timeout):
        if "bad" in path.name:
            raise subprocess.CalledProcessError(1, ["nbconvert"])
        page = out_dir / f"{path.stem}.html"
        page.write_text("<html></html>")
        return page

    monkeypatch.setattr(site, "render_notebook", render)
    good, bad = _notebook(tmp_path / "00_good.ipynb"), _notebook(tmp_path / "01_bad.ipynb")
    with pytest.raises(site.SiteError, match="01_bad.ipynb"):
        site.build_site([good, bad], tmp_path)
    index = (tmp_path / "index.html").read_text()
    assert 'href="00_good.html"' in index and "01_bad" not in index
