"""helpers.lessons.rounds.take_turns: the one round-robin loop behind every lesson's timing rounds."""

from __future__ import annotations

import pytest

from helpers.lessons.rounds import take_turns


def _recording(calls: list[str], label: str, value):
    def measure():
        calls.append(label)
        return value

    return measure


def test_measures_take_turns_round_by_round():
    calls: list[str] = []
    out = take_turns({k: _recording(calls, k, v) for k, v in (("a", 1.0), ("b", 2), ("c", 3.5))}, rounds=3)
    assert calls == ["a", "b", "c"] * 3  # interleaved: never all of a's rounds before b's
    assert out == {"a": [1.0] * 3, "b": [2.0] * 3, "c": [3.5] * 3}
    assert all(isinstance(v, float) for values in out.values() for v in values)


def test_a_measure_returning_a_dict_gets_one_list_per_key():
    ticks = iter(range(100))
    out = take_turns({"x": lambda: {"sync_us": next(ticks), "nosync_us": 0.5}, "y": lambda: 7.0}, rounds=4)
    assert out == {"x": {"sync_us": [0.0, 1.0, 2.0, 3.0], "nosync_us": [0.5] * 4}, "y": [7.0] * 4}


def test_fewer_than_three_rounds_are_rejected():
    calls: list[str] = []
    for rounds in (2, 0, 2.5, True):
        with pytest.raises(ValueError, match="at least 3 rounds are needed to know the spread"):
            take_turns({"a": _recording(calls, "a", 1.0)}, rounds=rounds)
    with pytest.raises(ValueError, match="from 3 to 50"):
        take_turns({"a": _recording(calls, "a", 1.0)}, rounds=51, most=50)
    assert calls == []  # nothing measured before the arguments are known good


def test_a_measure_that_raises_propagates_with_its_label_named():
    calls: list[str] = []

    def broken():
        calls.append("broken")
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError, match="out of memory") as err:
        take_turns({"fine": _recording(calls, "fine", 1.0), "broken": broken}, rounds=3)
    assert any("'broken'" in note and "round 1 of 3" in note for note in err.value.__notes__)
    assert calls == ["fine", "broken"]  # stops at once


def test_bad_measures_and_results_say_what_was_wrong():
    with pytest.raises(TypeError, match="non-empty dict"):
        take_turns({}, rounds=3)
    with pytest.raises(TypeError, match="non-empty dict"):
        take_turns([lambda: 1.0], rounds=3)
    with pytest.raises(TypeError, match="a: expected a function of no arguments, got int"):
        take_turns({"a": 3}, rounds=3)
    with pytest.raises(TypeError, match="a: a measure must return a number .* got str"):
        take_turns({"a": lambda: "12 us"}, rounds=3)
    with pytest.raises(TypeError, match="a: a measure must return a number"):
        take_turns({"a": lambda: True}, rounds=3)
    with pytest.raises(ValueError, match="a: round 1 measured nan, not a finite number"):
        take_turns({"a": lambda: float("nan")}, rounds=3)
    shapes = iter([1.0, {"us": 1.0}, 1.0])
    with pytest.raises(TypeError, match="a: round 2 returned .* same kind of result every round"):
        take_turns({"a": lambda: next(shapes)}, rounds=3)
    keys = iter([{"us": 1.0}, {"ms": 1.0}])
    with pytest.raises(TypeError, match="a: round 2 returned \\['ms'\\]"):
        take_turns({"a": lambda: next(keys)}, rounds=3)
