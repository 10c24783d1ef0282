"""The rendered course (`make site`) in a real browser: timelines drawn, offline (issue 7).

Renders lessons with :func:`helpers.site.build_site` (the code `make site` runs: ``jupyter
nbconvert --execute --to html`` per notebook, plus an index), opens the index from disk in
Chromium with every request off the machine aborted, follows each link and checks that every
plotly figure of the page is drawn and every timeline labels all its lanes. A page that needed a
CDN for plotly.js would show no figure here.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import build_site as site
import labdriver
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
# Lesson 00 has both kinds of timeline (a live CPU profile and the H200 reference trace); the
# JupyterLab test covers 03 too. Rendering re-executes the lesson, so one keeps this test short.
SITE_LESSONS = ("00",)
# One per figure in plotly's HTML output: <div class="plotly-graph-div" id="..." ...></div>
FIGURE_DIV = re.compile(r'<div class="plotly-graph-div" id="[^"]+"')


def test_site_renders_timelines_offline(browser, output_dir, tmp_path):
    notebooks = [labdriver.find_lesson(n, NOTEBOOKS) for n in SITE_LESSONS]
    out = tmp_path / "site"
    index = site.build_site(notebooks, out, timeout=300)

    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto(index.as_uri(), wait_until="load")
        links = page.locator("ol li a")
        assert links.count() == len(notebooks), f"index lists {links.count()} pages for {len(notebooks)} notebooks"
        hrefs = [links.nth(i).get_attribute("href") for i in range(links.count())]
        assert hrefs == [f"{nb.stem}.html" for nb in notebooks]
        page.screenshot(path=str(output_dir / "site__index.png"))

        for href in hrefs:
            html_file = out / href
            expected = len(FIGURE_DIV.findall(html_file.read_text(encoding="utf-8")))
            assert expected > 0, f"{href}: the export holds no plotly figure (was PLOTLY_RENDERER ignored?)"
            page.goto((out / href).as_uri(), wait_until="load")
            graphs = page.locator(".js-plotly-plot")  # the class plotly.js adds once it has drawn a graph
            graphs.nth(expected - 1).wait_for(state="attached", timeout=60_000)
            assert graphs.count() == expected, f"{href}: {graphs.count()} figures drawn of {expected}"
            timelines = 0
            for k in range(expected):
                info = graphs.nth(k).evaluate(labdriver.PLOTLY_DRAWN_JS)
                assert info["svg"] >= 1 and info["width"] > 100, f"{href} figure {k}: not drawn: {info}"
                if info["lanes"] is None:
                    continue
                timelines += 1
                assert info["tick_labels"] == info["lanes"], (
                    f"{href} figure {k}: lanes labelled {info['tick_labels']}, figure has {info['lanes']}"
                )
                if not info["webgl"]:
                    assert info["bars"] == info["drawn_events"] > 0, f"{href} figure {k}: {info}"
                graphs.nth(k).screenshot(path=str(output_dir / f"site__{Path(href).stem}__figure{k}.png"))
            assert timelines, f"{href}: no timeline among its {expected} figures"
        assert not errors, f"JavaScript errors in the rendered pages: {errors}"
        # nbconvert's page template asks CDNs for require.js and MathJax (harmless when offline);
        # plotly.js must never be among the blocked requests: it is embedded in the page.
        assert not [u for u in browser.blocked if "plot.ly" in u or "plotly" in u], browser.blocked
    finally:
        page.close()
        # Keep the rendered pages with the screenshots, for a look by hand.
        shutil.copytree(out, output_dir / "site", dirs_exist_ok=True)
