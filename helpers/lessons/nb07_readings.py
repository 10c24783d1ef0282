"""Lesson 07's sentences over live timings and tile counts, computed from the numbers (a ranking inside the rounds'
spread is a tie): the kernels timed side by side, causal masking's time against its FLOPs, FlexAttention's tiles."""

from __future__ import annotations

import ast
import json
import math
import statistics
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
import torch

from ..measure.ceilings import Ceilings, measure_ceilings, reference_ceilings_for
from ..paths import REPO_ROOT
from ..programs import line_shown, run_program
from .nb07_race import kernel_race_note
from .nb07_wall import (
    backend_times_sentence,
    causal_sentence,
    causal_timing_row,
    host_us_per_call,
    kernel_us_per_call,
    overlapping_rounds_sentence,
    sweep_growth_sentence,
    wall_rounds_disturbed,
)
from .results import reference_ceilings
from .rounds import compare_rounds, rounds_frame

__all__ = [
    "backend_times_sentence",
    "causal_sentence",
    "causal_timing_row",
    "ceilings_args",
    "flex_tiles_sentence",
    "host_us_per_call",
    "kernel_race_note",
    "kernel_us_per_call",
    "memory_roof_shares",
    "overlapping_rounds_sentence",
    "ranking_sentence",
    "rope_share_sentence",
    "rounds_frame",
    "run_quietly",
    "small_kernels_sentence",
    "sweep_growth_sentence",
    "wall_kernel_sentence",
    "wall_rounds_disturbed",
    "wall_table_sentence",
]


def ranking_sentence(rounds: Mapping[str, Sequence[float]], unit: str = "ms", decimals: int = 2) -> str:
    """The variants from fastest to slowest by the median of their rounds (medians rounded to `decimals`, as the
    table shows them), each set beside the lowest: slower when the difference is beyond the spread, a tie when
    inside (:func:`.rounds.too_close`). When every other variant ties with the lowest, no winner is named."""
    if len(rounds) < 2:
        raise ValueError("give at least two variants' rounds to rank")
    if isinstance(decimals, bool) or not isinstance(decimals, int) or not 0 <= decimals <= 4:
        raise ValueError(f"decimals must be an int from 0 to 4, got {decimals!r}")
    d = decimals
    verdicts = {n: compare_rounds(r, r) for n, r in rounds.items()}  # checks every set of rounds
    order = sorted(rounds, key=lambda n: verdicts[n].a_median)
    best = order[0]
    against = {name: compare_rounds(rounds[best], rounds[name]) for name in order[1:]}
    lo, hi = verdicts[best].a_range
    lowest = f"`{best}`, {verdicts[best].a_median:,.{d}f} {unit} (middle half {lo:,.{d}f} to {hi:,.{d}f})"
    if all(v.tie for v in against.values()):
        others = ", ".join(f"`{n}` {v.b_median:,.{d}f} {unit}" for n, v in against.items())
        widest = against[order[-1]]
        return (
            f"Too close to call here: no variant wins. Lowest median {lowest}; {others}, each inside the rounds' "
            f"spread ({widest.why(unit)}). A synchronised wall time this spread says nothing about which kernel is "
            "faster: read the kernel times of the benchmark below."
        )
    parts = []
    for name, v in against.items():
        if v.tie:
            parts.append(f"`{name}` ({v.b_median:,.{d}f} {unit}) ties with it, too close to call here: {v.why(unit)}")
        else:
            parts.append(f"`{name}` is slower ({v.b_median:,.{d}f} {unit}, {v.b_median / v.a_median:.2f}x)")
    lead = "Lowest median" if any(v.tie for v in against.values()) else "Fastest by the median of its rounds"
    return f"{lead}: {lowest}; " + "; ".join(parts) + "."


def rope_share_sentence(share: float | None, device: str, live: bool, best_pct_of_roof: float | None = None) -> str:
    """The summary's line on RoPE's share of the block's kernel time: said of the GPU the learner ran (`live`,
    `device` read from the trace) as that run's share, else of the H200's reference trace; with the best share of
    the memory roof its kernels reached when given; empty when no GPU trace was read."""
    if share is None:
        return ""
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share <= 1:
        raise ValueError(f"share must be a fraction between 0 and 1, got {share!r}")
    if isinstance(best_pct_of_roof, float) and math.isnan(best_pct_of_roof):
        best_pct_of_roof = None  # no kernel's bytes were known
    if best_pct_of_roof is not None and (isinstance(best_pct_of_roof, bool) or not isinstance(best_pct_of_roof, (int, float)) or not best_pct_of_roof >= 0):  # fmt: skip
        raise ValueError(f"best_pct_of_roof must be a percentage >= 0 or None, got {best_pct_of_roof!r}")
    where = f"Here, on {device}, in this run's profile," if live else "On the H200's reference trace,"
    roof = (
        f" (ATen's strided elementwise kernels, at most {best_pct_of_roof:.0f}% of the memory roof)"
        if best_pct_of_roof is not None
        else ""
    )
    tail = ": a share of one run, on a GPU other work may share." if live else "."
    return f"{where} RoPE's small kernels{roof} took {share:.0%} of the block's kernel time{tail}"


