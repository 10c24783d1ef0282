"""What a lesson shows about where it runs, and panels side by side. Every function returns something a
notebook displays; none prints.
"""

from __future__ import annotations

import datetime as _dt
import html
import os
import platform
import re
import shutil
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch

from ..measure.device import cpu_name, package_version
from ..paths import reference_trace_path
from ..trace.model import Trace, load_trace

GPU_PATH = "GPU: profiles run live on this GPU and are compared with the H200 reference traces"
CPU_PATH = (
    "CPU only: profiles run live on this CPU (smaller shapes, float32); GPU lessons read the "
    "reference traces recorded on an NVIDIA H200"
)


# where am I


def on_gpu() -> bool:
    """Used by notebooks 00-06: True when a CUDA GPU is usable here (the lessons then profile it live)."""
    return torch.cuda.is_available()


def lesson_path() -> str:
    """Used by notebooks 00-08 and 10 in their first cell: one sentence saying which path the lessons take here
    (GPU or CPU only). It also drops the two notices :data:`QUIET_NOTICES` names from the lesson's output."""
    drop_lesson_notices()
    return GPU_PATH if on_gpu() else CPU_PATH


# Notices that say nothing about a lesson's run. The profiler's: every profile of these lessons keeps one cycle
# (helpers.profile accumulates its steps; lesson 00's own schedule has repeat=1), and lesson 09, which teaches
# cycles, does not call lesson_path. tqdm's: its notebook progress bar needs ipywidgets, a plain one is used.
QUIET_NOTICES = (
    "Warning: Profiler clears events at the end of each cycle",
    "IProgress not found",
)


def drop_lesson_notices() -> None:
    """Ignore the warnings whose message starts with one of :data:`QUIET_NOTICES`; every other warning shows."""
    for message in QUIET_NOTICES:
        warnings.filterwarnings("ignore", message=re.escape(message))


def environment_report() -> pd.DataFrame:
    """Used by notebook 00: hardware and versions here, one row per item, and the path the lessons take."""
    rows: list[tuple[str, str]] = [
        ("date", _dt.date.today().isoformat()),
        ("python", platform.python_version()),
        ("platform", platform.platform(terse=True)),
        ("CPU", cpu_name()),
        ("torch CPU threads", str(torch.get_num_threads())),
        ("torch", torch.__version__),
        ("torch built with CUDA", str(torch.version.cuda or "no (CPU-only build)")),
        ("CUDA GPU available", str(torch.cuda.is_available())),
    ]
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            rows += [
                (f"GPU {i}", props.name),
                (f"GPU {i} memory", f"{props.total_memory / 2**30:.0f} GiB"),
                (f"GPU {i} compute capability", f"{props.major}.{props.minor}"),
                (f"GPU {i} multiprocessors", str(props.multi_processor_count)),
            ]
    rows += [
        ("triton", package_version("triton") or "not installed"),
        ("kernels", package_version("kernels") or "not installed"),
        ("pandas", package_version("pandas") or "not installed"),
        ("plotly", package_version("plotly") or "not installed"),
        ("lesson path", lesson_path()),
    ]
    return pd.DataFrame(rows, columns=["item", "value"])


# which trace is which


@dataclass(frozen=True)
class SideBySide:
    """Panels shown next to each other in a notebook, each under its own title."""

    panels: tuple[tuple[str, Any], ...]

    def _panel_html(self, obj: Any) -> str:
        if isinstance(obj, pd.DataFrame):
            styler = (
                obj.style.hide(axis="index")
                .format(precision=2, thousands=",")
                .set_properties(**{"text-align": "left", "white-space": "pre"})
                .set_table_styles([{"selector": "th", "props": [("text-align", "left")]}])
            )
            return styler.to_html()
        if hasattr(obj, "panel_html"):  # an object that draws itself without its own title (a chain tree)
            return obj.panel_html()
        if hasattr(obj, "_repr_html_"):
            out = obj._repr_html_()
            if out is not None:
                return out
        return f"<pre>{html.escape(str(obj))}</pre>"

    def _repr_html_(self) -> str:
        cells = "".join(
            '<div style="flex:1 1 0;min-width:320px;overflow-x:auto">'
            f'<div style="font-weight:bold;margin-bottom:4px">{html.escape(title)}</div>{self._panel_html(obj)}</div>'
            for title, obj in self.panels
        )
        return f'<div class="course-side-by-side" style="display:flex;gap:24px;align-items:flex-start">{cells}</div>'

    def __repr__(self) -> str:
        parts = []
        for title, obj in self.panels:
            body = obj.to_string(index=False) if isinstance(obj, pd.DataFrame) else str(obj)
            parts.append(f"== {title} ==\n{body}")
        return "\n\n".join(parts)


