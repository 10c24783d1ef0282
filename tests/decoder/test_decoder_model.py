"""The decoder: sizes, numerics of every cache and layer swap against the plain forward, bad input."""

from __future__ import annotations

import pytest
import torch
from support import kernel_device

from helpers.decoder.config import DECODER_CONFIGS
from helpers.decoder.generate import Generator
from helpers.decoder.layers import Recomputed, RunsEager, compile_blocks, swap_layers
from helpers.decoder.model import PARTS, Decoder, StaticCache, build_model, next_token_loss, random_tokens
from helpers.decoder.training import TrainingStep

TINY = DECODER_CONFIGS["tiny"]


@pytest.fixture(scope="module")
def tiny():
    return build_model("tiny", "cpu")


def tokens(batch, seq, seed=0):
    return random_tokens("tiny", batch, seq, seed=seed)


@pytest.mark.parametrize("name", list(DECODER_CONFIGS))
def test_parameter_count_matches_the_built_model(name):
    cfg = DECODER_CONFIGS[name]
    with torch.device("meta"):  # sizes only: the 1B model is not materialised
        model = Decoder(cfg)
    assert sum(p.numel() for p in model.parameters()) == cfg.num_parameters()  # tied: the head adds nothing


def test_presets_the_course_relies_on():
    assert 1.0e9 < DECODER_CONFIGS["1b"].num_parameters() < 1.2e9
    nine = DECODER_CONFIGS["8x2048"]
    assert (nine.num_hidden_layers, nine.hidden_size) == (8, 2048)


def test_same_seed_same_weights_and_defaults():
    a, b = build_model("tiny", "cpu", seed=3), build_model("tiny", "cpu", seed=3)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert a.embed_tokens.weight.dtype == torch.float32 and a.embed_tokens.weight.device.type == "cpu"
    assert a.embed_tokens.weight is not None and not hasattr(a, "lm_head")  # the head is the embedding


def test_cached_prefill_and_decode_equal_the_full_forward(tiny):
    x = tokens(2, 24)
    with torch.no_grad():
        full = tiny(x)
        cache = tiny.new_cache(2, 40)
        pieces = [tiny(x[:, :9], cache)] + [tiny(x[:, i : i + 1], cache) for i in range(9, 24)]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=1e-5, rtol=1e-5)
    assert int(cache.position) == 24


def test_generators_agree_and_last_only_logits(tiny):
    prompts = tokens(3, 7, seed=1)
    gen = Generator(tiny, batch=3, max_len=32)
    static = gen.generate(prompts, 12)
    assert static.shape == (3, 12) and gen.length == 7 + 11
    with torch.no_grad():  # greedy without a cache: the whole sequence again for every token
        seq = prompts
        for _ in range(12):
            seq = torch.cat([seq, tiny(seq)[:, -1:].argmax(-1)], dim=1)
    assert torch.equal(static, seq[:, 7:])
    with torch.no_grad():
        torch.testing.assert_close(tiny(prompts, last_only=True), tiny(prompts)[:, -1:])
    last = Generator(tiny, batch=3, max_len=32, prefill_logits="last")
    assert torch.equal(last.generate(prompts, 12), static)


def test_generator_refuses_what_cannot_work(tiny):
    gen = Generator(tiny, batch=1, max_len=8)
    with pytest.raises(ValueError, match="prefill"):
        gen.step()
    with pytest.raises(ValueError, match="no room"):
        gen.prefill(tokens(1, 8))
    gen.prefill(tokens(1, 6))
    gen.step(), gen.step()
    with pytest.raises(ValueError, match="full"):
        gen.step()
    with pytest.raises(ValueError, match=r"batch=1"):
        gen.prefill(tokens(2, 3))
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA"):
            Generator(tiny, 1, 8, graph=True)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        StaticCache(TINY, 1, TINY.max_position_embeddings + 1)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="unknown decoder config"):
        build_model("huge", "cpu")
    with pytest.raises(ValueError, match="multiple"):
        TINY.with_(num_key_value_heads=3)
    with pytest.raises(TypeError, match="floating"):
        build_model("tiny", "cpu", dtype=torch.int32)
    model = build_model("tiny", "cpu")
    with pytest.raises(ValueError, match=r"\[batch, seq\]"):
        model(torch.randn(2, 3))
    with pytest.raises(ValueError, match="eager"):
        swap_layers(swap_layers(build_model("tiny", "cpu"), recompute=True), mlp="course")
    with pytest.raises(ValueError, match="mlp must be"):
        swap_layers(model, mlp="liger")
    with pytest.raises(TypeError, match="Decoder"):
        swap_layers(torch.nn.Linear(2, 2))