def flex_tiles_sentence(us: Mapping[str, float], tiles: Mapping[str, tuple[int, int]]) -> str:
    """FlexAttention's causal and sliding-window kernels (``us``: kernel microseconds) beside their BlockMasks'
    tiles (``tiles``: (partial, full) per mask): empty tiles cost nothing, a partial one is computed and masked."""
    for m in ("causal", "sliding_window"):
        if m not in us or m not in tiles:
            raise ValueError(f"give the kernel time and the tiles of both masks (causal, sliding_window); {m} missing")
    kept = {m: sum(tiles[m]) for m in tiles}
    if kept["causal"] <= 0 or us["causal"] <= 0:
        raise ValueError("the causal mask keeps no tile, or its kernel took no time")
    tile_share, time_share = kept["sliding_window"] / kept["causal"], us["sliding_window"] / us["causal"]
    partial = {m: tiles[m][0] / kept[m] for m in tiles}
    return (
        f"Same shape, same generated template: causal {us['causal']:.0f} us, a 256-key sliding window "
        f"{us['sliding_window']:.0f} us ({time_share:.0%}). The window keeps {kept['sliding_window']} tiles against "
        f"causal's {kept['causal']} ({tile_share:.0%}): empty tiles cost nothing, but "
        f"{partial['sliding_window']:.0%} of the window's tiles are partial (against {partial['causal']:.0%} of "
        "causal's), on the diagonal and at the window's far edge, and a partial tile is computed in full and masked"
        + (
            ", so the time falls less than the tiles."
            if time_share > tile_share * 1.1
            else "; here the time fell about as much as the tiles."
        )
    )


def benchmark_line_shown(line: str) -> bool:
    """Whether a line of ``python -m benchmarks attention`` is printed in lesson 07: not the profiler's tracing
    notices, not the benchmark's targets and their verdicts (the project's own checks, never a lesson's)."""
    return line_shown(line, hidden_prefixes=("targets:",), hidden_substrings=("(met: ",))


def lesson_ceilings() -> Ceilings:
    """The one ceiling set lesson 07's tables divide by: on a GPU its registered set (the H200's), measured here
    for a GPU without one; on a CPU the H200's, which its reference traces were recorded on."""
    if not torch.cuda.is_available():
        return reference_ceilings()
    return reference_ceilings_for(torch.cuda.get_device_name()) or measure_ceilings()


def ceilings_args(ceilings: Ceilings | None, folder: Path) -> list[str]:
    """The benchmark's ``--ceilings FILE`` arguments for the lesson's one ceiling set (written to `folder`), so
    its tables divide by the same set as the lesson's; none when `ceilings` is None (it measures its own)."""
    if ceilings is None:
        return []
    if not isinstance(ceilings, Ceilings):
        raise TypeError(f"ceilings must be a Ceilings, got {type(ceilings).__name__}")
    path = Path(folder) / "attention_ceilings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(ceilings.as_dict()))
    return ["--ceilings", str(path)]


def _kernels(n: float) -> str:
    return f"{n:.0f} kernel" + ("" if round(n) == 1 else "s")


def wall_kernel_sentence(times: pd.DataFrame, tolerance: float = 0.05) -> str:
    """The wall time per call against the kernel time (``wall_and_kernel_times``' rows): a one-kernel call far off
    its kernel has nothing between kernels to blame, so its gap is put down to the GPU not running alike for the
    two readings."""
    missing = [c for c in ("variant", "kernels_per_call", "kernel_us", "time_us") if c not in times.columns]
    if missing or times.empty:
        raise ValueError(f"give wall_and_kernel_times' rows; missing columns {missing} or no rows")
    ratio = times["time_us"] / times["kernel_us"]
    far = times[(ratio - 1).abs() > tolerance]
    text = (
        f"{len(times) - len(far)} of {len(times)} variants take the same time on the clock as the sum of their "
        f"kernels (within {tolerance:.0%}): at these sizes nothing between the kernels of a call costs time."
    )
    for r in far.itertuples():
        text += (
            f" `{r.variant}`: {r.time_us:,.0f} us on the clock against {r.kernel_us:,.0f} us in its "
            f"{_kernels(r.kernels_per_call)} ({r.time_us / r.kernel_us:.2f}x)"
        )
        if r.variant == "manual-eager":
            text += (
                ": the kernel sum leaves out the device-to-device memcpy of `masked_fill` (a copy, not a kernel), "
                "one more pass over the score matrix, so its rate in the tables above is flattered by as much."
            )
        elif round(r.kernels_per_call) == 1 and r.time_us > r.kernel_us:
            text += (
                ": one kernel per call, so nothing runs between kernels to explain the gap. Its timed calls and its "
                "profiled call were taken at different moments, and the GPU did not run alike for them (other "
                "work on it, or its clocks), a cause this notebook cannot check. "
                "Read its kernel time."
            )
        elif r.time_us > r.kernel_us:
            text += (
                f": between its {_kernels(r.kernels_per_call)} the GPU waits for the host to launch the next, launch "
                "and idle time the kernel sum leaves out (a GPU shared with other work adds to it)."
            )
        else:
            text += "."
    return text


