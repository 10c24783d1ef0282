"""Probe: what makes notebook 10's bounds over-predict the unprofiled savings of its planted loop's fixes.

    python benchmarks/profiler_cost_probe.py [--runs 4] [--json out.json]   # bounds against measured savings
    python benchmarks/profiler_cost_probe.py --calibrate                   # the profiler's cost per operator
    python benchmarks/profiler_cost_probe.py --sessions 4                  # consecutive profiles in one process

Default mode, per run on one CPU thread: the planted loop and its pointwise-fixed and optimizer-fixed variants
are timed unprofiled in interleaved rounds, then each is profiled. Recorded: each variant's profiled step and
operators per step (the operators a fix removes, counted), the diagnosis's bounds on the planted trace, the
profiled saving, the per-operator cost that would reconcile it with the measured one, and trace-side estimates
of the profiler's per-operator cost (gaps between sibling operators, a wrapper's self time) to test whether
``bound - operators removed x cost`` predicts the measured saving. ``--calibrate`` measures that cost directly on
cheap operators. ``--sessions`` shows the first profiling session of a process: its allocating operators run on
freshly touched heap pages (minor page faults inside the steps), so its steps and the pointwise bound inflate.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TRIVIAL = ("aten::view", "aten::detach", "aten::empty", "aten::as_strided", "aten::alias", "aten::empty_strided",
           "aten::_reshape_alias", "aten::resolve_conj", "aten::resolve_neg", "detach")  # fmt: skip


def estimates(trace) -> dict:
    """Trace-side candidates for the profiler's per-operator cost (us)."""
    ev = trace.events
    host = (~ev["on_device"]).to_numpy() & (ev["cat"] == "cpu_op").to_numpy()
    names = ev["name"].to_numpy(dtype=object)
    dur = ev["dur"].to_numpy(dtype=float)
    ts = ev["ts"].to_numpy(dtype=float)
    parent = ev["parent"].to_numpy()
    lane = ev["lane"].to_numpy(dtype=object).astype(str)
    has_child = np.zeros(len(ev), dtype=bool)
    has_child[parent[parent >= 0]] = True
    leaf = host & ~has_child
    triv = leaf & np.isin(names, TRIVIAL)
    out = {}
    d = dur[triv]
    if len(d):
        out["trivial_leaf_min"] = float(d.min())
        out["trivial_leaf_p10"] = float(np.percentile(d, 10))
        out["trivial_leaf_median"] = float(np.median(d))
        out["trivial_leaf_n"] = int(len(d))
    dl = dur[leaf]
    out["leaf_min"] = float(dl.min())
    out["leaf_p10"] = float(np.percentile(dl, 10))
    # gaps between consecutive operators under the same parent on one thread: the exit of one and the entry
    # of the next, plus a little dispatch
    idx = np.flatnonzero(host & (parent >= 0))
    order = np.lexsort((ts[idx], parent[idx], lane[idx]))
    idx = idx[order]
    same = (parent[idx][1:] == parent[idx][:-1]) & (lane[idx][1:] == lane[idx][:-1])
    gaps = ts[idx][1:] - (ts[idx][:-1] + dur[idx][:-1])
    g = gaps[same & (gaps >= 0)]
    if len(g):
        out["sibling_gap_min"] = float(g.min())
        out["sibling_gap_p10"] = float(np.percentile(g, 10))
        out["sibling_gap_p25"] = float(np.percentile(g, 25))
        out["sibling_gap_median"] = float(np.median(g))
        out["sibling_gap_n"] = int(len(g))
    # the same gaps where the parent is an ATen operator: C++ between the two, no Python
    aten_parent = np.array([str(names[p]).startswith("aten::") for p in parent[idx][1:]])
    g2 = gaps[same & (gaps >= 0) & aten_parent]
    if len(g2):
        out["aten_sibling_gap_min"] = float(g2.min())
        out["aten_sibling_gap_p25"] = float(np.percentile(g2, 25))
        out["aten_sibling_gap_median"] = float(np.median(g2))
        out["aten_sibling_gap_n"] = int(len(g2))
    # from an ATen parent's start to its first child's start
    first = {}
    for r in np.flatnonzero(host & (parent >= 0)):
        p = parent[r]
        if str(names[p]).startswith("aten::") and (p not in first or ts[r] < ts[first[p]]):
            first[p] = r
    lead = np.array([ts[r] - ts[p] for p, r in first.items()])
    if len(lead):
        out["aten_first_child_lead_p25"] = float(np.percentile(lead, 25))
        out["aten_first_child_lead_median"] = float(np.median(lead))
    # a wrapper with exactly one child and nothing else to do: its self time is one nested op's entry and exit
    kids = np.bincount(parent[host & (parent >= 0)], minlength=len(ev))
    for wrap in ("aten::t", "aten::transpose", "aten::expand"):
        w = np.flatnonzero(host & (names == wrap) & (kids == 1))
        if len(w):
            child = {p: c for c, p in zip(np.flatnonzero(host & (parent >= 0)), parent[host & (parent >= 0)])}
            self_t = np.array([dur[r] - dur[child[r]] for r in w if r in child])
            out[f"self_{wrap}_median"] = float(np.median(self_t))
            out[f"self_{wrap}_p10"] = float(np.percentile(self_t, 10))
    return out


