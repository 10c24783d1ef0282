"""Host operators of a mixture-of-experts step (routing, scatter back, grouped GEMMs) get a family on CPU traces."""

from __future__ import annotations

import pytest

from helpers.trace.aten_ops import aten_family, computes


@pytest.mark.parametrize(
    "op, family",
    [
        ("aten::_grouped_mm", "gemm"),
        ("aten::_scaled_grouped_mm", "gemm"),
        ("aten::argsort", "reduction"),
        ("aten::bincount", "reduction"),
        ("aten::nonzero", "reduction"),
        ("aten::scatter_add_", "elementwise"),
        ("aten::index_add_", "elementwise"),
        ("aten::_index_put_impl_", "elementwise"),
        ("aten::floor_divide", "elementwise"),
        ("aten::eq.Tensor", "elementwise"),
        ("aten::repeat_interleave", "copy"),
    ],
)
def test_moe_host_ops_have_a_family(op, family):
    assert aten_family(op) == family and computes(op)


def test_views_stay_without_a_family():
    assert aten_family("aten::view") == "unknown" and not computes("aten::view")
