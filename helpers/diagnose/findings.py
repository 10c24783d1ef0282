"""What every rule shares: steps, critical path, kernels and the shape of a finding. A rule's claimed saving is
the time its events hold on the critical path per step, never the time they took, never more than the step."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from helpers.trace.categories import STEP_PREFIX, work_kinds
from helpers.trace.kernel_names import decode_kernel, decode_kernels
from helpers.trace.links import marked_ancestor
from helpers.trace.model import Trace
from helpers.trace.overlap import union

from .critical_path import critical_path

COLUMNS = [
    "finding", "evidence", "saving_upper_bound_us", "saving_pct", "confidence", "lesson", "fix", "rule", "events",
    "time_us", "pct_of_step", "example", "example_ts_us", "saving_bytes", "ops_per_step"
]  # fmt: skip
CONFIDENCE = ("high", "medium", "low")
# Above this many events the critical path is walked over the last few steps only.
PATH_EVENT_LIMIT = 300_000


def example_name(name: str, limit: int = 80) -> str:
    """How a finding's evidence names its example event: a kernel by the short name the tables use, never cut
    mid-word (the ``example`` column keeps the whole name); a name still over `limit` characters ends in "..."."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    short = str(decode_kernel(name)["short_name"]) if name else name
    if len(short) <= limit:
        return short
    cut = short[: limit - 3]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut) + "..."


def typical_by_key(keys: list, values: np.ndarray, counted: np.ndarray | None = None) -> np.ndarray:
    """Each value replaced by the median of the `counted` values (all by default) that share its key; one not
    counted becomes 0. The same chain of operators recurs in every step; one occurrence slowed by the machine
    (a page fault, another process) must not stand for all."""
    values = np.asarray(values, dtype=float)
    if not len(values):
        return values
    counted = np.ones(len(values), dtype=bool) if counted is None else np.asarray(counted, dtype=bool)
    codes = pd.factorize(pd.Series(keys, dtype=object))[0]
    med = pd.Series(np.where(counted, values, np.nan)).groupby(codes).transform("median")
    return np.where(counted, med.to_numpy(dtype=float), 0.0)


class Findings(pd.DataFrame):
    """Ranked findings, one row each, largest possible saving first; a memory finding saves bytes, not time, so it
    ranks after every finding that saves time."""

    @property
    def _constructor(self):
        return Findings