def pointwise_parts(trace) -> dict:
    """The pointwise rule's bound, term by term (the rule's own arithmetic, repeated to see its parts)."""
    from helpers.diagnose import rules_cpu
    from helpers.diagnose.findings import Context

    ctx = Context(trace)
    seen = {}
    real_path_time, real_in = ctx.path_time, ctx.path_time_in

    def path_time(rows, kinds=None):
        v = real_path_time(rows, kinds)
        seen.setdefault("path_time", []).append(v)
        return v

    def path_time_in(a, b, kinds):
        v = real_in(a, b, kinds)
        seen.setdefault("between", []).append(v)
        return v

    ctx.path_time, ctx.path_time_in = path_time, path_time_in
    f = rules_cpu.host_pointwise_chains(ctx)
    p = ctx.path
    kinds = (p.groupby("kind")["duration_us"].sum() / max(ctx.path_steps, 1)).to_dict()
    return {
        "bound": f[0]["saving_upper_bound_us"] if f else 0.0,
        "chains_path_sum": float(sum(seen.get("path_time", []))),
        "between_sum": float(sum(seen.get("between", []))),
        "path_by_kind": {k: float(v) for k, v in kinds.items()},
        "ops_in_steps": int(((trace.events["cat"] == "cpu_op").to_numpy() & ctx.in_steps).sum() / ctx.per_step),
    }


