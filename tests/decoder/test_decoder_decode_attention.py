"""The decoder's decode step with the course's split-KV attention (``attention="course"``; configuration
course-gemv-attn+compile+graph): the same logits as the eager model, the kernel only in one-token steps.

On a CPU the kernels run in Triton's interpreter; the test marked ``requires_cuda`` replays the decode step
from a CUDA graph with the compiled kernels.
"""

from __future__ import annotations

import pytest
import torch
from support import kernel_device
from support import requires_compiled_kernels as requires_cuda

import helpers
from helpers.decoder.config import DECODER_CONFIGS
from helpers.decoder.generate import Generator
from helpers.decoder.layers import Configuration, compile_blocks, swap_layers
from helpers.decoder.model import build_model, random_tokens
from helpers.kernels import decode_attention as da

NAME = "course-gemv-attn+compile+graph"
# float32 on the CPU: the kernel sums in another order than SDPA's softmax
CPU_TOLERANCE = {"atol": 1e-5, "rtol": 1e-4}
LAYERS = DECODER_CONFIGS["tiny"].num_hidden_layers


def _models(compiled=False, **swap):
    """The eager model and one with the course's attention, the same weights (built on the CPU: a seed draws
    other weights from a GPU's generator), where the course's kernels run."""
    dev = kernel_device()
    ref = build_model("tiny", "cpu").to(dev).eval()
    model = swap_layers(build_model("tiny", "cpu"), attention="course", **swap).to(dev).eval()
    return ref, compile_blocks(model) if compiled else model


def _decode_logits(model, prompt, steps, max_len=None):
    """Logits of a prefill and `steps` greedy decode steps through a static cache of `max_len` positions."""
    cache = model.new_cache(prompt.shape[0], max_len or prompt.shape[1] + steps + 1)
    out = [model(prompt, cache)]
    for _ in range(steps):
        out.append(model(out[-1][:, -1:].argmax(-1), cache))
    return out


@pytest.fixture
def counted(monkeypatch):
    """The decode-attention launches (the position each one read), counted without being traced by compile."""
    calls = []
    real = da.decode_attention

    def counting(q, k, v, position, *args, **kwargs):
        calls.append(k.shape[2])
        return real(q, k, v, position, *args, **kwargs)

    monkeypatch.setattr(da, "decode_attention_step", torch.compiler.disable(counting))
    return calls


@pytest.mark.parametrize("max_len", [None, 40])  # a cache just long enough, and one mostly empty
def test_decode_steps_match_the_eager_model(counted, max_len):
    ref, model = _models()
    prompt = random_tokens("tiny", 1, 8, device=kernel_device(), seed=1)
    with torch.no_grad():
        expected, got = _decode_logits(ref, prompt, 3, max_len), _decode_logits(model, prompt, 3, max_len)
    for e, g in zip(expected, got):
        torch.testing.assert_close(g, e, **CPU_TOLERANCE)
    assert len(counted) == LAYERS * 3  # decode steps only: the prefill runs the course's flash attention


def test_batched_decode_and_other_attentions_keep_their_paths(counted):
    ref, model = _models()
    prompts = random_tokens("tiny", 2, 5, device=kernel_device(), seed=2)
    with torch.no_grad():
        expected, got = _decode_logits(ref, prompts, 2), _decode_logits(model, prompts, 2)
        for e, g in zip(expected, got):
            torch.testing.assert_close(g, e, **CPU_TOLERANCE)
        assert len(counted) == LAYERS * 2
        sdpa = swap_layers(build_model("tiny", "cpu"), fused_qkv=True).to(kernel_device()).eval()
        _decode_logits(sdpa, prompts, 2)
    assert len(counted) == LAYERS * 2  # SDPA's model never launches it


def test_with_the_gemv_block_eager_and_compiled(counted):
    """The configuration's layers: GEMV projections and the course's attention; compiled blocks break the graph
    around the attention launch as around each GEMV."""
    prompt = random_tokens("tiny", 1, 6, device=kernel_device(), seed=4)
    swap = {"mlp": "course", "fused_qkv": True, "decode_gemv": True}
    for compiled in (False, True):
        ref, model = _models(compiled=compiled, **swap)
        with torch.no_grad():
            expected, got = _decode_logits(ref, prompt, 2, 24), _decode_logits(model, prompt, 2, 24)
        for e, g in zip(expected, got):
            torch.testing.assert_close(g, e, **CPU_TOLERANCE)
    assert len(counted) == 2 * LAYERS * 2


def test_the_configuration_is_in_the_benchmarks():
    from benchmarks.decode_floor import CONFIGURATIONS
    from benchmarks.decoder.configurations import ORDER, RUNS

    gemv, conf = RUNS["course-gemv+compile+graph"].configuration, RUNS[NAME].configuration
    assert gemv.attention == "sdpa"  # the GEMV configuration keeps what it measured
    assert conf == Configuration(**{**vars(gemv), "name": NAME, "attention": "course"})
    assert RUNS[NAME].uses == ("decode",) and NAME in ORDER
    assert CONFIGURATIONS.index(NAME) == CONFIGURATIONS.index("course-gemv+compile+graph") + 1


SMALL = DECODER_CONFIGS["small"]


@requires_cuda
def test_graphed_decode_with_the_course_attention_keeps_the_logits():
    ref = build_model(SMALL, "cuda", torch.bfloat16).eval()
    from benchmarks.decoder.configurations import RUNS

    model = RUNS[NAME].configuration.build(SMALL, "cuda", torch.bfloat16).eval()
    prompt = random_tokens(SMALL, 1, 12, device="cuda", seed=3)
    with torch.no_grad():
        expected, got = _decode_logits(ref, prompt, 4, 200), _decode_logits(model, prompt, 4, 200)
    for e, g in zip(expected[1:], got[1:]):
        assert helpers.relative_error(g, e) < 3e-2
    eager = Generator(model, 1, 300).generate(prompt, 100)  # past the first blocks and splits
    graphed = Generator(model, 1, 300, graph=True).generate(prompt, 100)
    assert torch.equal(eager, graphed)