def wall_table_sentence(
    rounds_us: Mapping[str, Sequence[float]],
    same_call: str,
    earlier_us: float | None,
    kernel_us: float | None,
    race: str = "",
    factor: float = 1.5,
) -> str:
    """What the wall-time table of the kernels timed side by side (`rounds_us`, microseconds) can say: `same_call`
    (a variant timed earlier in the lesson at `earlier_us`, its kernel `kernel_us`) checks the rounds. Disturbed
    (:func:`wall_rounds_disturbed`): something else slowed them and at most the ranking is read, with care; else the
    ranking, and `race` (what the learner's kernel beating the course's means); an earlier timing more than
    `factor` times these rounds is said to have been the disturbed one."""
    if same_call not in rounds_us:
        raise ValueError(f"no rounds for {same_call!r}; have {', '.join(rounds_us)}")
    median = statistics.median(float(x) for x in rounds_us[same_call])
    disturbed = wall_rounds_disturbed(rounds_us[same_call], earlier_us, kernel_us, factor)
    seen = [f"{earlier_us:,.0f} us when section 3 timed the same call"] if earlier_us is not None else []
    seen += [f"{kernel_us:,.0f} us in its kernel"] if kernel_us is not None else []
    ranking = ranking_sentence(rounds_us, unit="us", decimals=0)
    if not seen:
        return f"{ranking} No earlier timing of `{same_call}` to check these rounds against: read them with care."
    against = f"`{same_call}` took {median:,.0f} us a call here, against " + " and ".join(seen)
    if disturbed:
        return (
            f"**These rounds were disturbed.** {against} ({median / max(r for r in (earlier_us, kernel_us) if r):.1f}x "
            "or more): a launch adds microseconds, not hundreds of them, so something else on the GPU (other work, "
            "or its clocks) slowed these rounds. Their times, and the TFLOP/s they would give, say nothing of the "
            f"kernels' speed; the rounds were taken in turns, so at most the order can be read, with care. {ranking}"
        )
    close = [
        (v, what) for v, what in ((earlier_us, "section 3's timing"), (kernel_us, "its kernel time")) if v is not None
    ]
    agree = [what for v, what in close if max(v, median) <= factor * min(v, median)]
    text = against + (f": these rounds agree with {' and with '.join(agree)} within {factor:g}x." if agree else ".")
    # a disturbance only adds time: the faster set is nearer the call's own time
    if earlier_us is not None and earlier_us > factor * median:
        text += (
            f" Section 3's rounds of the same call took {earlier_us / median:.1f}x these"
            + (f" and {earlier_us / kernel_us:.1f}x its kernel" if kernel_us is not None else "")
            + ": something else on the GPU (other work, or its clocks) slowed those rounds, so section 3's times per "
            "call overstate this call's time."
        )
    return f"{text} {ranking}" + (f" {race}" if race else "")


def _shapes(text: object) -> list:
    if isinstance(text, str) and text.strip():
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return []
    return list(text) if isinstance(text, (list, tuple)) else []


def _moved_elements(op: str, shapes: list) -> int | None:
    """Elements read and written by one elementwise or cat kernel: each tensor input once, the output once."""
    if op == "aten::cat" and shapes and isinstance(shapes[0], list) and all(isinstance(s, list) for s in shapes[0]):
        parts = [math.prod(s) for s in shapes[0] if s]
        return 2 * sum(parts) if parts else None
    tensors = [s for s in shapes if isinstance(s, list) and s and all(isinstance(d, int) for d in s)]
    if not tensors:
        return None
    return sum(math.prod(s) for s in tensors) + max(math.prod(s) for s in tensors)  # the output: the broadcast size


