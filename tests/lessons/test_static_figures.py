"""Plotly figures carry a PNG beside their interactive view when a browser can draw it (pages without JavaScript)."""

from __future__ import annotations

import shutil

import plotly.graph_objects as go
import plotly.io as pio
import pytest

from helpers.lessons.display import static_figures


@pytest.fixture
def restore_renderer():
    before = pio.renderers.default
    yield
    pio.renderers.default = before


def test_outside_a_kernel_nothing_changes(restore_renderer, monkeypatch):
    monkeypatch.delenv("PLOTLY_RENDERER", raising=False)
    assert static_figures() == "plotly_mimetype"  # no Jupyter kernel here: no browser is started


def test_switched_off_by_the_environment(restore_renderer, monkeypatch):
    monkeypatch.setenv("COURSE_STATIC_FIGURES", "0")
    monkeypatch.setenv("PLOTLY_RENDERER", "plotly_mimetype+notebook")
    assert static_figures() == "plotly_mimetype+notebook"


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (make browser-deps) to draw PNGs")
def test_a_figure_gets_a_png_beside_its_interactive_view(restore_renderer, monkeypatch):
    pytest.importorskip("kaleido")
    monkeypatch.delenv("PLOTLY_RENDERER", raising=False)
    assert static_figures(enable=True) == "plotly_mimetype+png"
    bundle = go.Figure(go.Bar(x=[1, 2], y=[3, 4]))._repr_mimebundle_()
    assert "application/vnd.plotly.v1+json" in bundle and bundle["image/png"]


def test_a_lessons_first_cell_turns_it_on(monkeypatch):
    import helpers.lessons.display as display
    from helpers.lessons.exercises import Exercises

    calls = []
    monkeypatch.setattr(display, "static_figures", lambda: calls.append(1) or "plotly_mimetype")
    Exercises("00").reset()  # what `nbNN.reset()` in every lesson's first cell runs
    assert calls == [1]


def test_off_by_default_even_in_a_kernel(restore_renderer, monkeypatch):
    # JupyterLab shows one view per output and prefers the PNG: a learner would lose the interactive figure
    import helpers.lessons.display as display

    monkeypatch.delenv("PLOTLY_RENDERER", raising=False)
    monkeypatch.delenv("COURSE_STATIC_FIGURES", raising=False)
    monkeypatch.setattr(display, "_in_kernel", lambda: True)
    monkeypatch.setattr(display, "_can_draw_png", lambda: True)
    monkeypatch.setattr(display, "_start_png_server", lambda: True)
    assert static_figures() == "plotly_mimetype"
    monkeypatch.setenv("COURSE_STATIC_FIGURES", "1")
    assert static_figures() == "plotly_mimetype+png"
