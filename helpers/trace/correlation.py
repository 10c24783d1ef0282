"""Match each device event to the host call that launched it, by correlation id within its process (ids
repeat across merged processes); a reused id matches the latest earlier launch; a graph launch all its kernels."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .categories import GRAPH_LAUNCH_PATTERN


@dataclass
class LaunchMatch:
    """The result of :func:`match_launches` for the device rows it was given."""

    launch: np.ndarray  # row of the launch call per device row, -1 when none
    owner: dict[int, int] = field(default_factory=dict)  # device pid code -> host pid code
    ambiguous: int = 0  # device events whose id had several launch calls in their process
    example: str = ""  # one such id, in words


def _last_at_or_before(keys_l: np.ndarray, ts_l: np.ndarray, keys_q: np.ndarray, ts_q: np.ndarray) -> np.ndarray:
    """For each query, the index of the latest launch with the same key starting at or before it;
    else the earliest launch with that key; -1 when the key has no launch. Vectorised, O(n log n)."""
    n_l = len(keys_l)
    keys = np.concatenate([keys_l, keys_q])
    ts = np.concatenate([ts_l, ts_q])
    is_query = np.concatenate([np.zeros(n_l, dtype=np.int8), np.ones(len(keys_q), dtype=np.int8)])
    order = np.lexsort((is_query, ts, keys))  # by key, then time; a launch before a query at the same time
    k_sorted = keys[order]
    pos = np.arange(len(order))
    launch_here = is_query[order] == 0
    before = np.maximum.accumulate(np.where(launch_here, pos, -1))
    after = np.minimum.accumulate(np.where(launch_here, pos, len(order))[::-1])[::-1]
    qpos = np.flatnonzero(~launch_here)
    b, a = before[qpos], after[qpos]
    ok_b = (b >= 0) & (k_sorted[np.maximum(b, 0)] == k_sorted[qpos])
    ok_a = (a < len(order)) & (k_sorted[np.minimum(a, len(order) - 1)] == k_sorted[qpos])
    chosen = np.where(ok_b, b, np.where(ok_a, a, -1))
    result = np.full(len(keys_q), -1, dtype=np.int64)
    query_index = order[qpos] - n_l
    hit = chosen >= 0
    result[query_index[hit]] = order[chosen[hit]]
    return result


def match_launches(
    corr: np.ndarray,
    corr_ok: np.ndarray,
    pid: np.ndarray,
    ts: np.ndarray,
    names: np.ndarray,
    launch_rows: np.ndarray,
    dev_rows: np.ndarray,
) -> LaunchMatch:
    """Launch call (row index, -1 for none) of each of `dev_rows`, among the candidate `launch_rows`."""
    launch = np.full(len(dev_rows), -1, dtype=np.int64)
    want = np.flatnonzero(corr_ok[dev_rows])
    if len(want) == 0 or len(launch_rows) == 0:
        return LaunchMatch(launch)
    q_rows = dev_rows[want]
    l_corr, q_corr = corr[launch_rows], corr[q_rows]
    l_pid = pid[launch_rows]
    host_pids = np.unique(l_pid)
    by_corr = pd.Index(l_corr)
    if len(host_pids) == 1 and by_corr.is_unique:  # the usual trace: one lookup
        pos = by_corr.get_indexer(q_corr)
        launch[want[pos >= 0]] = launch_rows[pos[pos >= 0]]
        return LaunchMatch(launch)  # one host process: nothing to keep apart

    owner = _owners(l_corr, l_pid, q_corr, pid[q_rows]) if len(host_pids) > 1 else {}
    q_owner = owner_of(owner, pid[q_rows])
    # one dense code per correlation id over launches and queries, then a key per (process, id);
    # a device whose process is unknown matches launches of any process (key without the process)
    corr_codes, uniques = pd.factorize(np.concatenate([l_corr, q_corr]))
    span = max(len(uniques), 1)
    lc, qc = corr_codes[: len(l_corr)].astype(np.int64), corr_codes[len(l_corr) :].astype(np.int64)
    known = q_owner >= 0
    result = np.full(len(q_rows), -1, dtype=np.int64)
    if known.any():
        found = _last_at_or_before(
            l_pid * span + lc, ts[launch_rows], q_owner[known] * span + qc[known], ts[q_rows[known]]
        )
        result[known] = found
    if (~known).any():
        result[~known] = _last_at_or_before(lc, ts[launch_rows], qc[~known], ts[q_rows[~known]])
    hit = result >= 0
    launch[want[hit]] = launch_rows[result[hit]]

    # ids that several launch calls share (of the device's process; of any process when it is unknown)
    key_l = l_pid * span + lc
    touched = np.zeros(len(q_rows), dtype=bool)
    for launch_keys, query_keys, mask in ((key_l, q_owner * span + qc, known), (lc, qc, ~known)):
        index = pd.Index(launch_keys)
        repeated = index[index.duplicated(keep=False)].unique().to_numpy()
        if len(repeated) and mask.any():
            touched[mask] = np.isin(query_keys[mask], repeated)
    ambiguous, example = int(touched.sum()), ""
    if ambiguous:
        first = int(np.flatnonzero(touched)[0])
        same = lc == qc[first]
        if known[first]:
            same &= l_pid == q_owner[first]
        calls = launch_rows[same]
        example = (
            f"correlation id {int(q_corr[first])} is used by {len(calls)} launch calls "
            f"({', '.join(sorted(set(map(str, names[calls]))))})"
            + (" of one process" if known[first] or len(host_pids) == 1 else "")
        )
    return LaunchMatch(launch, owner, ambiguous, example)


def owner_of(owner: dict[int, int], pids: np.ndarray) -> np.ndarray:
    """The host process code of each device process code in `pids` (-1 where unknown), vectorised."""
    if not owner or len(pids) == 0:
        return np.full(len(pids), -1, dtype=np.int64)
    table = np.full(max(max(owner), int(pids.max())) + 1, -1, dtype=np.int64)
    table[list(owner)] = list(owner.values())
    return table[pids]


def _owners(l_corr: np.ndarray, l_pid: np.ndarray, q_corr: np.ndarray, q_pid: np.ndarray) -> dict[int, int]:
    """Device process -> the host process that launches its work, voted by ids found in one process only."""
    pairs = pd.DataFrame({"corr": l_corr, "pid": l_pid}).drop_duplicates()
    per_id = pairs.groupby("corr")["pid"].agg(["size", "first"])
    single = per_id[per_id["size"] == 1]["first"]
    host = pd.Series(q_corr).map(single)
    votes = pd.DataFrame({"dev": q_pid, "host": host.to_numpy()}).dropna()
    if votes.empty:
        return {}
    counts = votes.groupby(["dev", "host"]).size().reset_index(name="n")
    best = counts.sort_values("n", ascending=False, kind="stable").drop_duplicates("dev")
    return {int(d): int(h) for d, h in zip(best["dev"], best["host"])}


def graph_launched(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """For each device row: True when its launch call ran a captured graph (or launched several device events)."""
    launch = events["launch"].to_numpy()[rows]
    out = np.zeros(len(rows), dtype=bool)
    has = np.flatnonzero(launch >= 0)
    if not len(has):
        return out
    calls, which, shared = np.unique(launch[has], return_inverse=True, return_counts=True)
    call_names = pd.Series(events["name"].to_numpy(dtype=object)[calls])
    graph = call_names.str.contains(GRAPH_LAUNCH_PATTERN, regex=True).to_numpy() | (shared > 1)
    out[has] = graph[which.reshape(-1)]
    return out
