"""The attention block (helpers/attention/model.py): configs, RoPE, implementations, fused QKV, KV cache."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from support import kernel_device, rel_err

import helpers
import helpers.attention.model
from helpers.attention.model import (
    AttentionConfig,
    CausalSelfAttention,
    KVCache,
    RotaryEmbedding,
    apply_rope,
    future_mask,
    manual_attention,
)
from helpers.kernels.flash_attention import attention_reference

CFG = AttentionConfig(hidden_size=48, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)


def block(impl: str = "sdpa", seed: int = 0, cfg: AttentionConfig = CFG) -> CausalSelfAttention:
    torch.manual_seed(seed)
    return CausalSelfAttention(cfg, attn_impl=impl).eval()


def x_of(b: int, s: int, hidden: int = 48, seed: int = 1) -> torch.Tensor:
    return torch.randn(b, s, hidden, generator=torch.Generator().manual_seed(seed))


def test_config_defaults_and_transformers_style_objects() -> None:
    assert CFG.dim_per_head == 12 and CFG.kv_heads == 2
    ns = SimpleNamespace(hidden_size=64, num_attention_heads=8, num_key_value_heads=None, rope_theta=5e5)
    got = AttentionConfig.from_config(ns)
    assert got.kv_heads == 8 and got.dim_per_head == 8 and got.rope_theta == 5e5
    assert AttentionConfig.from_config({"hidden_size": 32, "num_attention_heads": 2, "head_dim": 8}).dim_per_head == 8


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"hidden_size": 48, "num_attention_heads": 5}, "multiple of num_attention_heads"),
        ({"hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 3}, "multiple of num_key_value_heads"),
        ({"hidden_size": 0, "num_attention_heads": 4}, "hidden_size"),
        ({"hidden_size": 40, "num_attention_heads": 8}, "even"),
    ],
)
def test_bad_configs_are_rejected(kwargs, message) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        AttentionConfig(**kwargs)
    with pytest.raises(TypeError, match="hidden_size"):
        AttentionConfig.from_config(SimpleNamespace(n_embd=64))


def test_rope_scores_depend_only_on_the_distance() -> None:
    # The point of rotary embeddings: q_i . k_j after rotation is a function of i - j.
    rope = RotaryEmbedding(16, 64)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(16, generator=g), torch.randn(16, generator=g)

    def score(i: int, j: int) -> float:
        cq, sq = rope(i, 1, torch.float32)
        ck, sk = rope(j, 1, torch.float32)
        return float(apply_rope(q[None], cq, sq) @ apply_rope(k[None], ck, sk).T)

    assert score(10, 7) == pytest.approx(score(33, 30), rel=1e-5)
    assert score(10, 7) != pytest.approx(score(10, 8), rel=1e-3)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        rope(60, 10, torch.float32)


def test_future_mask_and_manual_attention() -> None:
    assert future_mask(2, 4).tolist() == [[False, False, False, True], [False, False, False, False]]
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 4, 19, 8, generator=g) for _ in range(3))
    for causal in (True, False):
        assert rel_err(manual_attention(q, k, v, causal=causal), attention_reference(q, k, v, causal)) < 1e-6
    kv = (torch.randn(2, 2, 19, 8, generator=g), torch.randn(2, 2, 19, 8, generator=g))
    assert rel_err(manual_attention(q, *kv), attention_reference(q, *kv)) < 1e-6  # grouped K/V heads


def _where(impl: str) -> tuple[str, float]:
    """The device a block runs on and the error it is allowed: the course's kernel runs where Triton does (the
    GPU, in TF32 tensor-core products, when compiled; the CPU interpreter, in float32, elsewhere)."""
    device = kernel_device() if impl == "course" else "cpu"
    return device, (2e-2 if device == "cuda" else 1e-5)


@pytest.mark.parametrize("impl", ["manual", "course"])
def test_implementations_agree_with_sdpa(impl) -> None:
    device, tol = _where(impl)
    ref, other = block("sdpa").to(device), block(impl).to(device)
    other.load_state_dict(ref.state_dict())
    x = x_of(2, 23).to(device)
    with torch.no_grad():
        assert rel_err(other(x), ref(x)) < tol


def test_fused_qkv_is_the_same_block() -> None:
    separate = block()
    fused = separate.with_fused_qkv()
    assert fused.fused_qkv and fused.qkv_proj.weight.shape == (48 + 2 * 24, 48)
    x = x_of(2, 17)
    with torch.no_grad():
        assert rel_err(fused(x), separate(x)) < 1e-6
    names = dict(separate.named_modules()).keys() - {""}
    assert {"q_proj", "k_proj", "v_proj", "o_proj"} <= names


@pytest.mark.parametrize("impl", ["sdpa", "manual", "course"])
def test_kv_cache_decoding_matches_the_full_forward(impl) -> None:
    device, tol = _where(impl)
    m = block(impl).to(device)
    x = x_of(2, 19).to(device)
    with torch.no_grad():
        full = m(x)
        cache = m.new_cache(batch=2, max_len=32)
        prefill = m(x[:, :7], cache=cache)  # a prompt of 7 tokens
        chunk = m(x[:, 7:11], cache=cache)  # a chunk of 4 after it
        steps = [m(x[:, i : i + 1], cache=cache) for i in range(11, 19)]  # then one token at a time
    assert cache.length == 19
    assert rel_err(torch.cat([prefill, chunk, *steps], dim=1), full) < tol


def test_kv_cache_works_in_train_mode_with_gradients() -> None:
    m = block("sdpa").train()
    x = x_of(1, 9).requires_grad_(True)
    full = m(x)
    (g_full,) = torch.autograd.grad(full.square().sum(), x)
    cache = m.new_cache(batch=1, max_len=16)
    out = torch.cat([m(x[:, :5], cache=cache), m(x[:, 5:], cache=cache)], dim=1)
    (g_cached,) = torch.autograd.grad(out.square().sum(), x)
    assert rel_err(out, full) < 1e-5 and rel_err(g_cached, g_full) < 1e-5


def test_cache_and_input_errors() -> None:
    m = block()
    cache = m.new_cache(batch=1, max_len=4)
    with torch.no_grad():
        m(x_of(1, 3), cache=cache)
        with pytest.raises(ValueError, match="do not fit"):
            m(x_of(1, 2), cache=cache)
        with pytest.raises(ValueError, match=r"\[batch, seq, 48\]"):
            m(torch.randn(1, 3, 47))
    cache.reset()
    assert cache.length == 0
    with pytest.raises(ValueError, match="cache holds"):
        KVCache(1, 2, 8, 12).append(torch.randn(1, 3, 1, 12), torch.randn(1, 3, 1, 12))
    with pytest.raises(ValueError, match="attn_impl"):
        CausalSelfAttention(CFG, attn_impl="flash")


def test_exported_names() -> None:
    assert helpers.attention.model.CausalSelfAttention is CausalSelfAttention  # notebooks 07 and 08; the rest by module
