"""The shape of the repository a maintainer relies on: layers that never import upward, no import
circles, small modules, notebooks that use only the lesson-facing names of ``helpers``."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import helpers
import helpers.paths

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "helpers"
# Level of each folder, lowest first; a module may import its own folder and lower levels, never a
# higher one. The subjects (mlp, attention) share a level; the decoder builds on both.
LEVELS = {
    "foundation": 0,
    "trace": 1,
    "measure": 2,
    "diagnose": 2,  # reads traces (and the foundation) only; the lessons build on it
    "__main__": 8,  # python -m helpers: command-line tools over the engine (report); nothing imports it
    "kernels": 3,
    "mlp": 4,
    "attention": 4,
    "decoder": 5,
    "distributed": 6,
    "lessons": 7,
}
FOUNDATION = {
    "helpers",
    "helpers.paths",
    "helpers.checks",
    "helpers.triton_env",
    "helpers.course_kernel_names",
    "helpers.programs",
}
MAX_LINES = 400


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> str:
    if module in FOUNDATION:
        return "foundation"
    layer = module.split(".")[1]
    assert layer in LEVELS, f"{module}: helpers/{layer}/ is not a known layer; add it to LEVELS (and the README map)"
    return layer


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(path: Path, module: str) -> set[str]:
    """Every helpers module `path` imports, at the top or inside a function (lazy imports count); imports made
    only for type checkers (``if TYPE_CHECKING:``) run never, so they make no circle."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    type_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        for inner in ast.walk(node)
    }
    found = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("helpers")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("helpers"):
                submodules = {f"{target}.{a.name}" for a in node.names} & set(_modules())
                found |= submodules or {target}  # `from . import files` imports the module files
    modules = _modules()
    return {m for m in found if m in modules and m != module}


def _graph() -> dict[str, set[str]]:
    return {name: _imports(path, name) for name, path in _modules().items()}


def test_layers_never_import_upward():
    upward = []
    for module, deps in _graph().items():
        if module == "helpers":
            continue  # the lesson-facing API loads names from every layer, lazily
        for dep in deps:
            lower_or_own = _layer(dep) == _layer(module) or LEVELS[_layer(dep)] < LEVELS[_layer(module)]
            if dep != "helpers" and not lower_or_own:
                upward.append(f"{module} ({_layer(module)}) imports {dep} ({_layer(dep)})")
            if dep == "helpers":
                upward.append(f"{module} imports the top-level helpers package (import the module itself)")
    assert not upward, "\n".join(upward)


def test_no_import_circles():
    graph = {m: d - {"helpers"} for m, d in _graph().items() if m != "helpers"}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                cycle = stack[stack.index(d) :] + [d]
                pytest.fail("import circle: " + " -> ".join(cycle))
            if d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_the_trace_layer_imports_no_torch():
    offenders = []
    for name, path in _modules().items():
        if _layer(name) == "trace":
            text = path.read_text(encoding="utf-8")
            if re.search(r"^\s*(import torch|from torch)", text, re.M):
                offenders.append(name)
    assert not offenders, f"reading a trace must not need torch: {offenders}"
    code = (
        "import sys, helpers, helpers.trace.work\n"
        "t = helpers.load_trace(helpers.reference_trace_path('h200_mlp_eager'))\n"
        "helpers.trace.work.kernel_breakdown(t); helpers.decode_kernel('triton_poi_fused__unsafe_view_gelu_mul_0'); t.timeline()\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=120)


def test_modules_stay_small():
    big = {name: n for name, path in _modules().items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines usually do two jobs: {big}"


def test_every_exported_name_resolves():
    for name in helpers.__all__:
        assert getattr(helpers, name) is not None, name


def _notebook_code(path: Path) -> str:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")


NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_use_only_the_top_level_names(notebook):
    code = _notebook_code(notebook)
    deep = re.findall(r"^\s*(?:from|import) (helpers\.[\w.]+)", code, re.M)
    assert not deep, f"{notebook.name} imports helpers submodules {deep}: use the names helpers exports"
    used = set(re.findall(r"(?<![\w.])helpers\.([A-Za-z_]\w*)", code))
    for match in re.findall(r"^\s*from helpers import (\([^)]*\)|[^\n]+)", code, re.M):
        used |= {n.strip() for n in match.strip("()").replace("\n", ",").split(",") if n.strip()}
    unknown = used - set(helpers.__all__)
    assert not unknown, f"{notebook.name} uses names helpers does not export: {sorted(unknown)}"


def test_lesson_helpers_say_which_notebook_uses_them():
    missing = []
    for name in helpers.__all__:
        module, _ = helpers._EXPORTS[name]
        if not module.startswith("lessons.") or re.fullmatch(r"lessons\.nb\d\d", module):
            continue  # a lesson's own namespace says which lesson it is in its name
        value = getattr(helpers, name)
        doc = (getattr(value, "__doc__", None) or "").strip()
        if not re.match(r"Used by notebooks? \d\d", doc):
            missing.append(name)
    assert not missing, f'lesson helpers whose docstring does not start "Used by notebook NN": {missing}'


def test_test_files_have_unique_names():
    """pytest imports test files by their base name (rootdir mode): two test_model.py shadow each other."""
    names = [p.name for p in (ROOT / "tests").rglob("test_*.py")]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})


