"""Lesson 07's sentences over live timings and tile counts, computed from the numbers (a ranking inside the rounds'
spread is a tie): the kernels timed side by side, causal masking's time against its FLOPs, FlexAttention's tiles."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
import torch

from ..measure.ceilings import Ceilings, measure_ceilings, reference_ceilings_for
from ..programs import line_shown
from .results import reference_ceilings
from .rounds import compare_rounds, rounds_frame

__all__ = [
    "causal_sentence",
    "ceilings_args",
    "flex_tiles_sentence",
    "kernel_race_note",
    "ranking_sentence",
    "rope_share_sentence",
    "rounds_frame",
    "wall_kernel_sentence",
]


def ranking_sentence(rounds: Mapping[str, Sequence[float]], unit: str = "ms") -> str:
    """The variants from fastest to slowest by the median of their rounds (medians rounded to two decimals, as the
    table shows them), each set beside the lowest: slower when the difference is beyond the spread, a tie when
    inside (:func:`.rounds.too_close`). When every other variant ties with the lowest, no winner is named."""
    if len(rounds) < 2:
        raise ValueError("give at least two variants' rounds to rank")
    verdicts = {n: compare_rounds(r, r) for n, r in rounds.items()}  # checks every set of rounds
    order = sorted(rounds, key=lambda n: verdicts[n].a_median)
    best = order[0]
    against = {name: compare_rounds(rounds[best], rounds[name]) for name in order[1:]}
    lo, hi = verdicts[best].a_range
    lowest = f"`{best}`, {verdicts[best].a_median:.2f} {unit} (middle half {lo:.2f} to {hi:.2f})"
    if all(v.tie for v in against.values()):
        others = ", ".join(f"`{n}` {v.b_median:.2f} {unit}" for n, v in against.items())
        widest = against[order[-1]]
        return (
            f"Too close to call here: no variant wins. Lowest median {lowest}; {others}, each inside the rounds' "
            f"spread ({widest.why(unit)}). A synchronised wall time this spread says nothing about which kernel is "
            "faster: read the kernel times of the benchmark below."
        )
    parts = []
    for name, v in against.items():
        if v.tie:
            parts.append(f"`{name}` ({v.b_median:.2f} {unit}) ties with it, too close to call here: {v.why(unit)}")
        else:
            parts.append(f"`{name}` is slower ({v.b_median:.2f} {unit}, {v.b_median / v.a_median:.2f}x)")
    lead = "Lowest median" if any(v.tie for v in against.values()) else "Fastest by the median of its rounds"
    return f"{lead}: {lowest}; " + "; ".join(parts) + "."


def rope_share_sentence(share: float | None, device: str, live: bool) -> str:
    """The summary's line on RoPE's share of the block's kernel time: said of the GPU the learner ran (`live`,
    `device` read from the trace), else of the H200's reference trace; empty when no GPU trace was read."""
    if share is None:
        return ""
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share <= 1:
        raise ValueError(f"share must be a fraction between 0 and 1, got {share!r}")
    where = f"Here, on {device}," if live else "On the H200's reference trace,"
    return f"{where} RoPE's small kernels took {share:.0%} of the block's kernel time."


def causal_sentence(table: pd.DataFrame) -> str:
    """Causal masking's time against its FLOPs, per sequence length, from rows with ``seq``, ``time_ratio`` and
    ``flops_ratio``: a GPU kernel skips whole tiles above the diagonal, computes the diagonal's tiles in full and
    keeps its fixed costs, so the time ratio sits above the FLOP ratio, less so as the tiles grow in number."""
    missing = [c for c in ("seq", "time_ratio", "flops_ratio") if c not in getattr(table, "columns", ())]
    if missing:
        raise ValueError(f"the table lacks the column(s) {', '.join(missing)}")
    each = "; ".join(
        f"at seq {int(r.seq)} causal takes {r.time_ratio:.2f} of the full attention's time for {r.flops_ratio:.2f} of "
        "its FLOPs"
        for r in table.itertuples()
    )
    above = table[table["time_ratio"] > table["flops_ratio"] + 0.05]
    why = (
        " The tiles above the diagonal are skipped, but those on it are computed in full and masked, and each query "
        "block still loads its queries and writes its output: at "
        + ", ".join(str(int(s)) for s in above["seq"])
        + " that leaves the time ratio above the FLOP ratio (the longer the sequence, the smaller the diagonal's share)."
        if len(above)
        else " Nearly all the skipped work is saved: the diagonal's tiles are a small share at these lengths."
    )
    return f"On the GPU's key tiles of 64 to 128, {each}.{why}"


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
    its kernel has nothing between kernels to blame, so its gap is put down to a GPU shared with other work."""
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
                "profiled call were taken at different moments: another process on this GPU slowed one of them. "
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


def kernel_race_note(rounds: Mapping[str, Sequence[float]], yours: str, course: str, device: str) -> str:
    """What the race of the learner's kernel against the course's says: when the plain kernel wins by more than
    the rounds' spread, that the course's tile table was picked on an H200 (empty when it does not win)."""
    for name in (yours, course):
        if name not in rounds:
            raise ValueError(f"no rounds for {name!r}; have {', '.join(rounds)}")
    v = compare_rounds(rounds[yours], rounds[course])
    if v.tie or not v.a_faster:
        return ""
    return (
        f"Your kernel, one fixed 64 x 64 tile, beat the course's by {v.b_median / v.a_median:.2f}x on {device}: the "
        "course's launcher tries first the tiles a sweep found fastest on an H200 (the table below), and what is "
        "fastest on one GPU need not be on another. Tile sizes, warps and stages are tuned per GPU and per length: "
        "time them on the GPU you run on."
    )
