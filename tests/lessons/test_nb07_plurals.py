"""A chain tree over one call says "1 call", not "1 call(s)" (H100 run 17 review, row N6, lesson 07 cell 32)."""

import torch

import helpers


def test_a_chain_tree_over_one_call_is_singular():
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    one = helpers.chain_tree(helpers.profile(torch.mm, a, b, steps=1, warmup=0), "aten::mm")
    assert "merged over 1 call" in repr(one) and "call(s)" not in repr(one) and "1 calls" not in repr(one)
    two = helpers.chain_tree(helpers.profile(torch.mm, a, b, steps=2, warmup=0), "aten::mm")
    assert "merged over 2 calls" in repr(two)
