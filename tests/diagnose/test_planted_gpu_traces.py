"""The diagnosis on real H100 traces of planted training loops it was not written against (recorded with plain
torch.profiler by benchmarks/diagnose_planted.py; tests/data/planted_h100/recorded.json says what each plants)."""

from __future__ import annotations

import json
from functools import cache

import pytest

from helpers.diagnose import Findings, diagnose
from tests.support import DATA

FOLDER = DATA / "planted_h100"
LOOPS = json.loads((FOLDER / "recorded.json").read_text())["loops"]
# planted problems whose real cost in that loop is below other real problems' (the .item() of a step whose host
# spends 30 ms making the next batch: the GPU has long finished when it is read, so removing it saves little)
RANKED_LOWER = {("pageable_item", "host_sync")}
PLANTED_RULES = {r for loop in LOOPS.values() for r in loop["rules"]}


@cache
def _found(name: str) -> Findings:
    return diagnose(FOLDER / f"{name}.json.gz")


@pytest.mark.parametrize("name", sorted(LOOPS))
def test_every_planted_problem_is_in_the_top_3(name):
    top3 = list(_found(name)["rule"].head(3))
    for rule in LOOPS[name]["rules"]:
        if (name, rule) not in RANKED_LOWER:
            assert rule in top3, f"{name}: {rule} not in the top 3 {top3}"


def test_a_cheap_planted_sync_is_found_and_ranked_by_its_cost():
    found = _found("pageable_item")
    sync = found[found["rule"] == "host_sync"].iloc[0]
    assert "aten::item" in sync["evidence"] and sync["saving_upper_bound_us"] < 0.05 * found.attrs["step_us"]
    rules = list(found["rule"])
    assert rules.index("pageable_copies") < rules.index("host_sync")


def test_the_gpu_waiting_for_a_batch_made_on_the_host_names_the_operator():
    idle = _found("pageable_item").iloc[0]
    assert idle["rule"] == "gpu_idle_cpu_bound" and "aten::randn" in idle["finding"]
    assert idle["example"] == "aten::randn" and "DataLoader" in idle["fix"]


def test_the_gpu_waiting_on_the_allocator_says_so():
    idle = _found("empty_cache").iloc[0]
    assert idle["rule"] == "gpu_idle_cpu_bound" and "CUDA allocator" in idle["finding"]


def test_launch_bound_loops_keep_the_launch_advice():
    for name in ("tiny_batch", "optimizer"):
        idle = _found(name)
        idle = idle[idle["rule"] == "gpu_idle_cpu_bound"].iloc[0]
        assert idle["finding"].endswith("(launch-bound)") and "CUDA graph" in idle["fix"]


def test_the_clean_loop_raises_no_planted_kind_of_problem():
    found = _found("clean")
    assert not set(found["rule"].head(3)) & (PLANTED_RULES - {"gpu_idle_cpu_bound", "unfused_elementwise"})
    # what it does raise is real: launch gaps of a profiled step (no host work named), the loss's pointwise chain
    idle = found[found["rule"] == "gpu_idle_cpu_bound"].iloc[0]
    assert idle["finding"].endswith("(launch-bound)")


def test_a_third_party_trace_with_a_single_process_data_loader_names_it():
    """TensorBoard plugin's ResNet-50 sample (num_workers=0): the GPU waits while the main process loads a batch."""
    found = diagnose(DATA / "kineto__plugin_samples_resnet50_num_workers_0_worker0.pt.trace.json.gz")
    idle = found[found["rule"] == "gpu_idle_cpu_bound"].iloc[0]
    assert "enumerate(DataLoader)" in idle["finding"] and "num_workers > 0" in idle["fix"]