def test_swapped_layers_keep_the_outputs():
    x = tokens(2, 16, seed=2)
    ref = build_model("tiny", "cpu")
    with torch.no_grad():
        expected = ref(x)
        fused_qkv = swap_layers(build_model("tiny", "cpu"), fused_qkv=True)
        torch.testing.assert_close(fused_qkv(x), expected, atol=1e-5, rtol=1e-4)
        manual = swap_layers(build_model("tiny", "cpu"), attention="manual")
        torch.testing.assert_close(manual(x), expected, atol=1e-5, rtol=1e-4)
        # the course's kernel runs where Triton does: the GPU when it compiles, its interpreter on a CPU
        device = kernel_device()
        # built on the CPU, then moved: a seed draws other weights from a GPU's generator
        course = swap_layers(build_model("tiny", "cpu").to(device), mlp="course")
        torch.testing.assert_close(course(x.to(device)).cpu(), expected, atol=1e-4, rtol=1e-3)
    assert {type(b.mlp).__name__ for b in course.layers} == {"CourseGeGLUMLP"}


def _grads(model, x):
    model.zero_grad(set_to_none=True)
    model.loss(x[:, :-1], x[:, 1:]).backward()
    return {n: p.grad.clone() for n, p in model.named_parameters()}


def test_recomputation_gives_the_same_gradients_and_keeps_less():
    x = tokens(2, 33, seed=4)
    eager = _grads(build_model("tiny", "cpu"), x)
    model = swap_layers(build_model("tiny", "cpu"), recompute=True)
    assert all(isinstance(b.mlp, Recomputed) for b in model.layers)
    recomputed = _grads(model, x)
    assert set(recomputed) == {n.replace("mlp.", "mlp.inner.") for n in eager}
    for name, grad in eager.items():
        torch.testing.assert_close(recomputed[name.replace("mlp.", "mlp.inner.")], grad, atol=1e-6, rtol=1e-5)


def test_parts_are_scoped_only_while_profiling(tiny):
    x = tokens(1, 8)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof, torch.no_grad():
        tiny(x)
    seen = {e.key for e in prof.key_averages()}
    assert {"embedding", "norm", "attention", "mlp", "residual", "lm_head"} <= seen and set(PARTS) >= {"loss"}
    from helpers.decoder.model import _NO_SCOPE, part

    assert part("mlp") is _NO_SCOPE  # no profiler: no record_function, whose enter costs microseconds


def test_compile_blocks_wraps_course_layers_and_keeps_outputs():
    model = swap_layers(build_model("tiny", "cpu"), mlp="course")
    compile_blocks(model)  # marks the blocks for compilation; nothing compiles until a call
    assert all(isinstance(b.mlp, RunsEager) for b in model.layers)
    assert all(getattr(b, "_compiled_call_impl", None) is not None for b in model.layers)


class Wrapper(torch.nn.Module):
    """Stands in for DistributedDataParallel: the model under ``.module``, the wrapper's forward must run."""

    def __init__(self, module):
        super().__init__()
        self.module, self.calls = module, 0

    def forward(self, tokens):
        self.calls += 1
        return self.module(tokens)


def test_training_step_runs_through_a_wrapper_and_learns():
    wrapped = Wrapper(build_model("tiny", "cpu"))
    step = TrainingStep(wrapped, batch=2, seq=16, optimizer="foreach")
    with torch.no_grad():
        before = next_token_loss(wrapped.module(step.tokens), step.targets)
    losses = [float(step()) for _ in range(5)]
    assert wrapped.calls == 5 and losses[0] == pytest.approx(float(before))
    assert losses[-1] < losses[0]  # the same batch five times: AdamW fits it
    with pytest.raises(TypeError, match="DistributedDataParallel"):
        TrainingStep(torch.nn.Linear(2, 2), 1, 4)
    with pytest.raises(ValueError, match=r"\[batch, seq, vocab\]"):
        next_token_loss(torch.randn(2, 3), torch.zeros(2, dtype=torch.long))


def test_an_eager_prefill_of_a_compiled_model_compiles_nothing():
    from torch._dynamo.utils import counters

    model = compile_blocks(build_model("tiny", "cpu")).eval()
    reference = build_model("tiny", "cpu").eval()
    counters.clear()
    gen = Generator(model, 2, 32, compiled_prefill=False)
    first = gen.prefill(tokens(2, 9)).clone()
    assert counters["stats"]["unique_graphs"] == 0  # force_eager: the compiled blocks ran their Python
    assert torch.equal(first, Generator(reference, 2, 32).prefill(tokens(2, 9)))