def side_by_side(*panels: Any, titles: Sequence[str] | None = None) -> SideBySide:
    """Used by notebooks 00-05: DataFrames (or anything with an HTML view) side by side, titled from ``(title, obj)``
    pairs or the trace each came from, so a live profile and a reference trace are never confused."""
    if not panels:
        raise ValueError("side_by_side needs at least one panel")
    if titles is not None:
        if isinstance(titles, str) or len(titles) != len(panels):
            raise ValueError(f"titles must be a list with one title per panel ({len(panels)}), got {titles!r}")
        pairs = list(zip(titles, panels))
    else:
        pairs = []
        for i, p in enumerate(panels):
            if isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str):
                pairs.append(p)
            elif isinstance(getattr(p, "attrs", None), dict) and "trace" in p.attrs:  # a table or tree of a trace
                pairs.append((str(p.attrs["trace"]), p))
            else:
                raise ValueError(f"panel {i} has no title: pass (title, obj) pairs or titles=[...]")
    for title, _ in pairs:
        if not isinstance(title, str):
            raise TypeError(f"titles must be strings, got {type(title).__name__}")
    return SideBySide(tuple(pairs))


# The course's Triton functions a lesson shows, by name -> the module that defines them.
_KERNEL_MODULES = (
    "helpers.kernels.geglu_pointwise",
    "helpers.kernels.gate_up_kernels",
    "helpers.kernels.flash_attention_kernels",
)


def kernel_source(name: str) -> str:
    """Used by notebooks 06 and 07: the source of one of the course's Triton functions, read from its file."""
    import importlib
    import inspect

    found = {}
    for module_name in _KERNEL_MODULES:
        module = importlib.import_module(module_name)
        for attr, value in vars(module).items():
            fn = getattr(value, "fn", None)  # @triton.jit wraps the Python function as .fn
            if callable(fn) and attr.startswith("_"):
                found[attr] = fn
    if name not in found:
        raise ValueError(f"no course kernel named {name!r}; available: {', '.join(sorted(found))}")
    return inspect.getsource(found[name])


def reference_trace(name: str, missing_ok: bool = False) -> Trace | None:
    """Used by notebooks 00-09: a shipped reference trace by name (``"h200_mlp_eager"``), labelled with its GPU,
    torch version and date; None when it is not recorded and ``missing_ok`` (else FileNotFoundError)."""
    try:
        return load_trace(reference_trace_path(name))
    except FileNotFoundError:
        if missing_ok:
            return None
        raise


def static_figures(enable: bool | None = None) -> str:
    """Give every plotly figure a PNG beside its interactive view when ``COURSE_STATIC_FIGURES=1``, for pages that
    run no JavaScript; off by default, since JupyterLab would show the PNG instead. Returns the renderer."""
    import plotly.io as pio

    base = os.environ.get("PLOTLY_RENDERER") or "plotly_mimetype"
    if enable is None:
        enable = os.environ.get("COURSE_STATIC_FIGURES") == "1" and _in_kernel() and _can_draw_png()
    if enable and not _start_png_server():
        enable = False
    pio.renderers.default = base + ("+png" if enable and "png" not in base else "")
    return pio.renderers.default


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def _can_draw_png() -> bool:
    try:
        import kaleido  # noqa: F401
    except ImportError:
        return False
    return any(shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome", "chrome")) or bool(
        os.environ.get("BROWSER_PATH")
    )


def _start_png_server() -> bool:
    """One browser for every figure of the kernel (a browser started per figure costs seconds each)."""
    import kaleido

    try:
        kaleido.start_sync_server(silence_warnings=True)
    except Exception:  # noqa: BLE001  (any failure to start a browser means: no PNG, the figure stays interactive)
        return False
    warnings.filterwarnings("ignore", message="The kopts argument is ignored if using a server")
    return True
