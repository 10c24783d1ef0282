"""Lesson 09's checkers, each fed the taught answer, a naive one and the tempting wrong one, on the 2-GPU
reference traces (H200), read on this CPU; and the lesson's views of the profiler's cost and the noise."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.lessons import nb09

pytestmark = pytest.mark.skipif(
    nb09.reference_run("ddp_bucket25") is None, reason="the 2-GPU reference runs are not recorded"
)


@pytest.fixture(scope="module")
def h200():
    return {name: nb09.gpu_run(name) for name in ("ddp_bucket25", "ddp_bucket200", "ddp_one_bucket", "ddp_straggler")}


def _status(feedback) -> str:
    return feedback.status


def test_one_bucket_allreduces_the_given_cap_caps_the_first_bucket_too(h200):
    run, summary = h200["ddp_one_bucket"]
    c = nb09.collectives(run)
    measured = int(c[c["collective"] == "all_reduce"].groupby(["rank", "step"]).size().median())
    assert measured == summary["ddp"]["num_buckets"] == 1
    assert nb09.check("one_bucket_allreduces", 1, expected=measured).ok  # taught
    assert not nb09.check("one_bucket_allreduces", 2, expected=measured).ok  # the 1 MiB first bucket, wrongly
    assert not nb09.check("one_bucket_allreduces", 0, expected=measured).ok
    assert nb09.hint("one_bucket_allreduces").message.count("1 MiB") == 0


def test_more_than_a_third_hidden_is_judged_on_the_rank_that_waited_least_in_every_step(h200):
    run, summary = h200["ddp_bucket25"]
    ranks = nb09.per_rank(run, summary)
    least = ranks[ranks["waited_least"]].iloc[0]
    other = ranks[~ranks["waited_least"]].iloc[0]
    assert other["communication_ms"] > 5 * least["communication_ms"]  # the other rank's collectives hold waiting
    steps = nb09.hidden_by_step(run, summary)
    assert (steps["rank"] == least["rank"]).all() and len(steps) == len(run.steps)
    assert (steps["hidden_pct"] > 100 / 3).all()  # a third is clear of the step-to-step spread
    assert steps["hidden_pct"].min() < 50 < steps["hidden_pct"].max()  # half is not: one step hid less
    right = nb09.check_hidden(True, run, summary)
    assert right.ok
    assert f"{least['hidden_pct']:.0f}% hidden on rank {int(least['rank'])}" in right.message  # the table's number
    assert not nb09.check_hidden(False, run, summary).ok
    assert not nb09.check_hidden("True", run, summary).ok
    assert nb09.check_hidden(None, run, summary).status == "not answered yet"


def test_the_tail_is_part_of_the_exposed_all_reduce_time(h200):
    steps = nb09.hidden_by_step(*h200["ddp_bucket25"])
    assert (steps["tail_exposed_ms"] >= 0).all() and (steps["tail_exposed_ms"] <= steps["exposed_ms"]).all()
    assert (steps["hidden_pct"].between(0, 100)).all()


def test_hidden_steps_on_both_sides_of_a_third_are_a_tie(h200, monkeypatch):
    run, summary = h200["ddp_bucket25"]
    steps = nb09.hidden_by_step(run, summary)
    straddling = steps.assign(hidden_pct=np.linspace(20.0, 60.0, len(steps)))
    straddling.attrs.update(steps.attrs)
    monkeypatch.setattr(nb09, "hidden_by_step", lambda *_: straddling)
    for answer in (True, False):
        fb = nb09.check_hidden(answer, run, summary)
        assert fb.ok and "on both sides of a third" in fb.message
    assert not nb09.check_hidden(1, run, summary).ok


def test_the_profiled_step_is_set_beside_the_unprofiled_one(h200):
    ranks = nb09.per_rank(*h200["ddp_bucket25"])
    assert (ranks["profiled_step_ms"] > 1.3 * ranks["unprofiled_step_ms"]).all()
    assert ranks.loc[ranks["waited_least"], "gpu_waits_for_cpu_ms"].iloc[0] > 10


def test_one_bucket_change_taught_naive_and_tempting(h200):
    run25, s25 = h200["ddp_bucket25"]
    run1, s1 = h200["ddp_one_bucket"]
    terms = nb09.one_bucket_terms(run25, s25, run1, s1)
    measured = nb09.measured_change(s25, s1)
    assert not measured["within_noise"]
    check = lambda answer: nb09.check_one_bucket(answer, run25, s25, run1, s1)  # noqa: E731
    assert check(terms["total"]).ok  # taught: all-reduce - tail - compute given back
    assert check(measured["change_ms"]).ok  # the measured truth
    assert not check(terms["total"] + terms["tail_ms"]).ok  # naive: forgets the tail
    assert not check(terms["allreduce_ms"] - terms["tail_ms"]).ok  # forgets the compute given back
    replayed = nb09.predict_bucket_change(run25, 2000, bucket_bytes=s25["ddp"]["bucket_bytes"])
    assert not check(replayed.groupby("step")["predicted_change_us"].max().mean() / 1e3).ok  # tempting: the replay
    assert check(None).status == "not answered yet"
    assert "np.float64" not in check(terms["total"]).message
    # the expected change reads as the explanation writes its terms (one decimal, signed, in ms)
    assert f"the measurement agrees: {measured['change_ms']:+.1f} ms. " in check(terms["total"]).message


def test_the_large_bucket_change_is_beyond_the_middle_half_spread(h200):
    # the two runs' middle halves of steps are apart (46.38-46.49 against 45.38-45.82 ms): not a tie by the one rule
    change = nb09.measured_change(h200["ddp_bucket25"][1], h200["ddp_bucket200"][1])
    assert not change["within_noise"] and change["change_ms"] < 0 and change["noise_ms"] < abs(change["change_ms"])
    with pytest.raises(ValueError, match="summary"):
        nb09.measured_change({}, h200["ddp_bucket200"][1])


def test_straggler_rank_and_cost_taught_naive_and_tempting(h200):
    slow_run, slow_summary = h200["ddp_straggler"]
    table = nb09.rank_table(slow_run)
    truth = slow_summary["straggler"]["rank"]
    taught_rank = int(table.loc[table["communication_us"].idxmin(), "rank"])
    assert nb09.check("straggler_rank", taught_rank, expected=truth).ok
    assert not nb09.check("straggler_rank", 1 - truth, expected=truth).ok
    assert not nb09.check("straggler_rank", "rank 0", expected=truth).ok
    base = h200["ddp_bucket25"][1]
    taught = (table["start_idle_us"].max() - table["start_idle_us"].min()) / 1e3
    assert nb09.check_straggler_cost(taught, slow_summary, base).ok
    naive = (table["communication_us"].max() - table["communication_us"].min()) / 1e3
    assert not nb09.check_straggler_cost(naive, slow_summary, base).ok  # the others' extra communication
    cpu_config = nb09.configurations("cpu", quick=True)["ddp_straggler"]["straggler_ms"]
    assert not nb09.check_straggler_cost(cpu_config, slow_summary, base).ok  # the value on screen for the CPU run
    measured = nb09.measured_change(base, slow_summary)["change_ms"]
    assert (
        f"({measured:.1f} ms, timed without the profiler)"
        in nb09.check_straggler_cost(taught, slow_summary, base).message
    )
    assert f"agrees: {measured:.1f} ms. " in nb09.check_straggler_cost(taught, slow_summary, base).message


def test_fsdp_exercises_on_the_h200_runs():
    run, summary = nb09.gpu_run("fsdp_prefetch")
    ddp = nb09.gpu_run("ddp_bucket25")[1]
    layers = 8  # the reference model, 8x2048
    c = nb09.collectives(run)
    gathers = int(c[c["collective"] == "all_gather"].groupby(["rank", "step"]).size().median())
    assert nb09.check("all_gathers_per_step", 2 * layers + 1, expected=gathers).ok
    for wrong in (2 * layers, layers + 1, 2 * layers + 2):
        assert not nb09.check("all_gathers_per_step", wrong, expected=gathers).ok
    state = lambda s: max(r["state_bytes"]["total"] for r in s["ranks"])  # noqa: E731
    fraction = state(summary) / state(ddp)
    assert nb09.check("fsdp_state_fraction", 1 / 2, expected=fraction).ok
    for wrong in (1.0, 0.25, 0.45):
        assert not nb09.check("fsdp_state_fraction", wrong, expected=fraction).ok


def test_hta_differences_drop_the_last_step_and_cut_to_whole_microseconds(h200):
    table = nb09.hta_differences(h200["ddp_bucket25"][0])
    assert list(table["rank"]) == [0, 1]
    assert (table["without_last_step_us"] < 0.8 * table["kernel_us"]).all()  # one of three steps gone
    assert (table["as_hta_us"] < table["without_last_step_us"]).all()
    assert (table["without_last_step_us"] - table["as_hta_us"] < 0.05 * table["kernel_us"]).all()


def test_param_comms_say_what_each_collective_call_was():
    folder = nb09.reference_run("ddp_bucket25")
    table = nb09.param_comms(folder, rank=1, limit=3)
    assert list(table["collective"]) == ["allreduce"] * 3 and set(table["dtype"]) == {"BFloat16"}
    with pytest.raises(FileNotFoundError, match="rank 5"):
        nb09.param_comms(folder, rank=5)
    with pytest.raises(FileNotFoundError, match="launch.log"):
        nb09.nccl_log_lines(folder.parent)
