"""Notebook 10's planted loop: the saving each fix is predicted to make, from the trace, against the measured one.

    python benchmarks/diagnose_savings.py [--rounds 21] [--json benchmarks/results/cpu_diagnose_savings.json]

The planted loop (``helpers.lessons.planted``) is profiled a few times; each profile is diagnosed,
and every fix's predicted saving is the bound of the findings that point at its problem: the
critical-path time the fix removes, as the trace shows it. Beside it, two scalings to the
unprofiled step (by the step's unprofiled/profiled ratio, and by the profiler's mean cost per
operator, profiled minus unprofiled step over its operators, times the evidence's operators) show
what scaling would do. The prediction is the median over the
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
import os
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
    from helpers.lessons import nb10
    from helpers.lessons.planted import PROBLEMS, build_loop, planted_problem

    load_before = os.getloadavg()
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
        # two ways of scaling a bound to the unprofiled step, kept beside the prediction to show how they do:
        # by the step's ratio, and by the profiler's mean cost per operator times the evidence's operators
        c = max(profiled - local, 0.0) / ops
        mine = {p: (found["rule"].map(planted_problem) == p).to_numpy() for p in fixes}
        bound, t, n = (found[k].to_numpy(dtype=float) for k in ("saving_upper_bound_us", "time_us", "ops_per_step"))
        per_op = bound * np.clip(1 - n * c / np.where(t > 0, t, np.inf), 0, 1)
        per_fix = {
            p: {
                "predicted_us": float(bound[m].sum()),
                "scaled_by_step_ratio_us": float(bound[m].sum()) * local / profiled,
                "scaled_per_operator_us": float(per_op[m].sum()),
            }
            for p, m in mine.items()
        }
        profiles.append(
            {
                "profiled_step_us": profiled,
                "unprofiled_step_us": local,
                "ops_per_step": ops,
                "profiler_us_per_op": c,
                "findings": found[["rule", "saving_upper_bound_us", "time_us", "ops_per_step"]].to_dict("records"),
                "fixes": per_fix,
            }
        )
        log(f"profile {i}: step {profiled:,.0f} us profiled ({local:,.0f} unprofiled); " + ", ".join(
            f"{p} {v['predicted_us']:,.0f}" for p, v in per_fix.items()))  # fmt: skip

    # another process slowing the machine only ever adds time: the profiles with the shortest steps are the
    # least disturbed
    quiet = sorted(profiles, key=lambda pr: pr["profiled_step_us"])[: max(1, len(profiles) // 3)]
    for pr in quiet:
        pr["used"] = True
    results = []
    base = np.asarray(rounds["planted"])
    for p in fixes:
        diff = base - np.asarray(rounds[p])
        m = _quartiles(diff)
        predicted = statistics.median(pr["fixes"][p]["predicted_us"] for pr in quiet)
        alt = {k: statistics.median(pr["fixes"][p][k] for pr in quiet) for k in ("scaled_by_step_ratio_us", "scaled_per_operator_us")}  # fmt: skip
        # a fix predicted to save nothing is judged by the rounds' spread: a share of a noisy ~0 means nothing
        err = (predicted - m["median"]) / abs(m["median"]) if predicted else float("nan")
        results.append(
            {
                "fix": p,
                "predicted_us": predicted,
                **alt,
                "measured_us": m["median"],
                "measured_q1_us": m["q1"],
                "measured_q3_us": m["q3"],
                "error_pct": 100 * err,
                "within_25pct": bool(abs(err) <= 0.25) if predicted else None,
                "inside_quartiles": bool(m["q1"] <= predicted <= m["q3"]),
            }
        )
        log(f"{p:10s} predicted {predicted:7,.0f} us  measured {m['median']:7,.0f} us "
            f"(quartiles {m['q1']:,.0f} to {m['q3']:,.0f})  " + (f"error {100 * err:+.0f} %" if predicted else f"inside the quartiles: {m['q1'] <= 0 <= m['q3']}"))  # fmt: skip

    out = {
        "what": "predicted (the critical-path time the fix removes, from the trace) vs measured (unprofiled) saving "
        "of each fix of notebook 10's planted loop, one fix at a time",
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.node()} ({platform.machine()}, {platform.system()}), "
        + (torch.cuda.get_device_name() if device == "cuda" else f"CPU only, {torch.get_num_threads()} thread"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "command": "python benchmarks/diagnose_savings.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "load_average_1_5_15min": {"before": list(load_before), "after": list(os.getloadavg())},
        "cpus": os.cpu_count(),
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
