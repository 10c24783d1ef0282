"""A check's explanation starts a sentence with a capital, except where it starts with a name from the code: the
H100 run J printed "Lm_head takes 22% of the step" and "DX = dY @ W"."""

from __future__ import annotations

import pytest

from helpers import nb04, nb08
from helpers.lessons.wording import sentence_start, starts_with_code


@pytest.mark.parametrize("text", ["lm_head takes 22% of the step", "dX = dY @ W reads", "q, k, v, o in the attention",
                                  "dynamic=False compiles", "torch.compile fuses", "dY.T @ X"])  # fmt: skip
def test_a_name_from_the_code_keeps_its_case(text):
    assert starts_with_code(text) and sentence_start(text) == text


@pytest.mark.parametrize(("text", "capital"), [("the fix", "The fix"), ("a tie", "A tie"), ("for-loop is", "For-loop is"),
                                               ("fused is faster", "Fused is faster"), ("", "")])  # fmt: skip
def test_prose_starts_with_a_capital(text, capital):
    assert sentence_start(text) == capital


def test_checks_of_lessons_04_and_08_write_identifiers_as_the_code_does():
    nb08.reset()
    part = nb08.check("variant_part", "lm_head", "lm_head", details={"part": "lm_head", "share": 0.22})
    assert "lm_head takes 22%" in part.message and "Lm_head" not in part.message
    layouts = nb08.check("backward_layouts", {"NN", "NT"}, {"NN", "NT"})
    assert "dX = dY @ W" in layouts.message and "DX" not in layouts.message
    gemms = nb08.check("gemms", 113, 113)
    assert "q, k, v, o" in gemms.message
    nb04.reset()
    static = nb04.check("compiles_static", 4, 4)
    assert "dynamic=False compiles" in static.message and "Dynamic=False" not in static.message
    with pytest.raises(TypeError):
        starts_with_code(None)  # type: ignore[arg-type]