def memory_roof_shares(kernels: pd.DataFrame, bandwidth_bytes_per_s: float, itemsize: int) -> pd.DataFrame:
    """Each small kernel of a profiled call (rows of ``helpers.kernel_table``) with the bytes it moves (from its
    launching op's recorded shapes), its rate and its share of the memory roof; ``strided`` marks ATen's generic
    ``elementwise_kernel``, which it runs when an operand is not contiguous (no vectorized loads)."""
    missing = {"short_name", "name", "duration_us", "launched_by", "input_shapes"} - set(kernels.columns)
    if missing:
        raise ValueError(f"kernels must be rows of helpers.kernel_table(...); missing columns {sorted(missing)}")
    if isinstance(bandwidth_bytes_per_s, bool) or not isinstance(bandwidth_bytes_per_s, (int, float)) or not bandwidth_bytes_per_s > 0:  # fmt: skip
        raise ValueError(f"bandwidth_bytes_per_s must be a positive number, got {bandwidth_bytes_per_s!r}")
    if isinstance(itemsize, bool) or not isinstance(itemsize, int) or itemsize < 1:
        raise ValueError(f"itemsize must be a positive int (bytes per element), got {itemsize!r}")
    rows = []
    for k in kernels.itertuples():
        elements = _moved_elements(str(k.launched_by), _shapes(k.input_shapes))
        moved = None if elements is None else elements * itemsize
        rate = None if moved is None or not k.duration_us > 0 else moved / (k.duration_us * 1e-6)
        name = str(k.name)
        rows.append(
            {
                "kernel": k.short_name,
                "launched_by": k.launched_by,
                "strided": "elementwise_kernel<" in name and "vectorized_elementwise_kernel" not in name,
                "duration_us": float(k.duration_us),
                "mb_moved": math.nan if moved is None else moved / 1e6,
                "tb_per_s": math.nan if rate is None else rate / 1e12,
                "pct_of_memory_roof": math.nan if rate is None else 100 * rate / bandwidth_bytes_per_s,
            }
        )
    return pd.DataFrame(rows, columns=["kernel", "launched_by", "strided", "duration_us", "mb_moved", "tb_per_s", "pct_of_memory_roof"])  # fmt: skip


def small_kernels_sentence(shares: pd.DataFrame, share_of_block: float, roof_label: str, live: bool) -> str:
    """What the block's small kernels are (``memory_roof_shares``' rows) and their share of the block's kernel time
    (`share_of_block`, 0 to 1), said as this profile's: a profile of one call on a shared GPU moves it."""
    if shares.empty or "pct_of_memory_roof" not in shares.columns:
        raise ValueError("give memory_roof_shares' rows, at least one")
    if isinstance(share_of_block, bool) or not isinstance(share_of_block, (int, float)) or not 0 <= share_of_block <= 1:  # fmt: skip
        raise ValueError(f"share_of_block must be a fraction from 0 to 1, got {share_of_block!r}")
    pct = pd.to_numeric(shares["pct_of_memory_roof"], errors="coerce").dropna()
    strided = int(shares["strided"].sum())
    what = (
        f"{strided} of the {len(shares)} are ATen's generic strided `elementwise_kernel`, not its "
        "`vectorized_elementwise_kernel`: each has an operand that is not contiguous (q and k are transposed views "
        "of the projections' output, cos and sin are broadcast over batch and heads, rotate_half's halves are "
        "slices), so it loads element by element. "
        if strided
        else ""
    )
    rate = (
        f"They move their bytes at {pct.min():.0f}% to {pct.max():.0f}% of the memory roof ({roof_label}): "
        + ("near it, so memory bound. " if pct.min() >= 70 else "well below it, so not simply memory bound. ")
        if len(pct)
        else ""
    )
    call = "profiled call" if live else "recorded call"
    whose = "this run's share, on a GPU other work may share, so another run gives another" if live else "the share of that one recording"  # fmt: skip
    return f"{what}{rate}In this {call} they took {share_of_block:.0%} of the block's kernel time: {whose}."


def run_quietly(args: Sequence[str], timeout_s: float, out: Path) -> float:
    """Run ``python args...`` with its progress kept off screen (its lines hold the repository's absolute paths and
    the harness's timing), then print one line: how long it ran and the results file, relative to the repository."""
    start = time.perf_counter()
    run_program(list(args), timeout_s, progress=False)
    took = time.perf_counter() - start
    where = Path(out).resolve()
    shown = where.relative_to(REPO_ROOT) if where.is_relative_to(REPO_ROOT) else where
    print(f"python {' '.join(str(a) for a in args[:3])} ran in {took:.0f} s, written to {shown}.")
    return took
