"""The stored tables of an attention benchmark run, derived from its raw rows; its acceptance targets.

An H200 recording is judged against the course's one ceiling set (``reference_ceilings()``), any
other machine against the ceilings measured in the same run. Notebook 07 shows ``tflops``,
``pct_of_matmul`` and ``roofline``; ``targets`` are the course kernel's goals, printed after a run
and checked by tests, never shown in a lesson.
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from helpers.attention.costs import AttentionShape, fused_attention_bytes
from helpers.lessons.results import reference_ceilings
from helpers.measure.ceilings import Ceilings, ceilings_from_dict
from helpers.measure.roofline import roofline_frame

from ..common import fmt

RESULTS = ("h200_attention",)
COLUMNS = [
    "variant", "head_dim", "seq", "batch", "heads", "status", "kernel_us", "time_us", "kernels_per_call",
    "tflops", "pct_of_matmul", "peak_mb", "score_mb", "rel_err", "reason",
]  # fmt: skip
PROBE = (128, 4096)  # the shape of the roofline (and of the kernels listed by name)
FLASH_TARGET, FASTEST_TARGET = 1.0, 1.2  # course kernel time / flash backend, / fastest other variant


def judging_ceilings(data: dict[str, Any]) -> Ceilings:
    """The ceilings a run's tables divide by: the course's reference set for an H200, else the run's own."""
    own = ceilings_from_dict(data["ceilings"])
    if own.device_type == "cuda" and "H200" in str(data["provenance"].get("device", "")):
        return reference_ceilings()
    return own


def row_time_us(row: dict[str, Any]) -> float:
    """The time a row's rates are based on: kernel time on a GPU, wall time per call on a CPU."""
    return row["kernel_us"] if row.get("kernel_us") else row["time_us"]


def _ok(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in data["rows"] if r.get("status") == "ok"]


def targets(data: dict[str, Any]) -> pd.DataFrame:
    """Per (head dim, seq): the course kernel against PyTorch's flash backend and the fastest other variant."""
    out = []
    for d in data["config"]["head_dims"]:
        for seq in data["config"]["seqs"]:
            here = {r["variant"]: r for r in _ok(data) if r["head_dim"] == d and r["seq"] == seq}
            if "course" not in here:
                continue
            others = {n: row_time_us(r) for n, r in here.items() if not n.startswith("course")}
            fastest = min(others, key=others.__getitem__) if others else None
            course, flash = row_time_us(here["course"]), others.get("sdpa-flash")
            out.append(
                {
                    "head_dim": d,
                    "seq": seq,
                    "course_us": course,
                    "flash_us": flash,
                    "vs_flash": course / flash if flash else None,
                    "fastest_other": fastest,
                    "fastest_other_us": others[fastest] if fastest else None,
                    "vs_fastest_other": course / others[fastest] if fastest else None,
                    "meets_flash": bool(course <= FLASH_TARGET * flash) if flash else None,
                    "within_1_2": bool(course <= FASTEST_TARGET * others[fastest]) if fastest else None,
                    "course_rel_err": here["course"]["rel_err"],
                }
            )
    return pd.DataFrame(out)


_OLD_KEY = re.compile(r"\('(\w+)', (\d+), (?:True|False), torch\.\w+, .*, (\d+), (\d+)\)$")


def _tuned(data: dict[str, Any]) -> pd.DataFrame:
    """The configuration the tuning sweep chose per (path, head dim, lengths); older runs stored the launcher's keys."""
    tuned = data.get("tuned") or []
    if isinstance(tuned, dict):
        rows = []
        for key, config in tuned.items():
            path, d, sq, sk = _OLD_KEY.match(key).groups()  # type: ignore[union-attr]
            rows.append({"path": path, "head_dim": int(d), "seq_q": int(sq), "seq_k": int(sk), "config": config})
        tuned = rows
    frame = pd.DataFrame(tuned, columns=["path", "head_dim", "seq_q", "seq_k", "config"])
    return frame.sort_values(["path", "head_dim", "seq_q"], ascending=[False, False, True], ignore_index=True)