@dataclass
class Context:
    """One trace, read once for every rule."""

    trace: Trace
    notes: list[str] = field(default_factory=list)
    path_steps: int = 0  # how many steps the critical path covers (set when it is walked)
    path_windows: pd.DataFrame = field(default_factory=pd.DataFrame)  # and those steps' start and end
    _path_cache: dict = field(default_factory=dict, repr=False)

    @cached_property
    def ev(self) -> pd.DataFrame:
        return self.trace.events

    @cached_property
    def t0(self) -> float:
        return float(self.ev["ts"].min())

    @cached_property
    def steps(self) -> pd.DataFrame:
        """Profiler steps (start/end in trace time); one pseudo-step over the whole trace when there are none."""
        ev = self.ev
        marks = ev[(~ev["on_device"]) & ev["name"].str.startswith(STEP_PREFIX) & (ev["step"] >= 0)]
        if "rank" in ev.columns and len(marks):
            marks = marks[marks["rank"] == marks["rank"].min()]
        if marks.empty:
            end = float((ev["ts"] + ev["dur"]).max())
            return pd.DataFrame({"step": [-1], "start": [self.t0], "end": [end]})
        return pd.DataFrame(
            {
                "step": marks["step"].to_numpy(),
                "start": marks["ts"].to_numpy(),
                "end": (marks["ts"] + marks["dur"]).to_numpy(),
            }
        ).sort_values("start", kind="stable")

    @property
    def n_steps(self) -> int:
        return len(self.steps)

    @cached_property
    def path_rank(self) -> int | None:
        """The rank whose critical path is walked: the lowest of a run; None when the events carry no rank (one
        process's trace, or several processes merged into one file without their ranks)."""
        ranks = self.ev["rank"][self.ev["rank"] >= 0] if "rank" in self.ev.columns else []
        return int(ranks.min()) if len(ranks) else None

    @cached_property
    def path(self) -> pd.DataFrame:
        """The critical path over the analysed steps (pieces; ``event`` = row of the events table)."""
        rank = self.path_rank
        steps = self.steps
        if len(self.ev) > PATH_EVENT_LIMIT and len(steps) > 3:
            # a long walk in Python on a huge trace: the last steps tell the same story
            keep = steps.iloc[-3:]
            self.notes.append(f"critical path walked over the last 3 of {len(steps)} steps ({len(self.ev):,} events)")
            parts = [critical_path(self.trace, step=int(s), rank=rank) for s in keep["step"]]
            self.path_steps, self.path_windows = len(parts), keep
            return pd.concat(parts, ignore_index=True)
        self.path_steps, self.path_windows = len(steps), steps
        if steps["step"].iloc[0] < 0:
            return critical_path(self.trace, rank=rank)
        parts = [critical_path(self.trace, step=int(s), rank=rank) for s in steps["step"]]
        return pd.concat(parts, ignore_index=True)

    def on_path_steps(self, rows: np.ndarray | list) -> np.ndarray:
        """Per row: it starts inside a step the critical path was walked over (on a huge trace, the last few);
        an occurrence outside them has no path time, so it cannot say what a typical one costs."""
        self.path  # noqa: B018  (walking the path decides its steps)
        ts = self.ev["ts"].to_numpy()[np.asarray(rows, dtype=np.int64)]
        w = self.path_windows
        i = np.searchsorted(w["start"].to_numpy(), ts, side="right") - 1
        ok = i >= 0
        ok[ok] = ts[ok] <= w["end"].to_numpy()[i[ok]]
        return ok

    def chain_keys(self, chains: list) -> list[tuple]:
        """A key per chain of operator rows: their names and input shapes. Each step runs the same chains;
        the same operators on other shapes are another chain."""
        names, dims = self.ev["name"].to_numpy(dtype=object), self.ev["input_dims"].to_numpy(dtype=object)
        return [(tuple(names[c]), tuple(map(str, dims[c]))) for c in chains]

    @cached_property
    def step_us(self) -> float:
        """Mean length of a step on the critical path (the window: host step and the device work it launched)."""
        return float(self.path["duration_us"].sum()) / max(self.path_steps, 1)

    def path_time(self, rows: np.ndarray | list, kinds: tuple[str, ...] | None = None) -> float:
        """Critical-path time held by the given event rows (optionally only pieces of these kinds), per step."""
        rows = np.unique(np.asarray(rows, dtype=np.int64))
        return float(self._path_time_per_event(kinds)[rows[rows >= 0]].sum())

    def _path_time_per_event(self, kinds: tuple[str, ...] | None) -> np.ndarray:
        """Per event row: the critical-path time it holds per step (pieces of `kinds` only); computed once per
        kinds, so that a rule asking for thousands of chains reads an array instead of the whole path each time."""
        key = tuple(kinds) if kinds is not None else None
        if key not in self._path_cache:
            p = self.path
            keep = p["event"].to_numpy() >= 0
            if kinds is not None:
                keep &= p["kind"].isin(kinds).to_numpy()
            per = np.bincount(p["event"].to_numpy()[keep], weights=p["duration_us"].to_numpy()[keep],
                              minlength=len(self.ev))  # fmt: skip
            self._path_cache[key] = per[: len(self.ev)] / max(self.path_steps, 1)
        return self._path_cache[key]

    def path_time_in(self, starts: np.ndarray, ends: np.ndarray, kinds: tuple[str, ...]) -> float:
        """Critical-path time of pieces of these kinds that falls inside intervals (trace-relative us), per step."""
        b_s, b_e = union(np.asarray(starts, dtype=float), np.asarray(ends, dtype=float))
        covered = self._covered_before(kinds)
        return float((covered(b_e) - covered(b_s)).sum()) / max(self.path_steps, 1)

    def _covered_before(self, kinds: tuple[str, ...]):
        """A function of times: how much of the path's pieces of `kinds` lies before each (trace-relative us).
        Built once per kinds, so that each interval asked about costs a binary search, not a pass over the path."""
        key = ("before", tuple(kinds))
        if key not in self._path_cache:
            p = self.path[self.path["kind"].isin(kinds)]
            a_s, a_e = union(p["start_us"].to_numpy(dtype=float), p["end_us"].to_numpy(dtype=float))
            done = np.concatenate([[0.0], np.cumsum(a_e - a_s)])

            def covered(t: np.ndarray) -> np.ndarray:
                i = np.searchsorted(a_s, t, side="right") - 1
                inside = np.clip(t - a_s[np.maximum(i, 0)], 0.0, (a_e - a_s)[np.maximum(i, 0)]) if len(a_s) else 0.0
                return np.where(i >= 0, done[np.maximum(i, 0)] + inside, 0.0)

            self._path_cache[key] = covered
        return self._path_cache[key]

    @cached_property
    def in_steps(self) -> np.ndarray:
        """Per event: it starts inside an analysed step (device work: its launch does)."""
        ev = self.ev
        ts = ev["ts"].to_numpy()
        launch = ev["launch"].to_numpy()
        when = np.where(launch >= 0, ts[np.maximum(launch, 0)], ts)
        s = self.steps
        i = np.searchsorted(s["start"].to_numpy(), when, side="right") - 1
        ok = i >= 0
        ok[ok] = when[ok] <= s["end"].to_numpy()[i[ok]]
        return ok

    @cached_property
    def work(self) -> pd.DataFrame:
        """Device work inside the steps, decoded: row, name, lane, start/end (trace time), dur, family, dtype, op."""
        ev = self.ev
        kinds = work_kinds(ev)
        rows = np.flatnonzero((kinds != "") & self.in_steps)
        names = ev["name"].to_numpy(dtype=object)[rows]
        uniq = pd.unique(names)
        dec = decode_kernels(list(uniq)) if len(uniq) else pd.DataFrame(columns=["family", "dtype"])
        info = {n: (f, d) for n, f, d in zip(uniq, dec["family"], dec.get("dtype", pd.Series([None] * len(uniq))))}
        lb = ev["launched_by"].to_numpy()[rows]
        ev_names = ev["name"].to_numpy(dtype=object)
        return pd.DataFrame(
            {
                "row": rows,
                "name": names,
                "kind": kinds[rows],
                "lane": ev["lane"].to_numpy(dtype=object)[rows],
                "start": ev["ts"].to_numpy()[rows],
                "dur": ev["dur"].to_numpy()[rows],
                "family": [info[n][0] for n in names],
                "dtype": [info[n][1] for n in names],
                "op": [ev_names[j] if j >= 0 else "" for j in lb],
                "op_row": lb,
            }
        )

    def host_rows(self, names: set[str] | None = None, prefix: tuple[str, ...] = ()) -> np.ndarray:
        """Host events inside the steps named in `names` or starting with one of `prefix`."""
        ev = self.ev
        name = ev["name"].to_numpy(dtype=object)
        host = ~ev["on_device"].to_numpy() & self.in_steps
        hit = np.zeros(len(ev), dtype=bool)
        if names:
            hit |= np.isin(name, list(names))
        if prefix:
            hit |= ev["name"].str.startswith(prefix).to_numpy()
        return np.flatnonzero(host & hit)

    def finding(
        self,
        rule: str,
        finding: str,
        rows: np.ndarray | list,
        time_us: float,
        saving_us: float,
        confidence: str,
        lesson: str,
        fix: str,
        detail: str = "",
        saving_bytes: float = 0.0,
        example_rows: np.ndarray | None = None,
    ) -> dict:
        """One finding; times per step, the saving capped at the step (`saving_bytes`: a memory finding's). Its
        example is the longest of `example_rows` (default: of `rows`, the events it counts)."""
        assert confidence in CONFIDENCE
        rows = np.asarray(rows, dtype=np.int64)
        step = self.step_us if self.step_us > 0 else float("nan")
        example, example_ts = "", float("nan")
        pick = rows if example_rows is None or not len(example_rows) else np.asarray(example_rows, dtype=np.int64)
        if len(pick):
            durs = self.ev["dur"].to_numpy()[pick]
            r = int(pick[int(np.argmax(durs))])
            example, example_ts = str(self.ev["name"].iat[r]), float(self.ev["ts"].iat[r] - self.t0)
        saving = float(min(max(saving_us, 0.0), self.step_us))
        pct = 100.0 * time_us / step
        head = (
            f"{len(rows):,} events"
            if saving_bytes > 0 and time_us == 0
            else f"{len(rows):,} events, {time_us:,.1f} us per step ({pct:.1f} % of the {self.step_us:,.0f} us step)"
        )
        evidence = (
            head
            + (f"; {detail}" if detail else "")
            + (f"; e.g. {example_name(example)}, starting {example_ts:,.0f} us into the trace" if example else "")
        )
        return {
            "finding": finding,
            "evidence": evidence,
            "saving_upper_bound_us": saving,
            "saving_pct": 100.0 * saving / step,
            "confidence": confidence,
            "lesson": lesson,
            "fix": fix,
            "rule": rule,
            "events": len(rows),
            "time_us": time_us,
            "pct_of_step": pct,
            "example": example,
            "example_ts_us": example_ts,
            "saving_bytes": float(max(saving_bytes, 0.0)),
            "ops_per_step": self.operators_under(rows) / self.per_step,
        }

    def under(self, rows: np.ndarray | list) -> np.ndarray:
        """Per event: it is one of `rows` or nested inside one of them (on the host)."""
        mark = np.zeros(len(self.ev), dtype=bool)
        mark[np.asarray(rows, dtype=np.int64)] = True
        if not mark.any():
            return mark
        return marked_ancestor(self.ev["parent"].to_numpy(), mark) >= 0

    def nearest_mark(self, mark: np.ndarray) -> np.ndarray:
        """Per event: the `mark` (>= 0) of itself or its nearest marked host ancestor, else -1. One pass over the
        events for all the marked rows together, where :meth:`under` is one pass per set."""
        mark = np.asarray(mark)
        nearest = marked_ancestor(self.ev["parent"].to_numpy(), mark >= 0)
        return np.where(nearest >= 0, mark[np.maximum(nearest, 0)], -1)

    def operators_under(self, rows: np.ndarray) -> int:
        """How many host operators (``cpu_op``) the given rows are or hold (nested ones included)."""
        if not len(rows):
            return 0
        return int((self.under(rows) & (self.ev["cat"] == "cpu_op").to_numpy()).sum())

    @property
    def steps_per_rank(self) -> float:
        """Divide one rank's (or one GPU's) totals over the analysed steps by this to get a per-step figure."""
        return float(max(self.n_steps, 1))

    @cached_property
    def n_ranks(self) -> int:
        """How many ranks the events come from (1 for one process's trace)."""
        if "rank" not in self.ev.columns:
            return 1
        return max(int(pd.unique(self.ev["rank"][self.ev["rank"] >= 0]).size), 1)

    @property
    def per_step(self) -> float:
        """Divide totals over every rank's events by this to get a figure per step of one rank (their mean): a
        run's ranks each run the step, and their sum would count it once per rank."""
        return self.steps_per_rank * self.n_ranks
