"""The fused MLP's targets, checked against one benchmark result.

Each target compares the course's fused MLP with the other variants *measured in the same run*.
:func:`check_targets` returns one row per target and shape: the measured value, the bound it must
meet, whether it did (None when the run lacks a number it needs, with the reason).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from .results import BenchResults

__all__ = ["check_targets"]

FUSED = "course-fused"


def _ok(entry: dict[str, Any] | None) -> bool:
    return bool(entry) and entry.get("status") == "ok"


def _row(target: str, shape: str, value: float | None, bound: float | None, note: str) -> dict[str, Any]:
    met = None if value is None or bound is None else bool(value <= bound)
    return {"target": target, "shape": shape, "value": value, "bound": bound, "met": met, "note": note}


def _v(r: BenchResults, shape: str, name: str, key: str) -> float | None:
    e = r.data["shapes"][shape]["variants"].get(name)
    return float(e[key]) if _ok(e) and e.get(key) is not None else None


def _t(r: BenchResults, shape: str, name: str, key: str) -> float | None:
    e = r.data["shapes"][shape].get("training", {}).get(name)
    return float(e[key]) if _ok(e) and e.get(key) is not None else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def check_targets(r: BenchResults) -> pd.DataFrame:
    """The fused MLP's targets on result `r` (columns target, shape, value, bound, met, note)."""
    if not isinstance(r, BenchResults):
        raise TypeError(f"expected helpers.BenchResults, got {type(r).__name__}")
    rows: list[dict[str, Any]] = []
    main = r.main
    if main in r.shape_names():
        k = _ratio(_v(r, main, FUSED, "kernel_us"), _v(r, main, "compile", "kernel_us"))
        rows.append(_row("kernel time / compile's", main, k, 0.86, "keep today's 0.86x"))
        rows.append(
            _row(
                "host overhead - eager's (us)",
                main,
                None
                if _v(r, main, FUSED, "host_overhead_us") is None or _v(r, main, "eager", "host_overhead_us") is None
                else _v(r, main, FUSED, "host_overhead_us") - _v(r, main, "eager", "host_overhead_us"),
                0.0,
                "host overhead = synchronised wall time - kernel time",
            )
        )
        sync = _v(r, main, FUSED, "e2e_sync_us")
        rows.append(
            _row("sync end to end / compile's", main, _ratio(sync, _v(r, main, "compile", "e2e_sync_us")), 0.90, "")
        )
        rows.append(_row("sync end to end / eager's", main, _ratio(sync, _v(r, main, "eager", "e2e_sync_us")), 1.0, ""))
        err = _v(r, main, FUSED, "rel_err")
        rows.append(_row("forward relative error vs float32", main, err, 1e-2, "bf16 outputs: between 1e-3 and 1e-2"))
        training = r.data["shapes"][main].get("training", {})
        if training:
            fastest = [t for t in (_t(r, main, n, "step_us") for n in ("eager", "compile", "liger")) if t is not None]
            save = _t(r, main, "course-fused-save", "step_us")
            rows.append(
                _row(
                    "save-mode step / fastest of eager, compile, Liger",
                    main,
                    _ratio(save, min(fastest) if fastest else None),
                    0.90,
                    "",
                )
            )
            rows.append(
                _row("recompute-mode peak memory / Liger's", main,
                     _ratio(_t(r, main, "course-fused-recompute", "peak_mb"), _t(r, main, "liger", "peak_mb")), 1.0, "")
            )  # fmt: skip
            rows.append(
                _row("recompute-mode step / eager's", main,
                     _ratio(_t(r, main, "course-fused-recompute", "step_us"), _t(r, main, "eager", "step_us")), 1.0, "")
            )  # fmt: skip
            for mode in ("save", "recompute"):
                rows.append(
                    _row(
                        f"{mode}-mode dx relative error vs float32",
                        main,
                        _t(r, main, f"course-fused-{mode}", "dx_rel_err"),
                        1e-2,
                        "",
                    )
                )
    for name in r.shape_names():
        s = r.data["shapes"][name]["shape"]
        if name == main:
            continue
        if s["tokens"] <= 512:
            rows += _small_m_rows(r, name)
        elif 2048 <= s["dim"] <= 4096 and 8192 <= s["hidden"] <= 16384:
            k = _ratio(_v(r, name, FUSED, "kernel_us"), _v(r, name, "compile", "kernel_us"))
            rows.append(_row("kernel time / compile's", name, k, 0.95, "model-sized shape"))
    sweep = r.sweep()
    for m in sorted({int(m) for m in sweep["m"] if m <= 512}):
        rows += _small_m_rows(r, f"sweep M={m}", sweep[(sweep["m"] == m) & (sweep["status"] == "ok")])
    return pd.DataFrame(rows, columns=["target", "shape", "value", "bound", "met", "note"])


def _small_m_rows(r: BenchResults, name: str, frame: pd.DataFrame | None = None) -> list[dict[str, Any]]:
    """M <= 512: the fused MLP within 2% of the best other variant, end to end (both ways of timing)."""
    if frame is None:
        frame = r.table(name)
        frame = frame[frame["status"] == "ok"]
    out = []
    for metric in ("e2e_nosync_us", "e2e_sync_us"):
        times = frame.set_index("variant")[metric].dropna() if metric in frame else pd.Series(dtype=float)
        ours = times.get(FUSED)
        others = times.drop(FUSED, errors="ignore")
        best = float(others.min()) if len(others) else None
        if ours is None and not len(others):
            note = "not measured in this run"
        else:
            note = f"best other: {others.idxmin()}" if len(others) else "no other variant measured"
        out.append(
            _row(
                f"{metric.removeprefix('e2e_').removesuffix('_us')} end to end / best other",
                name,
                _ratio(ours, best),
                1.02,
                note,
            )
        )
    return out