def tables(data: dict[str, Any]) -> dict[str, tuple[pd.DataFrame, str]]:
    """Every table notebook 07 and the tests read, from the raw rows, judged against :func:`judging_ceilings`."""
    ceilings = judging_ceilings(data)
    rows = pd.DataFrame(data["rows"]).reindex(columns=COLUMNS)
    rows["pct_of_matmul"] = 100.0 * pd.to_numeric(rows["tflops"]) / ceilings.matmul_tflops
    ok = rows[rows["status"] == "ok"]
    pivots = {
        m: ok.pivot_table(index=["head_dim", "seq"], columns="variant", values=m, aggfunc="first")
        .reindex(columns=[v for v in data["variants"] if v in set(ok["variant"])])
        .reset_index()
        .rename_axis(columns=None)
        for m in ("tflops", "pct_of_matmul")
    }
    probe = PROBE if ((ok["head_dim"] == PROBE[0]) & (ok["seq"] == PROBE[1])).any() else None
    if probe is None and not ok.empty:
        probe = (int(ok.iloc[0]["head_dim"]), int(ok.iloc[0]["seq"]))
    roof = pd.DataFrame()
    if probe is not None:
        here = [r for r in _ok(data) if (r["head_dim"], r["seq"]) == probe]
        shape = AttentionShape(batch=here[0]["batch"], heads=here[0]["heads"], seq=probe[1], head_dim=probe[0])
        nbytes = fused_attention_bytes(shape, data["config"]["dtype"])
        roof = roofline_frame([(r["variant"], row_time_us(r), nbytes, r["flops"]) for r in here], ceilings)
        roof.insert(1, "head_dim", probe[0])
        roof.insert(2, "seq", probe[1])
    basis = (
        "kernel time per call (the profiler's sum of the device kernels)"
        if ceilings.device_type == "cuda"
        else "wall time per call"
    )
    tokens = f"batch x seq = {data['config']['tokens']} tokens at every length"
    judged = pd.DataFrame([{"device": ceilings.device, "source": ceilings.source, "label": ceilings.label,
                            "matmul_tflops": ceilings.matmul_tflops, "bandwidth_tbps": ceilings.bandwidth_tbps}])  # fmt: skip
    return {
        "rows": (rows, f"one row per (variant, head dim, seq); rates from the {basis}, % of {ceilings.label}"),
        "tflops": (pivots["tflops"], f"achieved TFLOP/s per variant, causal, {tokens}, from the {basis}"),
        "pct_of_matmul": (pivots["pct_of_matmul"], f"% of the matmul ceiling of {ceilings.label}, {tokens}"),
        "roofline": (roof, f"every variant at head dim {probe[0] if probe else '-'}, seq {probe[1] if probe else '-'} against {ceilings.label}; bytes: q, k, v and o once"),
        "judged_against": (judged, "the ceilings these tables divide by"),
        "targets": (targets(data), f"the course kernel's goals: <= {FLASH_TARGET} x the flash backend, <= {FASTEST_TARGET} x the fastest other variant"),
        "tuned": (_tuned(data), "the tile configuration the tuning sweep chose for the course kernel, per path and shape"),
    }  # fmt: skip


def summary(data: dict[str, Any]) -> str:
    """What a run prints at the end: time per variant and shape, then the course kernel's targets."""
    c = judging_ceilings(data)
    p = data["provenance"]
    lines = [
        f"{p['device']}, torch {p['torch']}, triton {p.get('triton')}; ceilings {c.label}: matmul {c.matmul_tflops:.0f} TFLOP/s",
        f"{'variant':16s} {'d':>4s} {'seq':>6s} {'kernel us':>10s} {'call us':>10s} {'TFLOP/s':>8s} {'peak MB':>9s} {'rel err':>8s}",
    ]  # fmt: skip
    for r in data["rows"]:
        if r.get("status") != "ok":
            lines.append(
                f"{r['variant']:16s} {r['head_dim']:4d} {r['seq']:6d} {r['status']}: {str(r.get('reason'))[:80]}"
            )
            continue
        lines.append(
            f"{r['variant']:16s} {r['head_dim']:4d} {r['seq']:6d} {fmt(r.get('kernel_us'), '10.1f'):>10s} "
            f"{r['time_us']:10.1f} {r['tflops']:8.1f} {r['peak_mb']:9.1f} {r['rel_err']:8.1e}"
        )
    lines += ["", f"targets: course <= {FLASH_TARGET} x flash, <= {FASTEST_TARGET} x the fastest other variant"]
    for t in targets(data).to_dict("records"):
        lines.append(
            f"  d={t['head_dim']:4d} seq={t['seq']:6d} course {t['course_us']:9.1f} us  vs flash {fmt(t['vs_flash'], '5.2f')} "
            f"(met: {t['meets_flash']})  vs fastest ({t['fastest_other']}) {fmt(t['vs_fastest_other'], '5.2f')} (met: {t['within_1_2']})"
        )  # fmt: skip
    return "\n".join(lines)
