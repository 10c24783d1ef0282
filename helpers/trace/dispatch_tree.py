"""A dispatch tree (``Trace.chain(op)``) drawn as a tree, in a notebook (HTML) and in a terminal."""

from __future__ import annotations

import html
from dataclasses import dataclass

import pandas as pd

from .kernel_names import decode_kernel
from .model import Trace, check_trace


@dataclass(frozen=True)
class ChainTree:
    """A dispatch tree drawn with connectors in a left-aligned monospace column, so it reads as a tree in a
    notebook and a terminal alike; ``frame`` is the table behind it."""

    title: str
    frame: pd.DataFrame

    @property
    def attrs(self) -> dict[str, str]:
        """What :func:`helpers.side_by_side` titles the panel with."""
        return {"trace": self.title}

    def __len__(self) -> int:
        return len(self.frame)

    def __repr__(self) -> str:
        width = max(len(t) for t in self.frame["tree"])
        lines = [self.title]
        lines += [
            f"{t:<{width}}  x{c:g}/call  {k}"
            for t, c, k in zip(self.frame["tree"], self.frame["per_call"], self.frame["kind"])
        ]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return (
            f'<div class="course-chain-tree"><div style="font-size:90%;color:#555">{html.escape(self.title)}</div>'
            f"{self.panel_html()}</div>"
        )

    def panel_html(self) -> str:
        """The tree alone, without its title (:func:`helpers.side_by_side` titles its panels itself)."""
        colors = {"op": "inherit"}
        rows = "".join(
            "<tr>"
            f'<td style="text-align:left;white-space:pre;font-family:monospace;padding:0 12px 0 0;'
            f'color:{colors.get(kind, "#1a7f37")}">{html.escape(tree)}</td>'
            f'<td style="text-align:right;font-family:monospace;padding:0 8px">{per_call:g}</td>'
            f'<td style="text-align:left;padding:0 8px">{html.escape(kind)}</td>'
            "</tr>"
            for tree, per_call, kind in zip(self.frame["tree"], self.frame["per_call"], self.frame["kind"])
        )
        head = (
            '<tr><th style="text-align:left">dispatch tree</th><th style="text-align:right">per call</th>'
            '<th style="text-align:left">kind</th></tr>'
        )
        return f'<table style="border-collapse:collapse">{head}{rows}</table>'


def chain_tree(trace: Trace, op: str, ops_only: bool = False) -> ChainTree:
    """``Trace.chain(op)`` drawn as a tree, kernels by their short decoded name; ``per_call`` counts each node
    per call of `op` (0.67 for a memset that two of three merged calls issue). ``ops_only`` leaves out the
    device events (a lesson that asks about them before it shows them)."""
    check_trace(trace)
    if not isinstance(ops_only, bool):
        raise TypeError(f"ops_only must be True or False, got {ops_only!r}")
    chain = trace.chain(op)
    if ops_only:
        chain = chain[chain["kind"] == "op"].reset_index(drop=True)  # device events are leaves: the tree stays whole
    calls = int(chain["calls_of_root"].iloc[0])
    names = [
        row["name"] if row["kind"] == "op" else decode_kernel(row["name"])["short_name"] for _, row in chain.iterrows()
    ]
    paths = list(chain["path"])
    depths = list(chain["depth"])
    # a node is the last child of its parent when no later row at the same depth shares its parent
    # before the tree climbs above that depth
    last: list[bool] = []
    for i, d in enumerate(depths):
        is_last = True
        for j in range(i + 1, len(depths)):
            if depths[j] < d:
                break
            if depths[j] == d:
                is_last = False
                break
        last.append(is_last)
    lines = []
    open_levels: list[bool] = []  # per depth: does the ancestor at that depth have later siblings?
    for name, d, is_last in zip(names, depths, last):
        del open_levels[max(d - 1, 0) :]
        if d == 0:
            lines.append(name)
            continue
        prefix = "".join("\u2502  " if more else "   " for more in open_levels[: d - 1])
        lines.append(prefix + ("\u2514\u2500 " if is_last else "\u251c\u2500 ") + name)
        open_levels.append(not is_last)
    frame = pd.DataFrame(
        {
            "tree": lines,
            "name": chain["name"],
            "kind": chain["kind"],
            "count": chain["count"],
            "per_call": (chain["count"] / calls).round(2),
            "depth": chain["depth"],
            "path": paths,
        }
    )
    what = ", operators only" if ops_only else ""
    return ChainTree(f"{trace.info.describe()}: {op}, merged over {calls} call{'' if calls == 1 else 's'}{what}", frame)
