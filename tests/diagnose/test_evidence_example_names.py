"""How a finding's evidence names its example event: the kernel's short name (as the tables write it), whole
microseconds, never a name cut mid-word; the finding's own columns keep the whole name and time."""

from __future__ import annotations

import pytest

from helpers.diagnose import rules_gpu
from helpers.diagnose.findings import Context, example_name
from tests.diagnose.synthetic import Kineto

# a real ATen kernel name, whose first 80 characters end inside "(anonymous namespace)"
CLONE = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clone_kernel("
    "at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#1}, std::array<char*, 2ul> >(int, "
    "at::native::(anonymous namespace)::launch_clone_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() "
    "const::{lambda()#1}, std::array<char*, 2ul>)"
)
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, std::array<char*, 2ul> >(int)"


def test_kernels_are_named_as_the_tables_name_them_and_operators_stay_as_they_are():
    assert example_name(CLONE) == "vectorized_elementwise_kernel"
    assert example_name(ADD) == "vectorized_elementwise_kernel<add>"
    assert example_name("aten::item") == "aten::item"
    long = "step " * 30
    assert example_name(long).endswith("step...") and len(example_name(long)) <= 80
    with pytest.raises(TypeError, match="name must be a string"):
        example_name(None)  # type: ignore[arg-type]


def test_a_findings_evidence_uses_the_short_name_and_whole_microseconds(tmp_path):
    k = Kineto()
    k.step(1, 0, 210)
    for i, kernel in enumerate([ADD, CLONE, ADD]):
        k.launch(kernel, 10 * i + 1, 5, 50.25 + 40 * i, 40 - 10 * (i != 1))
    [f] = rules_gpu.unfused_elementwise(Context(k.load(tmp_path)))
    assert "; e.g. vectorized_elementwise_kernel, starting " in f["evidence"]
    start = f["evidence"].rsplit("starting ", 1)[1].split(" us")[0]
    assert start.replace(",", "").isdigit() and "anonymous" not in f["evidence"]
    assert f["example"] == CLONE  # the finding's own column: the whole name, its meaning unchanged
