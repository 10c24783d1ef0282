"""Triton's CPU interpreter must accept a kernel's scalar as a loop bound under NumPy 2.4 on every Triton version
the course meets (3.6's interpreter turned a one-element array into an index with ``int()``, which NumPy 2.4
refuses: ``range(0, K, BLOCK)`` failed in the decode kernels' CPU runs on the GPU machine)."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from helpers.triton_env import ensure_interpreter_ready, triton_mode

pytestmark = pytest.mark.skipif(triton_mode() != "interpreter", reason="needs Triton's CPU interpreter")


def test_index_of_a_one_element_array_is_its_value_and_a_longer_one_is_refused():
    import triton.language as tl
    from triton.runtime import interpreter

    ensure_interpreter_ready()
    scope = interpreter._LangPatchScope()
    interpreter._patch_lang_tensor(tl.tensor, scope)
    try:
        index = tl.tensor.__dict__["__index__"]
        assert index(SimpleNamespace(handle=SimpleNamespace(data=np.array([7], dtype=np.int32)))) == 7
        assert index(SimpleNamespace(handle=SimpleNamespace(data=np.array(5, dtype=np.int64)))) == 5
        with pytest.raises(ValueError):
            index(SimpleNamespace(handle=SimpleNamespace(data=np.array([1, 2]))))
    finally:
        scope.restore()


def test_a_kernel_loops_up_to_a_runtime_bound():
    import triton
    import triton.language as tl

    ensure_interpreter_ready()

    @triton.jit
    def row_sum(x_ptr, out_ptr, K, BLOCK: tl.constexpr):
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for k0 in range(0, K, BLOCK):
            cols = k0 + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + cols, mask=cols < K, other=0.0)
        tl.store(out_ptr + tl.arange(0, 1), tl.sum(acc, axis=0) + tl.zeros([1], dtype=tl.float32))

    x = torch.arange(37, dtype=torch.float32)
    out = torch.zeros(1)
    row_sum[(1,)](x, out, x.numel(), BLOCK=16)
    assert out.item() == pytest.approx(float(x.sum()))