ENGINE = {"trace", "measure"}


def test_helpers_never_imports_the_harness():
    """benchmarks/ produces and judges recorded numbers; helpers reads what it stored, never its code."""
    offenders = []
    for name, path in _modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            if any(n == "benchmarks" or n.startswith("benchmarks.") for n in names):
                offenders.append(f"{name} (line {node.lineno})")
    assert not offenders, f"helpers imports benchmarks in {offenders}"


def test_the_engine_knows_no_lesson_model_kernel_or_repository():
    """trace and measure read and measure any profile: they import nothing of the course's own."""
    offenders = []
    for module, deps in _graph().items():
        if module in FOUNDATION or _layer(module) not in ENGINE:
            continue
        for dep in deps:
            if dep in {"helpers.paths", "helpers.course_kernel_names", "helpers.programs"} or (
                dep not in FOUNDATION and _layer(dep) not in ENGINE
            ):
                offenders.append(f"{module} imports {dep}")
    assert not offenders, "\n".join(offenders)


def _definition_name(value: object) -> str | None:
    if isinstance(value, type(helpers)):
        return value.__name__.rsplit(".", 1)[-1]
    return getattr(value, "__name__", None)


def test_exports_are_few_named_as_defined_and_used_by_notebooks():
    """Each top-level name is its definition's name and is used by two or more notebooks; what one lesson
    alone uses lives in that lesson's namespace (helpers.nbNN)."""
    assert len(helpers.__all__) <= 90, f"{len(helpers.__all__)} top-level names (at most 90)"
    code = {p.name[:2]: _notebook_code(p) for p in NOTEBOOKS}
    renamed, unused = [], []
    for name in helpers.__all__:
        module, attr = helpers._EXPORTS[name]
        if attr and attr != name:
            renamed.append(f"{name} -> {module}.{attr}")
        users = [
            nb
            for nb, src in code.items()
            if re.search(rf"(?<![\w.])helpers\.{name}\b|from helpers import [^\n]*\b{name}\b", src)
        ]
        own_lesson = re.fullmatch(r"nb(\d\d)", name)
        if (own_lesson and own_lesson.group(1) not in users) or (not own_lesson and len(users) < 2):
            unused.append(f"{name} (used by {users or 'no notebook'})")
    assert not renamed, f"exported under another name than their definition's: {renamed}"
    assert not unused, f"top-level names not used by two or more notebooks: {unused}"


def test_lessons_00_to_04_plain_workloads_import_no_triton():
    """The eager lessons never load Triton (nor its interpreter patch): only a course kernel, asked for, does."""
    import subprocess
    import sys

    code = (
        "import sys, helpers\n"
        "w = helpers.workloads\n"
        "for build in (w.linear_layer, w.matmul_then_add, w.views_and_copies, w.transpose_copies, w.geglu_mlp):\n"
        "    built = build('cpu')\n"
        "    built.fn(*built.inputs)\n"
        "assert 'triton' not in sys.modules, 'triton was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=120)


def test_raw_profiler_cells_print_no_kineto_notices():
    """A lesson's own torch.profiler cells stay quiet once helpers is imported (no USDT start/stop lines)."""
    import subprocess
    import sys

    code = (
        "import os, torch, helpers\n"
        "from torch.profiler import profile\n"
        "with profile() as p:\n"
        "    torch.ones(10) + 1\n"
        "import warnings; warnings.warn('a real warning')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert "USDT" not in done.stderr and "profiler_start" not in done.stderr, done.stderr
    assert "a real warning" in done.stderr  # Python's warnings still show
