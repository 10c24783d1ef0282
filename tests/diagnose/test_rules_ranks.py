"""The NCCL-waiting rule on a hand-built two-rank run (one rank late by a known time) and on the
two-H200 reference runs: the straggler run names the rank that waited, a run without one stays quiet."""

from __future__ import annotations

import gzip
import json

import pytest

from helpers.diagnose import rules_ranks
from helpers.diagnose.diagnose import run_rules
from helpers.diagnose.findings import Context
from helpers.paths import TRACES_DIR
from helpers.trace.ranks import load_traces
from tests.diagnose.synthetic import Kineto

NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
GEMM = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"


def _run(tmp_path, late_us: float, steps: int = 3, busy_start: bool = False):
    """Two ranks; per step a 200 us GEMM then an all-reduce of 100 us. Rank 1 starts its work `late_us`
    into the step, so rank 0's all-reduce starts when its GEMM ends and spins `late_us` for rank 1.
    Both hosts copy a batch for `late_us`: rank 0 after its launches; rank 1 sleeps instead (its host idle, the
    straggler's cause), or with `busy_start` copies first (then it is late for no reason of its own)."""
    files = []
    for rank in (0, 1):
        k = Kineto()
        late = late_us if rank == 1 else 0.0
        for s in range(steps):
            base = 2000.0 * s
            k.step(s + 1, base, 1000)
            if late_us and (rank == 0 or busy_start):
                k.cpu("aten::copy_", base + 50 if rank == 0 else base, late_us)
            k.cpu("aten::mm", base + late, 20)
            k.launch(GEMM, base + late + 2, 5, base + late + 10, 200)
            k.cpu("record_param_comms", base + late + 30, 10)
            start = base + 210 + late
            k.launch(NCCL, base + late + 31, 5, start, late_us - late + 100, stream=20,
                     **{"In msg nelems": 1 << 20, "Out msg nelems": 1 << 20, "dtype": "BFloat16"})  # fmt: skip
        doc = {"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2},
               "baseTimeNanoseconds": 1_700_000_000_000_000_000}  # fmt: skip
        path = tmp_path / f"rank{rank}.json.gz"
        path.write_bytes(gzip.compress(json.dumps({"traceEvents": k.events, **doc}).encode()))
        files.append(path)
    return load_traces(files)


def test_the_rank_that_waited_and_for_whom(tmp_path):
    run = _run(tmp_path, late_us=300)
    waits = rules_ranks.collective_waits(run)
    assert len(waits) == 6
    assert waits.loc[waits["rank"] == 0, "wait_us"].tolist() == pytest.approx([300] * 3)
    assert waits.loc[waits["rank"] == 0, "exposed_wait_us"].tolist() == pytest.approx([300] * 3)
    assert (waits.loc[waits["rank"] == 1, "wait_us"] == 0).all() and (waits["waited_for"] == 1).all()
    [f] = rules_ranks.nccl_waiting(Context(run))
    assert f["finding"].startswith("Rank 0 waits in NCCL for rank 1")
    assert f["time_us"] == pytest.approx(300) and f["saving_upper_bound_us"] == pytest.approx(300)
    assert f["events"] == 3 and f["example"] == NCCL and f["lesson"] == "09" and f["confidence"] == "high"


def test_balanced_ranks_and_single_traces_find_nothing(tmp_path):
    assert rules_ranks.nccl_waiting(Context(_run(tmp_path, late_us=0))) == []
    single = Kineto()
    single.step(1, 0, 100)
    single.launch(NCCL, 0, 5, 10, 50)
    assert rules_ranks.nccl_waiting(Context(single.load(tmp_path))) == []


def _reference(name: str):
    return load_traces(sorted((TRACES_DIR / name).glob("rank*.json.gz")))  # the folder also holds summary.json


def test_reference_straggler_run_names_the_waiting_rank():
    # rank 1 sleeps 20 ms before each step (summary.json: straggler rank 1): rank 0 spins in its all-reduces
    run = _reference("h200x2_ddp_straggler")
    found, ctx = run_rules(run)
    assert found["rule"].iloc[0] == "nccl_waiting"
    top = found.iloc[0]
    assert top["finding"].startswith("Rank 0 waits in NCCL for rank 1")
    # the bound is what rank 1 spends that rank 0 does not (its host sits idle): the planted sleep
    assert top["saving_upper_bound_us"] == pytest.approx(20_000, rel=0.1)
    assert "host time with no operator running" in top["evidence"]
    assert top["example"].startswith("ncclDevKernel_AllReduce") and top["example"] in set(run.events["name"])
    assert top["time_us"] <= ctx.step_us


@pytest.mark.parametrize(
    "name",
    ["h200x2_ddp_one_bucket", "h200x2_ddp_bucket25", "h200x2_ddp_bucket200", "h200x2_fsdp_explicit",
     "h200x2_fsdp_no_prefetch", "h200x2_fsdp_prefetch"],
)  # fmt: skip
def test_reference_runs_without_a_straggler_stay_quiet(name):
    """One rank of these runs waits in NCCL for the other (phase offsets, a slower host), but the rank it waits
    for does nothing the waiter does not: no straggler to balance, no finding."""
    found, _ = run_rules(_reference(name))
    assert "nccl_waiting" not in set(found["rule"]) and not found.attrs["skipped"]


def test_a_wait_the_late_rank_does_not_explain_is_no_finding(tmp_path):
    """Rank 1 is late, but its host does no more than rank 0's (the same copy, before its launches rather than
    after): the wait is real, a straggler to balance is not."""
    run = _run(tmp_path, late_us=300)
    assert rules_ranks.rank_load(run).groupby("rank")["host_idle_us"].mean().diff().iloc[-1] == pytest.approx(300)
    assert len(rules_ranks.nccl_waiting(Context(run))) == 1
    busy = _run(tmp_path, late_us=300, busy_start=True)
    assert rules_ranks.nccl_waiting(Context(busy)) == []
