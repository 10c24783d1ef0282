"""Lesson 06: reading the variants' four times together (which contradict each other, and where the host's
work hid behind the GPU's back to back)."""

from __future__ import annotations

import pandas as pd

from .nb06_readings import TIE_SHARE


def disturbed_times(times: pd.DataFrame) -> dict[str, list[str]]:
    """Variants whose times contradict each other beyond the tie share, with what contradicts: issuing a call
    longer than a synchronised call (which includes issuing it), back to back slower than synchronised (calls that
    do not wait cannot be slower than calls that do), a graph replay slower than back to back (a replay removes the
    host's work), a synchronised call longer than issuing it plus its kernels (all a synchronised call waits for).
    Only something else on the GPU or host (other work, or its clocks) makes them so."""
    if not {"variant", "e2e_sync_us", "e2e_nosync_us"} <= set(times.columns):
        raise ValueError("times needs the columns variant, e2e_sync_us and e2e_nosync_us")
    out: dict[str, list[str]] = {}
    for r in times.itertuples():
        sync, b2b = float(r.e2e_sync_us), float(r.e2e_nosync_us)
        enq, graphed = (float(getattr(r, c, float("nan"))) for c in ("enqueue_us", "graphed_us"))
        why = []
        if enq > (1 + TIE_SHARE) * sync:
            why.append(f"{enq:.0f} us to issue a call against {sync:.0f} us synchronised")
        if b2b > (1 + TIE_SHARE) * sync:
            why.append(f"{b2b:.0f} us back to back against {sync:.0f} us synchronised")
        if graphed > (1 + TIE_SHARE) * b2b:
            why.append(f"{graphed:.0f} us replayed from a graph against {b2b:.0f} us back to back")
        kernels = float(getattr(r, "kernel_us", float("nan")))
        if sync > (1 + TIE_SHARE) * (enq + kernels):
            why.append(
                f"{sync:.0f} us synchronised against {enq:.0f} us to issue a call plus {kernels:.0f} us of kernels"
            )
        if why:
            out[str(r.variant)] = why
    return out


def hiding_sentence(times: pd.DataFrame) -> str:
    """Which variants' host work hid behind the GPU's back to back: within the tie share of the kernel time while
    the host issued a call faster than the GPU ran it. A variant whose host took at least as long to issue a call
    as its kernels took is host-bound back to back, even when that issue time lands near its kernel time. Variants
    disturbed (:func:`disturbed_times`) get no cause."""
    if not {"variant", "kernel_us", "e2e_nosync_us"} <= set(times.columns):
        raise ValueError("times needs the columns variant, kernel_us and e2e_nosync_us")
    t = times.dropna(subset=["kernel_us", "e2e_nosync_us"])
    if t.empty:
        raise ValueError("no variant has both a kernel time and a back-to-back time")
    disturbed = disturbed_times(t) if "e2e_sync_us" in t.columns else {}
    t = t[~t["variant"].astype(str).isin(disturbed)]
    has_issue = "enqueue_us" in t.columns
    # a host that needs as long to issue a call as the GPU needs to run it sets the pace of calls that do not wait
    host_bound = t["enqueue_us"] >= t["kernel_us"] if has_issue else pd.Series(False, index=t.index)
    within = t["e2e_nosync_us"] <= (1 + TIE_SHARE) * t["kernel_us"]
    hidden, paced = t[within & ~host_bound], t[within & host_bound]
    exposed = t[~within]
    parts = []

    def its(n: int) -> str:
        return "its" if n == 1 else "their"

    def shown(rows: pd.DataFrame, enqueue: bool) -> str:
        return ", ".join(
            f"{r.variant} ({r.e2e_nosync_us:.0f} us against {r.kernel_us:.0f} us of kernels"
            + (f", {r.enqueue_us:.0f} us to issue a call)" if enqueue else ")")
            for r in rows.itertuples()
        )

    if not hidden.empty:
        n = len(hidden)
        issue = ", the host issuing a call faster than the GPU ran it" if has_issue else ""
        parts.append(
            f"Back to back in this run, the host's work hid behind the GPU's for {', '.join(map(str, hidden['variant']))} "
            f"(within {TIE_SHARE:.0%} of {its(n)} kernel time{issue}): there the kernel time decides."
        )
    if not paced.empty:
        n = len(paced)
        parts.append(
            f"Back to back, {shown(paced, True)} came within {TIE_SHARE:.0%} of {its(n)} kernel time, yet {its(n)} "
            f"host took at least as long to issue a call as the GPU took to run it: host-bound, back to back "
            f"{'it runs' if n == 1 else 'they run'} at the host's issue time, and a faster kernel alone would not "
            "make a call faster."
        )
    explained = exposed if not has_issue else exposed[host_bound[exposed.index]]
    unexplained = exposed.drop(index=explained.index)
    if not explained.empty:
        n = len(explained)
        cause = (
            f"{its(n)} host took longer to issue a call than the GPU took to run it, so the host set the pace even "
            "without waiting: host-bound."
            if has_issue
            else f"back to back, {its(n)} calls took longer than {its(n)} kernels."
        )
        parts.append(f"It did not for {shown(explained, has_issue)}: {cause}")
    if not unexplained.empty:
        parts.append(
            f"Back to back, {shown(unexplained, True)} took longer than {its(len(unexplained))} kernels although the "
            "host issued a "
            "call faster than the GPU ran it: the host's work does not explain the excess, which something else on the "
            "GPU or host (other work, its clocks, or this run's noise) does."
        )
    if disturbed:
        shown_d = "; ".join(f"{v} ({', '.join(why)})" for v, why in disturbed.items())
        parts.append(
            f"The times of {shown_d} contradict each other: a synchronised call includes issuing it and waits for "
            "nothing but that and its kernels, calls that do not wait cannot be slower than calls that do, and a "
            "graph replay removes the host's work. Something else on "
            "the GPU or host (other work, or its clocks) disturbed them (too unsteady to tell, as lesson 04 says): they "
            "name no host cause and "
            "rank nothing."
        )
    return " ".join(parts)


def replay_under_kernels_sentence(times: pd.DataFrame) -> str:
    """How many variants replayed from a CUDA graph in less than their profiled kernel time, with the largest such
    gap, and why that is no contradiction; empty when none did."""
    if not {"variant", "kernel_us", "graphed_us"} <= set(times.columns):
        raise ValueError("times needs the columns variant, kernel_us and graphed_us")
    t = times.dropna(subset=["kernel_us", "graphed_us"])
    under = t[t["graphed_us"] < t["kernel_us"]]
    if under.empty:
        return ""
    r = under.loc[(under["kernel_us"] - under["graphed_us"]).idxmax()]
    n = len(under)
    return (
        f"{n} of {len(t)} variants replayed from a graph in less than their profiled kernel time (the most: "
        f"{r['variant']}, {r['graphed_us']:.1f} against {r['kernel_us']:.1f} us): the profiler lengthens each kernel "
        "slightly, so a replay, timed without it, can come in under the kernel sum it reports."
    )
