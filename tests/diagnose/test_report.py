"""`python -m helpers report`: one offline HTML page from a real trace; a clear error on a bad file."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support import data_file

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "helpers", *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )


def test_report_on_a_real_trace_is_one_self_contained_page(tmp_path):
    out = tmp_path / "report.html"
    done = _run("report", str(data_file("hta__critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz")),
                "-o", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "[report" in done.stderr and "wrote" in done.stderr  # progress lines
    page = out.read_text(encoding="utf-8")
    assert not re.search(r"<script[^>]+src=[\"']?(https?:)?//", page)  # nothing fetched from the network
    assert "Plotly" in page  # the library is inlined
    for section in ("Findings", "Critical path by kind", "Kernel breakdown", "Achieved TFLOP/s", "Timeline"):
        assert section in page
    assert "cudaMalloc" in page or "cudaFree" in page  # the allocator finding's evidence


def test_report_on_a_bad_file_says_why_and_fails(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text('{"traceEvents": [ {"ph": "X", ')
    done = _run("report", str(bad), "-o", str(tmp_path / "r.html"))
    assert done.returncode == 2
    assert "error: cannot report on" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "r.html").exists()
    missing = _run("report", str(tmp_path / "missing.json"))
    assert missing.returncode == 2 and "error" in missing.stderr


def test_usage():
    done = _run()
    assert done.returncode == 2 and "report" in done.stderr
