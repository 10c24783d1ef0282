"""Notebook 10's planted loop: the saving each fix is predicted to make, from the trace, against the measured one.

    python benchmarks/diagnose_savings.py [--rounds 21] [--json benchmarks/results/cpu_diagnose_savings.json]

The planted loop (``helpers.lessons.planted``) is profiled a few times; each profile is diagnosed,
and every fix's predicted saving is the bound of the findings that point at its problem, with the
profiler's per-operator cost taken out (:mod:`helpers.diagnose.predict`: the cost is the profiled
minus the unprofiled step timed just before it, over the step's operators). The prediction is the median over the
third of the profiles with the shortest steps (another process only ever adds time: those are the
least disturbed). Then the loop and each one-fix variant are timed without the profiler, in interleaved
rounds (each the median of ``--repeats`` steps); a fix's measured saving is the median of the
per-round differences to the planted loop, with their quartiles. A fix with no finding is
predicted to save nothing. On a CPU one thread is used: a parallel region waits for whichever of
its threads the OS descheduled.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import log, write_json  # noqa: E402


def _quartiles(values) -> dict[str, float]:
    q = np.percentile(np.asarray(values, dtype=float), [25, 50, 75])
    return {"q1": float(q[0]), "median": float(q[1]), "q3": float(q[2])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=21, help="interleaved timing rounds (unprofiled)")
    ap.add_argument("--repeats", type=int, default=12, help="steps per round (the round keeps their median)")
    ap.add_argument("--profiles", type=int, default=9, help="profiles of the planted loop (the quietest third used)")
    ap.add_argument("--steps", type=int, default=3, help="profiler steps per profile")
    ap.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: the GPU when there is one")
    ap.add_argument("--json", type=Path, default=None, help="write the result here")
    args = ap.parse_args(argv)

    import torch

    import helpers
    from helpers.diagnose import diagnose
    from helpers.diagnose.predict import overhead_per_operator, unprofiled_saving
    from helpers.lessons import nb10
    from helpers.lessons.planted import PROBLEMS, build_loop, planted_problem

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        torch.set_num_threads(1)
    fixes = [p for p in PROBLEMS if device == "cuda" or p != "fp32"]  # bf16 autocast is a GPU fix
    loops = {"planted": build_loop(device=device), **{p: build_loop({p}, device=device) for p in fixes}}

    log(f"timing {len(loops)} variants unprofiled, {args.rounds} interleaved rounds of {args.repeats} steps")
    rounds = {k: [] for k in loops}
    for _ in range(args.rounds):
        for k, loop in loops.items():
            rounds[k].append(statistics.median(nb10.step_rounds({k: loop}, rounds=3, repeats=args.repeats)[k]))

    profiles = []
    for i in range(args.profiles):
        # the unprofiled step right before the profile: the machine's state of the moment in both
        local = statistics.median(nb10.step_rounds({"planted": loops["planted"]}, rounds=3, repeats=args.repeats)["planted"])  # fmt: skip
        trace = helpers.profile(loops["planted"].step, steps=args.steps, warmup=2, grad=True, label="planted")
        found = diagnose(trace)
        profiled = statistics.median(nb10.profiled_step_us(trace))
        ops = nb10.operators_per_step(trace)
        c = overhead_per_operator(profiled, local, ops)
        pred = unprofiled_saving(found, c)
        problems = [planted_problem(r) for r in found["rule"]]
        per_fix = {
            p: {
                "bound_profiled_us": float(found["saving_upper_bound_us"][[q == p for q in problems]].sum()),
                "predicted_us": float(pred[[q == p for q in problems]].sum()),
                "ratio_predicted_us": float(found["saving_upper_bound_us"][[q == p for q in problems]].sum())
                * local
                / profiled,
            }
            for p in fixes
        }
        profiles.append(
            {
                "profiled_step_us": profiled,
                "unprofiled_step_us": local,
                "ops_per_step": ops,
                "overhead_us_per_op": c,
                "findings": found[["rule", "saving_upper_bound_us", "time_us", "ops_per_step"]].to_dict("records"),
                "fixes": per_fix,
            }
        )
        log(f"profile {i}: step {profiled:,.0f} us profiled, {c:.2f} us per operator; " + ", ".join(
            f"{p} {v['predicted_us']:,.0f}" for p, v in per_fix.items()))  # fmt: skip

    # another process slowing the machine only ever adds time: the profiles with the shortest steps are the
    # least disturbed, the ones whose per-operator cost is the profiler's alone
    quiet = sorted(profiles, key=lambda pr: pr["profiled_step_us"])[: max(1, len(profiles) // 3)]
    for pr in quiet:
        pr["used"] = True
    results = []
    base = np.asarray(rounds["planted"])
    for p in fixes:
        diff = base - np.asarray(rounds[p])
        m = _quartiles(diff)
        predicted = statistics.median(pr["fixes"][p]["predicted_us"] for pr in quiet)
        ratio_pred = statistics.median(pr["fixes"][p]["ratio_predicted_us"] for pr in quiet)
        err = (predicted - m["median"]) / abs(m["median"]) if m["median"] else float("nan")
        results.append(
            {
                "fix": p,
                "predicted_us": predicted,
                "predicted_by_step_ratio_us": ratio_pred,
                "measured_us": m["median"],
                "measured_q1_us": m["q1"],
                "measured_q3_us": m["q3"],
                "error_pct": 100 * err,
                "within_25pct": bool(abs(err) <= 0.25) if m["median"] else None,
                "inside_quartiles": bool(m["q1"] <= predicted <= m["q3"]),
            }
        )
        log(f"{p:10s} predicted {predicted:7,.0f} us  measured {m['median']:7,.0f} us "
            f"(quartiles {m['q1']:,.0f} to {m['q3']:,.0f})  error {100 * err:+.0f} %")  # fmt: skip

    out = {
        "what": "predicted (from the trace, profiler cost per operator taken out) vs measured (unprofiled) saving "
        "of each fix of notebook 10's planted loop, one fix at a time",
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.node()} ({platform.machine()}, {platform.system()}), "
        + (torch.cuda.get_device_name() if device == "cuda" else f"CPU only, {torch.get_num_threads()} thread"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "command": "python benchmarks/diagnose_savings.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "rounds": args.rounds,
        "repeats": args.repeats,
        "unprofiled_step_us": {k: _quartiles(v) for k, v in rounds.items()},
        "profiles": profiles,
        "fixes": results,
    }
    if args.json:
        write_json(args.json, out)
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    t0 = time.time()
    sys.exit(main())
