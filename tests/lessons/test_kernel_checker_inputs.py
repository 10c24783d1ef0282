"""Lesson 06's kernel checker cannot be fooled by a kernel that rewrites its inputs (issue 23): the
reference is computed before the learner's launcher runs, from copies, and changed inputs are reported."""

from __future__ import annotations

import torch

from helpers.lessons import kernel_exercises as ke
from helpers.mlp.model import geglu_reference


def right(gate, up, out):  # a correct launcher, in plain torch (the checker takes any callable)
    out.copy_(geglu_reference(gate.float(), up.float()).to(out.dtype))


def test_a_right_launcher_passes():
    assert ke.check_geglu_kernel(right).status == "right"


def test_zeroing_inputs_and_output_does_not_pass():
    def cheat(gate, up, out):  # geglu(0) * 0 == 0: a reference computed afterwards would agree
        gate.zero_()
        up.zero_()
        out.zero_()

    feedback = ke.check_geglu_kernel(cheat)
    assert feedback.status == "wrong" and "changed its input gate and up" in feedback.message


def test_a_right_answer_that_then_overwrites_an_input_is_reported():
    def sneaky(gate, up, out):
        right(gate, up, out)
        up.fill_(float("nan"))

    feedback = ke.check_geglu_kernel(sneaky)
    assert feedback.status == "wrong" and "changed its input up" in feedback.message


def test_making_the_inputs_match_a_wrong_output_does_not_pass():
    def rewrite(gate, up, out):  # out = up, then the inputs rewritten so that a later reference would equal it
        out.copy_(up)
        gate.fill_(10.0)  # gelu(10) is 10 to float32 precision
        up.div_(10.0)  # so geglu(gate) * up == the original up == out

    feedback = ke.check_geglu_kernel(rewrite)
    assert feedback.status == "wrong" and "changed its input" in feedback.message


def test_the_reference_does_not_depend_on_the_launcher(monkeypatch):
    seen = []
    real = ke.geglu_reference

    def spy(gate, up):
        seen.append("reference")
        return real(gate, up)

    monkeypatch.setattr(ke, "geglu_reference", spy)

    def launcher(gate, up, out):
        seen.append("kernel")
        right(gate, up, out)

    ke.check_geglu_kernel(launcher, shapes=[(5, 7)])
    assert seen[:2] == ["reference", "kernel"]
    assert torch.is_tensor(ke._inputs((2, 3), torch.float32, torch.device("cpu"), 0)[0])


def test_an_unmasked_store_is_reported_not_a_crash():
    # A real Triton kernel in the CPU interpreter: without the guard its last block writes past `out`.
    import triton
    import triton.language as tl

    @triton.jit
    def unmasked_kernel(gate_ptr, up_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n_elements
        g = tl.load(gate_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        u = tl.load(up_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + offsets, (g * tl.sigmoid(1.5957691216057308 * (g + 0.044715 * g * g * g)) * u))

    def launcher(gate, up, out, BLOCK=1024):
        n = gate.numel()
        unmasked_kernel[(triton.cdiv(n, BLOCK),)](gate, up, out, n, BLOCK=BLOCK)

    shape = (37, 341)  # 12617 elements: no multiple of 1024
    assert (shape[0] * shape[1]) % 1024
    feedback = ke.check_geglu_kernel(launcher, shapes=[shape])
    assert feedback.status == "wrong"
    assert "writes past the end of out" in feedback.message and "mask=mask" in feedback.message


def test_a_launcher_writing_into_an_input_guard_is_reported():
    def overrun(gate, up, out):
        right(gate, up, out)
        # the inputs are views into larger buffers: write one element past gate
        torch.as_strided(gate, (gate.numel() + 1,), (1,)).view(-1)[-1] = 0.0

    feedback = ke.check_geglu_kernel(overrun)
    assert feedback.status == "wrong" and "past the end of gate" in feedback.message
