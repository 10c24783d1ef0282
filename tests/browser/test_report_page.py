"""`python -m helpers report` in a real browser: the page a workshop participant opens, with no server and no network.

Writes the report of a shipped H200 trace with the command line, opens the HTML file from disk in
Chromium with every request off the machine aborted, and checks that the findings table is there
and every plotly figure is drawn (a page that needed a CDN for plotly.js would show none).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import labdriver
import pytest

pytestmark = [pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "traces" / "h200_mlp_eager.json.gz"


def test_the_report_opens_offline_with_its_findings_and_figures(browser, output_dir, tmp_path):
    out = tmp_path / "report.html"
    done = subprocess.run(
        [sys.executable, "-m", "helpers", "report", str(TRACE), "-o", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    html = out.read_text(encoding="utf-8")
    expected = html.count('class="plotly-graph-div"')
    assert expected > 0, "the report holds no plotly figure"

    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto(out.as_uri(), wait_until="load")
        assert "finding" in page.content().lower(), "no findings table on the page"
        graphs = page.locator(".js-plotly-plot")  # the class plotly.js adds once it has drawn a graph
        graphs.nth(expected - 1).wait_for(state="attached", timeout=60_000)
        assert graphs.count() == expected, f"{graphs.count()} figures drawn of {expected}"
        for k in range(expected):
            info = graphs.nth(k).evaluate(labdriver.PLOTLY_DRAWN_JS)
            assert info["svg"] >= 1 and info["width"] > 100, f"figure {k} not drawn: {info}"
        page.screenshot(path=str(output_dir / "report__h200_mlp_eager.png"), full_page=False)
    finally:
        page.close()
    assert not errors, f"JavaScript errors on the report page: {errors}"
    assert not browser.blocked, f"the report asked the network for {browser.blocked}"