def calibrate(n: int = 2000, rounds: int = 9) -> dict:
    """The profiler's cost per operator, measured directly: `n` cheap operators (views and adds on a tiny tensor,
    nested one level under a linear's transpose) timed profiled and unprofiled, and the trace estimators beside it."""
    import time

    import torch

    import helpers

    x = torch.randn(4, 4)
    w = torch.randn(4, 4)

    def body():
        for _ in range(n // 4):
            x.view(-1)
            x.add(1.0)
            w.t()  # aten::t -> aten::transpose -> aten::as_strided: 3 operators

    def timed():
        t = time.perf_counter()
        body()
        return (time.perf_counter() - t) * 1e6

    body()
    unprof = []
    prof_steps = []
    ests = []
    for _ in range(rounds):
        unprof.append(timed())
        tr = helpers.profile(body, steps=2, warmup=1, label="calib")
        from helpers.lessons import nb10

        prof_steps.append(statistics.median(nb10.profiled_step_us(tr)))
        ops = nb10.operators_per_step(tr)
        ests.append(estimates(tr))
    u, p = statistics.median(unprof), statistics.median(prof_steps)
    keys = ests[0].keys()
    return {
        "ops_per_step": ops,
        "unprofiled_us": u,
        "profiled_us": p,
        "direct_us_per_op": (p - u) / ops,
        "estimators_median": {k: float(statistics.median(e[k] for e in ests if k in e)) for k in keys},
    }


def sessions(n: int = 4, steps: int = 5) -> list[dict]:
    """Consecutive profiles of the planted loop in this process: mean step, minor page faults inside the step
    calls, and the bounds: the first session runs the allocating operators on pages touched for the first time."""
    import resource

    import helpers
    from helpers.diagnose import diagnose
    from helpers.lessons import nb10
    from helpers.lessons.planted import build_loop, planted_problem

    loop = build_loop(device="cpu")
    faults = [0]

    def step() -> None:
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        loop.step()
        faults[0] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0

    nb10.step_rounds({"planted": step}, rounds=3, repeats=10)  # the loop's own first steps (optimizer state)
    out = []
    for i in range(n):
        faults[0] = 0
        trace = helpers.profile(step, steps=steps, warmup=2, grad=True, label="planted")
        found = diagnose(trace)
        bounds = {planted_problem(r): float(v) for r, v in zip(found["rule"], found["saving_upper_bound_us"])}
        out.append({"session": i, "mean_step_us": statistics.mean(nb10.profiled_step_us(trace)),
                    "minor_faults_per_step": faults[0] / (steps + 3), "bounds_us": bounds})  # fmt: skip
        print(json.dumps(out[-1], default=float), flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--calibrate", action="store_true", help="only the direct per-operator cost measurement")
    ap.add_argument("--sessions", type=int, default=0, help="only: this many consecutive profiles in one process")
    args = ap.parse_args(argv)

    import torch

    import helpers
    from helpers.diagnose import diagnose
    from helpers.lessons import nb10
    from helpers.lessons.planted import build_loop, planted_problem

    torch.set_num_threads(1)
    if args.sessions:
        print(json.dumps({"load": os.getloadavg()}))
        sessions(args.sessions, args.steps)
        return 0
    if args.calibrate:
        print(json.dumps({"load": os.getloadavg(), **calibrate()}, default=float), flush=True)
        return 0
    fixes = ("pointwise", "optimizer")
    loops = {"planted": build_loop(device="cpu"), **{p: build_loop({p}, device="cpu") for p in fixes}}
    runs = []
    for run in range(args.runs):
        load = os.getloadavg()
        rounds = nb10.step_rounds(loops, rounds=args.rounds, repeats=args.repeats)
        prof = {}
        for k, loop in loops.items():
            trace = helpers.profile(loop.step, steps=args.steps, warmup=2, grad=True, label=k)
            prof[k] = {
                "step_us": statistics.median(nb10.profiled_step_us(trace)),
                "ops": nb10.operators_per_step(trace),
                "est": estimates(trace),
            }
            if k == "planted":
                found = diagnose(trace)
                prof[k]["findings"] = found[
                    ["rule", "saving_upper_bound_us", "time_us", "ops_per_step", "events"]
                ].to_dict("records")
                prof[k]["step_us_path"] = float(found.attrs["step_us"])
                prof[k]["pointwise_parts"] = pointwise_parts(trace)
                bounds = {p: float(found.loc[found["rule"].map(planted_problem) == p, "saving_upper_bound_us"].sum()) for p in fixes}  # fmt: skip
                nops = {p: float(found.loc[found["rule"].map(planted_problem) == p, "ops_per_step"].sum()) for p in fixes}  # fmt: skip
        unprof = {k: statistics.median(v) for k, v in rounds.items()}
        res = {
            "load_before": load,
            "load_after": os.getloadavg(),
            "unprofiled_us": unprof,
            "profiled": prof,
            "fixes": {},
        }
        for p in fixes:
            diff = np.asarray(rounds["planted"]) - np.asarray(rounds[p])
            measured = float(np.median(diff))
            prof_saving = prof["planted"]["step_us"] - prof[p]["step_us"]
            removed = prof["planted"]["ops"] - prof[p]["ops"]
            res["fixes"][p] = {
                "bound_us": bounds[p],
                "evidence_ops": nops[p],
                "measured_us": measured,
                "measured_q1_q3": [float(np.percentile(diff, 25)), float(np.percentile(diff, 75))],
                "profiled_saving_us": prof_saving,
                "ops_removed": removed,
                "c_true_us_per_op": (prof_saving - measured) / removed if removed else float("nan"),
            }
        runs.append(res)
        print(json.dumps({"run": run, "load": load, "fixes": res["fixes"],
                          "steps": {k: (round(prof[k]["step_us"]), unprof[k], prof[k]["ops"]) for k in loops},
                          "est_planted": prof["planted"]["est"], "parts": prof["planted"]["pointwise_parts"]}, default=float), flush=True)  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
