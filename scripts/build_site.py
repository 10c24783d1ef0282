"""Render the course as a static site: every notebook executed and exported to HTML, plus an index.

    python scripts/build_site.py                       # what `make site` runs: notebooks/NN_*.ipynb -> site/
    python scripts/build_site.py --out /tmp/s notebooks/00_setup_and_first_trace.ipynb

Each notebook is run by ``jupyter nbconvert --execute --to html`` in its own folder. The result
opens in any browser without a server and without the network: plotly.js is embedded once per
page, never fetched from a CDN. That is what ``PLOTLY_RENDERER`` below is for: in a kernel,
plotly's default renderer is ``plotly_mimetype``, which JupyterLab draws with its bundled
plotly extension but an HTML export cannot draw at all. ``plotly_mimetype+notebook`` adds an HTML
version of every figure and puts the plotly.js library itself into the page the first time
(``notebook_connected`` would load it from a CDN instead).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import html
import json
import os
import subprocess
import sys
import time
from pathlib import Path

# The repository this script belongs to, before any installed copy of helpers.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers.paths import NOTEBOOKS_DIR, REPO_ROOT  # noqa: E402

PLOTLY_RENDERER = "plotly_mimetype+notebook"
DEFAULT_OUT = REPO_ROOT / "site"


def course_notebooks(folder: Path = NOTEBOOKS_DIR) -> list[Path]:
    """The lessons, ``NN_topic.ipynb``, in order (learner copies are not part of the site)."""
    return sorted(folder.glob("[0-9][0-9]_*.ipynb"))


def notebook_title(path: Path) -> str:
    """The first Markdown heading of a notebook, else its file name."""
    try:
        nb = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return Path(path).stem
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "markdown":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        for line in source.splitlines():
            if line.startswith("#"):
                return line.lstrip("#").strip()
    return Path(path).stem


def render_notebook(path: Path, out_dir: Path, timeout: int = 300) -> Path:
    """Execute `path` and export it to ``out_dir/<name>.html``; raise if a cell fails.

    `timeout` bounds each cell (seconds), as nbmake's timeout does in `make test`.
    """
    path = Path(path).resolve()
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PLOTLY_RENDERER=PLOTLY_RENDERER)
    cmd = [
        sys.executable,
        "-m",
        "jupyter",
        "nbconvert",
        "--execute",
        "--to",
        "html",
        f"--ExecutePreprocessor.timeout={timeout}",
        "--output-dir",
        str(out_dir),
        str(path),
    ]
    subprocess.run(cmd, env=env, check=True)
    return out_dir / f"{path.stem}.html"


def write_index(pages: list[tuple[Path, str]], out_dir: Path) -> Path:
    """An index.html linking every rendered page, with when and where it was rendered."""
    import platform

    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU ({platform.machine()})"
    items = "\n".join(
        f'    <li><a href="{html.escape(page.name)}">{html.escape(title)}</a></li>' for page, title in pages
    )
    stamp = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    index = Path(out_dir) / "index.html"
    index.write_text(
        f"""<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>Reading PyTorch profiles</title>
<style>body {{font-family: sans-serif; max-width: 46em; margin: 2em auto; line-height: 1.5}}</style></head>
<body>
  <h1>Reading PyTorch profiles: from <code>nn.Linear</code> to a fused MLP</h1>
  <p>Every lesson below was executed on {html.escape(device)} with torch {html.escape(torch.__version__)}
  on {stamp}. Timelines are interactive and work offline.</p>
  <ol>
{items}
  </ol>
</body>
</html>
""",
        encoding="utf-8",
    )
    return index


class SiteError(RuntimeError):
    """Some notebooks failed to execute; the others were rendered and indexed."""


def build_site(notebooks: list[Path] | None = None, out_dir: Path = DEFAULT_OUT, timeout: int = 300) -> Path:
    """Render `notebooks` (default: every lesson) into `out_dir` and write its index; returns the index.

    A notebook whose execution fails is reported and left out; the others are still rendered and
    indexed, then :class:`SiteError` names the failures.
    """
    notebooks = [Path(p) for p in notebooks] if notebooks else course_notebooks()
    if not notebooks:
        raise FileNotFoundError(f"no notebooks to render (looked for NN_*.ipynb in {NOTEBOOKS_DIR})")
    pages, failed = [], []
    for i, path in enumerate(notebooks, 1):
        started = time.monotonic()
        print(f"[{i}/{len(notebooks)}] executing and rendering {path.name} ...", flush=True)
        try:
            page = render_notebook(path, out_dir, timeout=timeout)
        except subprocess.CalledProcessError as err:
            print(f"    FAILED: {path.name} (nbconvert exited with {err.returncode}; its error is above)", flush=True)
            failed.append(path.name)
            continue
        print(f"    -> {page} ({time.monotonic() - started:.0f} s)", flush=True)
        pages.append((page, notebook_title(path)))
    index = write_index(pages, out_dir)
    if failed:
        raise SiteError(
            f"{len(failed)} notebook(s) failed to execute: {', '.join(failed)}; the {len(pages)} others are in {index}"
        )
    return index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebooks/NN_*.ipynb")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: site/)")
    parser.add_argument("--timeout", type=int, default=300, help="per-cell timeout in seconds")
    args = parser.parse_args(argv)
    try:
        index = build_site(args.notebooks, args.out, args.timeout)
    except SiteError as err:
        print(err, file=sys.stderr)
        return 1
    print(f"open {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
