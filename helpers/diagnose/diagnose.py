"""`diagnose(trace)`: run every rule over one trace or a run of several ranks, rank the findings."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from helpers.trace.model import Trace, load_trace
from helpers.trace.ranks import load_traces

from . import rules_cpu, rules_gpu, rules_host, rules_ranks
from .findings import COLUMNS, Context, Findings

# below this share of the step a finding's saving is noise, not a fix
NO_COST = 0.001
# rules that name a cost outside the step (a recompile runs before it) and estimate no saving inside it
NO_SAVING_ESTIMATE = {"recompilation"}
RULES = [*rules_host.RULES, *rules_gpu.RULES, *rules_cpu.RULES, *rules_ranks.RULES]


def as_trace(trace_or_run: Trace | str | os.PathLike) -> Trace:
    """A Trace from a Trace, a trace file, or a folder of one trace per rank."""
    if isinstance(trace_or_run, Trace):
        return trace_or_run
    if isinstance(trace_or_run, (str, os.PathLike)):
        p = Path(trace_or_run)
        if p.is_dir():
            return load_traces(p)
        return load_trace(p)
    raise TypeError(
        f"diagnose needs a Trace (helpers.profile / helpers.load_trace), a run (helpers.load_traces), "
        f"or the path of a trace file or folder; got {type(trace_or_run).__name__}"
    )


def diagnose(trace_or_run: Trace | str | os.PathLike, rules: list | None = None) -> Findings:
    """Ranked findings for a trace, a run of several ranks, or a path to either: by the upper bound on the saving
    (per step), then bytes saved; a rule that cannot run here is named in ``attrs["skipped"]``."""
    return run_rules(as_trace(trace_or_run), rules)[0]


def run_rules(trace: Trace, rules: list | None = None) -> tuple[Findings, Context]:
    """:func:`diagnose` on a Trace, and the context it read (critical path, kernels) for reuse."""
    ctx = Context(trace)
    rows, skipped = [], {}
    for rule in rules or RULES:
        try:
            rows.extend(rule(ctx))
        except (ValueError, KeyError, IndexError, TypeError) as err:  # one odd trace must not hide the others
            skipped[rule.__name__] = f"{type(err).__name__}: {err}"
    table = pd.DataFrame(rows, columns=COLUMNS)
    # a pattern that costs this step nothing (off the critical path, no bytes) is no fix: say so, do not rank it
    idle = (table["saving_upper_bound_us"] <= NO_COST * ctx.step_us) & (table["saving_bytes"] <= 0)
    idle &= ~table["rule"].isin(NO_SAVING_ESTIMATE)
    if idle.any():
        for rule in table.loc[idle, "rule"]:
            ctx.notes.append(
                f"{rule}: found, but it costs under {NO_COST:.1%} of the step on the critical path (fixing it would "
                "not make the step faster), so it is not listed"
            )
        table = table[~idle]
    # time savings first; memory findings (no time saving) after them, largest bytes first
    table = table.sort_values(["saving_upper_bound_us", "saving_bytes", "time_us"], ascending=False, kind="stable")
    out = Findings(table.reset_index(drop=True))
    out.attrs.update(
        trace=trace.info.describe(),
        steps=ctx.n_steps,
        step_us=ctx.step_us if len(trace.events) else float("nan"),
        path_length_us=float(ctx.path["duration_us"].sum()),
        skipped=skipped,
        notes=list(ctx.notes),
    )
    return out, ctx
