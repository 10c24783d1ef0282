"""The decoder's GEMV decode step (helpers/decoder/gemv_block.py, configuration course-gemv+compile+graph):
the same logits as the eager model, GEMVs only for one-token decode steps, the layers shared.

On a CPU the kernels run in Triton's interpreter; the tests marked ``requires_cuda`` run the compiled,
autotuned kernels and capture the decode step in a CUDA graph.
"""

from __future__ import annotations

import pytest
import torch
from support import kernel_device
from support import requires_compiled_kernels as requires_cuda

import helpers
from helpers.decoder import gemv_block
from helpers.decoder.config import DECODER_CONFIGS
from helpers.decoder.generate import Generator
from helpers.decoder.layers import Configuration, swap_layers
from helpers.decoder.model import build_model, random_tokens

GEMV = Configuration("course-gemv", mlp="course", fused_qkv=True, decode_gemv=True)
GEMV_COMPILED = Configuration("course-gemv+compile", mlp="course", fused_qkv=True, decode_gemv=True, compiled=True)
# float32 on the CPU: only the order of the sums differs from the eager model
CPU_TOLERANCE = {"atol": 1e-5, "rtol": 1e-4}


def _models(conf):
    """The eager model and `conf`'s, the same weights, where the course's kernels run (built on the CPU: a
    seed draws other weights from a GPU's generator)."""
    dev = kernel_device()
    ref = build_model("tiny", "cpu").to(dev).eval()
    model = swap_layers(build_model("tiny", "cpu"), mlp="course", fused_qkv=True, decode_gemv=True).to(dev).eval()
    if conf.compiled:
        from helpers.decoder.layers import compile_blocks

        compile_blocks(model)
    return ref, model


def _decode_logits(model, prompt, steps):
    """Logits of a prefill and `steps` greedy decode steps through a static cache."""
    cache = model.new_cache(1, prompt.shape[1] + steps + 1)
    out = [model(prompt, cache)]
    for _ in range(steps):
        out.append(model(out[-1][:, -1:].argmax(-1), cache))
    return out


@pytest.fixture
def counted(monkeypatch):
    """The GEMV launches of the decode step, by prologue."""
    calls = []
    from helpers.kernels.decode_gemv import gemv as real

    def counting(x, w, prologue="none", *args, **kwargs):
        calls.append(prologue)
        return real(x, w, prologue, *args, **kwargs)

    monkeypatch.setattr(gemv_block, "_gemv", torch.compiler.disable(counting))  # run, not traced, when compiled
    return calls


def test_decode_steps_match_the_eager_model_and_run_four_gemvs_a_layer(counted):
    ref, model = _models(GEMV)
    prompt = random_tokens("tiny", 1, 8, device=kernel_device(), seed=1)
    with torch.no_grad():
        expected, got = _decode_logits(ref, prompt, 3), _decode_logits(model, prompt, 3)
    for e, g in zip(expected, got):
        torch.testing.assert_close(g, e, **CPU_TOLERANCE)
    layers = DECODER_CONFIGS["tiny"].num_hidden_layers
    assert counted == ["rmsnorm", "none", "rmsnorm", "geglu"] * layers * 3  # decode steps only, not the prefill
    assert {type(b).__name__ for b in model.layers} == {"GEMVDecodeBlock"}


def test_more_rows_and_training_take_the_layers_as_they_are(counted):
    ref, model = _models(GEMV)
    batch = random_tokens("tiny", 2, 1, device=kernel_device(), seed=2)  # one token, two sequences: a GEMM
    with torch.no_grad():
        cache_ref, cache = ref.new_cache(2, 4), model.new_cache(2, 4)
        torch.testing.assert_close(model(batch, cache), ref(batch, cache_ref), **CPU_TOLERANCE)
    one = random_tokens("tiny", 1, 1, device=kernel_device(), seed=3)
    cache_ref, cache = ref.new_cache(1, 4), model.new_cache(1, 4)
    with torch.enable_grad():  # gradients on: the layers as they are
        torch.testing.assert_close(model(one, cache), ref(one, cache_ref), **CPU_TOLERANCE)
    model(one).sum().backward()  # a training forward (no cache)
    assert counted == []
    assert model.layers[0].attention.qkv_proj.weight.grad is not None


def test_the_block_shares_the_layers_and_their_names():
    course = swap_layers(build_model("tiny", "cpu"), mlp="course", fused_qkv=True)
    gemv = swap_layers(build_model("tiny", "cpu"), mlp="course", fused_qkv=True, decode_gemv=True)
    assert course.state_dict().keys() == gemv.state_dict().keys()
    for (name, a), (_, b) in zip(course.state_dict().items(), gemv.state_dict().items()):
        assert torch.equal(a, b), name


def test_configurations_that_cannot_run_it_are_refused():
    for kwargs in ({"mlp": "eager", "fused_qkv": True}, {"mlp": "course"}, {"mlp": "fused", "fused_qkv": True}):
        with pytest.raises(ValueError, match="decode_gemv"):
            swap_layers(build_model("tiny", "cpu"), decode_gemv=True, **kwargs)


def test_the_configuration_is_in_the_benchmarks():
    from benchmarks.decode_floor import CONFIGURATIONS
    from benchmarks.decoder.configurations import RUNS

    conf = RUNS["course-gemv+compile+graph"].configuration
    assert conf.decode_gemv and conf.compiled and conf.graph and "course-gemv+compile+graph" in CONFIGURATIONS


def test_compiled_blocks_keep_the_decode_logits(counted):
    """Compiled blocks break the graph around each GEMV launch; the step between them is compiled."""
    ref, model = _models(GEMV_COMPILED)
    prompt = random_tokens("tiny", 1, 6, device=kernel_device(), seed=4)
    with torch.no_grad():
        expected, got = _decode_logits(ref, prompt, 2), _decode_logits(model, prompt, 2)
    for e, g in zip(expected, got):
        torch.testing.assert_close(g, e, **CPU_TOLERANCE)
    assert len(counted) == 4 * DECODER_CONFIGS["tiny"].num_hidden_layers * 2


SMALL = DECODER_CONFIGS["small"]


@requires_cuda
def test_graphed_gemv_decode_keeps_the_logits_and_replays_exactly():
    ref = build_model(SMALL, "cuda", torch.bfloat16).eval()
    conf = Configuration("gemv+graph", mlp="course", fused_qkv=True, decode_gemv=True, compiled=True, graph=True)
    model = conf.build(SMALL, "cuda", torch.bfloat16).eval()
    prompt = random_tokens(SMALL, 1, 12, device="cuda", seed=3)
    with torch.no_grad():
        expected, got = _decode_logits(ref, prompt, 4), _decode_logits(model, prompt, 4)
    for e, g in zip(expected[1:], got[1:]):
        assert helpers.relative_error(g, e) < 3e-2
    eager = Generator(model, 1, 64).generate(prompt, 20)
    graphed = Generator(model, 1, 64, graph=True).generate(prompt, 20)
    assert torch.equal(eager, graphed)
