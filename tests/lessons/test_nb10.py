"""Lesson 10's own code (helpers.nb10): the planted loop, the timing rounds, and every checker with the taught
answer, a naive answer and the tempting wrong one."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from helpers.lessons import nb10


@pytest.fixture(autouse=True)
def _fresh_book():
    nb10.reset()
    yield
    nb10.reset()


BEFORE = [2400.0, 2450.0, 2500.0, 2420.0, 2480.0]
AFTER = [1800.0, 1790.0, 1850.0, 1820.0, 1810.0]  # a saving of about 640 us, the rounds allow 550 to 710


FINDINGS = pd.DataFrame(
    {"rule": ["unfused_optimizer", "host_pointwise_chains"], "saving_upper_bound_us": [1600.0, 900.0]}
)


def test_a_predicted_saving_is_checked_against_the_taught_prediction_and_the_measurement_reported():
    ratio = 0.38  # the unprofiled/profiled step ratio
    taught = nb10.check_saving("first_saving", 1600.0 * ratio, BEFORE, AFTER, FINDINGS, ratio)
    assert (
        taught.status == "right" and "Hint" not in taught.message and "Measured without the profiler" in taught.message
    )
    naive = nb10.check_saving("first_saving", 1600.0, BEFORE, AFTER, FINDINGS, ratio)  # the profiled bound as it stands
    assert naive.status == "wrong" and "Hint:" in naive.message and "unprofiled_ratio" in naive.message
    tempting = nb10.check_saving("first_saving", 0.0, BEFORE, AFTER, FINDINGS, ratio)  # "the profiler says so"
    assert tempting.status == "wrong"
    assert nb10.check_saving("first_saving", None, BEFORE, AFTER, FINDINGS, ratio).status == "not answered yet"
    assert nb10.check_saving("first_saving", "600", BEFORE, AFTER, FINDINGS, ratio).status == "wrong"


def test_a_noisy_measurement_never_decides_the_grade():
    """The same taught prediction is right whatever a busy machine measured: the measurement is reported, not graded."""
    wild_after = [100.0, 2600.0, 2300.0, 900.0, 2450.0]
    fb = nb10.check_saving("first_saving", 1600.0 * 0.38, BEFORE, wild_after, FINDINGS, 0.38)
    assert fb.status == "right"
    # no finding for .item() on a CPU: the diagnosis predicts 0, whatever the rounds say
    fb = nb10.check_saving("item_saving", 0.0, BEFORE, AFTER, FINDINGS, 0.38, problem="item", details={"why": "none"})
    assert fb.status == "right" and "none" in fb.message
    assert nb10.check_saving("item_saving", 600.0, BEFORE, AFTER, FINDINGS, 0.38, problem="item").status == "wrong"


def test_the_costliest_accepts_a_runner_up_only_inside_the_noise():
    assert nb10.check_costliest("optimizer", FINDINGS).status == "right"
    assert nb10.check_costliest("pointwise", FINDINGS).status == "wrong"  # 900 of 1600: a real difference
    close = FINDINGS.assign(saving_upper_bound_us=[1600.0, 1500.0])
    assert nb10.check_costliest("pointwise", close).status == "too close to call"
    assert nb10.check_costliest("item", close).status == "wrong"  # the tempting one on a CPU
    assert nb10.check_costliest(3, close).status == "wrong"


def test_profiled_against_unprofiled_is_a_tie_when_the_ranges_overlap():
    assert nb10.profiled_is_slower([2400, 2450, 2500], [6400, 6500, 6600]) is True
    assert nb10.profiled_is_slower([6400, 6500, 6600], [2400, 2450, 2500]) is False
    assert nb10.profiled_is_slower([2400, 2450, 6500], [6400, 6500, 6600]) is True  # one slow round: no tie
    tie = nb10.profiled_is_slower([2400, 6450, 6500], [6400, 6500, 6600])
    assert isinstance(tie, nb10.Tie)
    for answer in (True, False):  # both accepted, and the rounds shown
        fb = nb10.check("profiled_slower", answer, tie, details={"ratio": 2.5, "ops": 3000})
        assert fb.ok and "middle half" in fb.message
    assert nb10.check("profiled_slower", True, True, details={"ratio": 2.5, "ops": 3000}).status == "right"
    assert nb10.check("profiled_slower", False, True, details={"ratio": 2.5, "ops": 3000}).status == "wrong"
    with pytest.raises(ValueError, match="at least 3 rounds"):
        nb10.profiled_is_slower([1.0], [2.0, 3.0, 4.0])


def test_the_inflated_finding_of_the_resnet_trace():
    found = nb10.diagnose(nb10.third_party_trace("resnet50"))
    rule, times = nb10.most_inflated(found, n=3)
    assert rule == "unfused_optimizer" and times > 10
    assert nb10.check("suspicious_rule", "unfused_optimizer", rule, details={"ratio": times}).status == "right"
    # the tempting wrong one: the top finding, the largest bound in absolute terms
    assert nb10.check("suspicious_rule", found["rule"].iloc[0], rule, details={"ratio": times}).status == "wrong"
    with pytest.raises(ValueError, match="must be one of"):
        nb10.third_party_trace("vgg")


def test_the_planted_loop_and_its_diagnosis():
    torch.set_num_threads(1)
    loop = nb10.build_loop(device="cpu")
    trace = nb10.profile(loop.step, steps=3, warmup=1, grad=True, label="planted")
    found = nb10.diagnose(trace)
    top = nb10.planted_problem(found["rule"].iloc[0])
    assert top in ("optimizer", "pointwise")  # the two planted problems a CPU can see
    assert nb10.check_costliest("item", found, details={"why": ""}).status == "wrong"  # the tempting one on a CPU
    assert {"unfused_optimizer", "host_pointwise_chains"} <= set(found["rule"].head(3))
    assert nb10.predicted_saving(found, "item", 0.5) == 0.0  # no synchronisation on a CPU
    assert nb10.predicted_saving(found, "optimizer", 0.5) == pytest.approx(
        0.5 * found.set_index("rule").loc["unfused_optimizer", "saving_upper_bound_us"]
    )
    assert len(nb10.profiled_step_us(trace)) == 3
    assert nb10.operators_per_step(trace) > 1000  # the step is made of many small operators
    with pytest.raises(ValueError, match="problem must be one of"):
        nb10.predicted_saving(found, "dataloader", 1.0)
    with pytest.raises(ValueError, match="unknown problems"):
        nb10.build_loop({"batch"}, device="cpu")


def test_fixed_loops_compute_the_same_thing():
    planted, fixed = nb10.build_loop(device="cpu"), nb10.build_loop(set(nb10.PROBLEMS), device="cpu")
    planted.step(), fixed.step()
    assert isinstance(planted.losses[0], float) and isinstance(fixed.losses[0], torch.Tensor)
    assert planted.losses[0] == pytest.approx(float(fixed.losses[0]), rel=1e-5)
    rounds = nb10.step_rounds({"planted": planted, "fixed": fixed.step}, rounds=3, repeats=1)
    assert set(rounds) == {"planted", "fixed"} and all(len(v) == 3 for v in rounds.values())
    with pytest.raises(TypeError, match="Loop or a function"):
        nb10.step_rounds({"x": 3})


def test_the_open_exercise_profiles_the_learners_step():
    model = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(6)])
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, foreach=False)
    x = torch.randn(4, 16)

    def my_step():
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()

    fb, found = nb10.check_my_model(my_step, "unfused_optimizer")
    assert fb.status == "right" and found is not None
    assert nb10.check_my_model(my_step, "none")[0].status == "wrong"
    assert nb10.check_my_model(my_step, 3)[0].status == "wrong"
    missing, none = nb10.check_my_model(None, None)
    assert missing.status == "not answered yet" and none is None and "Hint" not in missing.message
    with pytest.raises(TypeError, match="function of no arguments"):
        nb10.check_my_model("my_step", "none")


def test_every_explanation_formats_with_its_details():
    details = {"why": "x", "ratio": 2.0, "ops": 3000}
    for key, ex in nb10.EXERCISES.book.items():
        ex.explain.format(**details)
        assert ex.hint, key


def test_no_finding_predicts_no_saving():
    """Once every problem the diagnosis sees is fixed its table is empty, and the prediction is 0, not an error."""
    empty = pd.DataFrame(columns=["rule", "saving_upper_bound_us"])
    assert nb10.predicted_saving(empty, "item", 0.4) == 0.0
