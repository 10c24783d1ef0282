"""Rules for traces with no device work (a CPU-only run): there every operator runs inline on the
host, so the device rules see nothing. Each takes a :class:`~.findings.Context` and returns a list
of findings; on a trace with device work they return nothing (the device rules speak there)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from helpers.trace.aten_ops import aten_family
from helpers.trace.links import marked_ancestor

from .findings import Context, typical_by_key

OPTIMIZER_STEP = ("Optimizer.step#", "Optimizer.zero_grad#")
MIN_CHAIN = 3
MIN_SHARE = 0.01  # of the step: below it a chain finding is noise, not a fix


AUTOGRAD_NODE = "autograd::engine::evaluate_function:"


def _units(ctx: Context) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The host's units of work inside the steps (an op that computes with none around it, or in the backward its
    autograd node), their status (1 elementwise, 0 none of its own, -1 heavier), and each event's unit (-1: none)."""
    ev = ctx.ev
    names = ev["name"].to_numpy(dtype=object)
    parent = ev["parent"].to_numpy()
    host = ~ev["on_device"].to_numpy() & (ev["cat"] == "cpu_op").to_numpy()
    family = np.full(len(ev), "", dtype=object)
    family[host] = [aten_family(str(n)) for n in names[host]]
    comp = family != ""
    comp &= family != "unknown"  # autograd nodes, wrappers, views: not work of their own
    node = host & pd.Series(names, dtype=object).str.startswith(AUTOGRAD_NODE).to_numpy()
    unit_mark = comp | node
    root = marked_ancestor(parent, unit_mark, outermost=True)
    units = np.flatnonzero(unit_mark & (root == np.arange(len(ev))) & ctx.in_steps)
    # a unit is elementwise when it runs an elementwise operator and nothing heavier than a copy
    # (a Python scalar in ``x * 0.5`` becomes a tensor through a small copy first)
    members = np.flatnonzero(comp & (root >= 0))
    fam = family[members]
    frame = pd.DataFrame(
        {"unit": root[members], "light": np.isin(fam, ["elementwise", "copy"]), "ew": fam == "elementwise"}
    )
    per_unit = frame.groupby("unit").agg(light=("light", "all"), ew=("ew", "any"))
    # 1: elementwise; 0: computes nothing (an autograd node passing gradients on): fused away with
    # its neighbours, it neither starts nor breaks a chain; -1: heavier work, which ends a chain
    status = pd.Series(np.where(per_unit["light"] & per_unit["ew"], 1, -1), index=per_unit.index)
    elementwise = status.reindex(units, fill_value=0).to_numpy()
    return units, elementwise, root


def host_pointwise_chains(ctx: Context) -> list[dict]:
    """On a CPU-only trace: runs of 3 or more elementwise operators one after another on a thread,
    each a separate pass over memory and a separate dispatch, that one fused operator would do."""
    if len(ctx.work):
        return []
    ev = ctx.ev
    units, elementwise, root = _units(ctx)
    keep = ~ctx.under(ctx.host_rows(prefix=OPTIMIZER_STEP))[units]  # the optimizer rule speaks for those
    units, elementwise = units[keep], elementwise[keep]
    if not len(units):
        return []
    names = ev["name"].to_numpy(dtype=object)
    order = np.lexsort((ev["ts"].to_numpy()[units], ev["lane"].to_numpy(dtype=object)[units].astype(str)))
    rows, pointwise = units[order], elementwise[order]
    lanes = ev["lane"].to_numpy(dtype=object)[rows]
    chains, cur = [], []

    def close() -> None:
        while cur and pointwise[cur[-1]] == 0:
            cur.pop()
        if int((pointwise[cur] == 1).sum()) >= MIN_CHAIN:
            chains.append(rows[cur])

    for i in range(len(rows)):
        if pointwise[i] >= 0 and cur and lanes[cur[-1]] == lanes[i]:
            cur.append(i)
        else:
            close()
            cur = [i] if pointwise[i] == 1 else []
    close()
    if not chains:
        return []
    dur = ev["dur"].to_numpy()
    ts = ev["ts"].to_numpy() - ctx.t0
    savings, times, betweens = [], [], []
    member = np.full(len(ev), -1)
    for i, chain in enumerate(chains):
        member[chain] = i
    # the operators and everything they called, per chain (one pass over the events, not one per chain)
    owner = np.where(root >= 0, member[np.maximum(root, 0)], -1)
    under_of = pd.Series(np.arange(len(ev))[owner >= 0]).groupby(owner[owner >= 0]).agg(list)
    for i, chain in enumerate(chains):
        # the Python between the chain's operators goes with them
        between = ctx.path_time_in(ts[chain[:1]], ts[chain[-1:]] + dur[chain[-1:]], ("cpu gap",))
        # a fused operator still reads the chain's inputs and writes its output: it costs about one typical
        # member (the median: one member slowed by the machine must not shrink the bound)
        keep = np.median(dur[chain]) / max(dur[chain].sum(), 1e-9)
        savings.append((ctx.path_time(under_of.get(i, list(chain)), ("cpu",)) + between) * (1 - keep))
        times.append(float(dur[chain].sum()) / ctx.per_step)
        betweens.append(between)
    # each step runs the same chains: count each at its typical cost over the steps (the path's steps for what
    # is read off the path)
    keys = ctx.chain_keys(chains)
    walked = ctx.on_path_steps([chain[0] for chain in chains])
    saving = float(typical_by_key(keys, np.asarray(savings), walked).sum())
    inside = float(typical_by_key(keys, np.asarray(betweens), walked).sum())
    t = float(typical_by_key(keys, np.asarray(times)).sum()) + inside
    moved = sum(len(chain) for chain in chains)
    # the step's host time outside every operator (Python, freeing tensors and autograd nodes) grows with the
    # number of operators: the chains' operators take their share of it with them
    ops = (ev["cat"] == "cpu_op").to_numpy() & ctx.in_steps
    share = ctx.operators_under(np.concatenate(chains)) / max(int(ops.sum()), 1)
    p = ctx.path
    gaps = float(p.loc[p["kind"] == "cpu gap", "duration_us"].sum()) / max(ctx.path_steps, 1) - inside
    extra = max(gaps, 0.0) * share
    saving += extra * saving / max(t, 1e-9)
    t += extra
    if saving < MIN_SHARE * ctx.step_us:
        return []  # a few short chains (a residual add and its backward): nothing worth a fused operator
    all_rows = np.concatenate(chains)
    longest = max(chains, key=len)
    ops = " -> ".join(str(names[r]).removeprefix("aten::").removeprefix(AUTOGRAD_NODE).strip() for r in longest[:6])
    ops += " -> ..." if len(longest) > 6 else ""
    detail = (
        f"{len(chains) / ctx.per_step:,.0f} chains per step, the longest {len(longest)} operators ({ops}); "
        f"{moved / ctx.per_step:,.0f} elementwise operators per step, each a pass over memory and a dispatch"
    )
    return [
        ctx.finding(
            "host_pointwise_chains",
            "Chains of elementwise operators, one pass over memory and one dispatch each, could be one fused operator",
            all_rows,
            t,
            saving,
            "medium",
            "04",
            "Use the fused operator when one exists (F.gelu(approximate='tanh'), F.silu ...), or torch.compile the "
            "function (Inductor fuses pointwise chains into one loop)",
            detail,
        )
    ]


RULES = [host_pointwise_chains]
