"""Static checks of the course's Triton kernels that the CPU interpreter cannot make.

Compiled Triton (the GPU path) refuses a kernel that reads a module-level global unless the global
is a ``tl.constexpr``; Triton's interpreter, which CI runs, accepts it. Found on the H200 on
2026-12-01: every flash-attention configuration failed to compile because of a plain float global.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

KERNELS = Path(__file__).resolve().parents[2] / "helpers" / "kernels"
KERNEL_FILES = sorted(KERNELS.rglob("*.py"))


def _is_jit(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Attribute) and target.attr == "jit"


def _constexpr_globals(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(globals assigned a tl.constexpr, every other plain global) of a module."""
    constexpr, plain = set(), set()
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            annotation = ast.unparse(node.annotation)
            (constexpr if annotation.endswith("constexpr") else plain).add(node.target.id)
        elif isinstance(node, ast.Assign):
            is_constexpr = isinstance(node.value, ast.Call) and ast.unparse(node.value.func).endswith("constexpr")
            for target in node.targets:
                if isinstance(target, ast.Name):
                    (constexpr if is_constexpr else plain).add(target.id)
    return constexpr, plain


def test_the_kernel_folder_is_found():
    assert KERNEL_FILES, f"no kernel modules under {KERNELS}: the tests below would check nothing"


@pytest.mark.parametrize("path", KERNEL_FILES, ids=lambda p: p.name)
def test_kernels_read_only_constexpr_globals(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    _, plain = _constexpr_globals(tree)
    offenders = []
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef) and any(_is_jit(d) for d in fn.decorator_list):
            local = {a.arg for a in fn.args.args} | {
                n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            }
            for node in ast.walk(fn):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in plain - local:
                    offenders.append(f"{fn.name} reads {node.id} (line {node.lineno})")
    assert not offenders, f"{path.name}: make these tl.constexpr: {offenders}"
