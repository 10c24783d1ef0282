"""The course's flash-attention forward (helpers/kernels/flash_attention*.py): numerics, checks, configuration choice.

On a CPU-only machine these run the kernels in Triton's interpreter, at small awkward shapes
(lengths no multiple of any tile, a head dim that is no power of two, grouped K/V heads, strided
inputs), with the output poisoned first. The ``requires_cuda`` tests run the compiled kernels.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from support import kernel_device as device
from support import rel_err
from support import requires_compiled_kernels as requires_cuda

import helpers
from helpers.kernels import flash_attention_configs as configs_mod
from helpers.kernels import flash_attention_kernels as kernels
from helpers.kernels.flash_attention import (
    CourseFlashAttention,
    FlashAttentionFunction,
    attention_reference,
    flash_attention,
)


def qkv(b, h, sq, d, kv=None, sk=None, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    kv, sk = kv or h, sk or sq
    q = torch.randn(b, h, sq, d, generator=g)
    k = torch.randn(b, kv, sk, d, generator=g)
    v = torch.randn(b, kv, sk, d, generator=g)
    return (t.to(device(), dtype) for t in (q, k, v))


CASES = [
    # (batch, heads, kv_heads, seq_q, seq_k, head_dim, causal)
    (1, 2, 2, 37, 37, 32, True),  # ragged last tile, causal
    (2, 4, 2, 50, 50, 16, True),  # grouped-query attention
    (1, 2, 2, 45, 70, 24, False),  # more keys than queries, head dim no power of two
    (1, 3, 1, 1, 77, 16, True),  # one new token against a cache: sees every key
    (1, 2, 2, 20, 53, 40, True),  # a chunk after a cache: the diagonal at the bottom right
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:6])) + ("-causal" if c[6] else ""))
@pytest.mark.parametrize("kernel", ["pointer", "tma"])
def test_matches_float64_reference(case, kernel) -> None:
    b, h, kv, sq, sk, d, causal = case
    q, k, v = qkv(b, h, sq, d, kv, sk, seed=sq)
    out = flash_attention(q, k, v, causal, kernel=kernel)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert rel_err(out, attention_reference(q, k, v, causal)) < 1e-5


def test_strided_inputs_are_read_in_place() -> None:
    # [batch, seq, heads, d] transposed to [batch, heads, seq, d], as an attention block produces them
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 33, 3 * 4 * 16, generator=g).to(device())
    q, k, v = (t.view(2, 33, 4, 16).transpose(1, 2) for t in x.split(4 * 16, dim=-1))
    assert not q.is_contiguous()
    assert rel_err(flash_attention(q, k, v), attention_reference(q, k, v)) < 1e-5


def test_custom_scale_and_sdpa_agreement() -> None:
    q, k, v = qkv(1, 2, 29, 16, seed=4)
    out = flash_attention(q, k, v, causal=True, scale=0.3)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)
    assert rel_err(out, ref) < 1e-5


def test_half_precision_in_the_interpreter_or_gpu() -> None:
    # fp16 (the interpreter computes it through numpy's float16; bf16 it gets wrong): bf16-class error
    q, k, v = qkv(1, 2, 40, 32, dtype=torch.float16, seed=5)
    assert rel_err(flash_attention(q, k, v), attention_reference(q, k, v)) < 5e-3


def test_large_scores_stay_finite() -> None:
    # scores of +-1e4 would overflow a naive exp; the running maximum keeps every exp2 <= 1
    q, k, v = qkv(1, 1, 33, 16, seed=6)
    q = q * 300
    out = flash_attention(q, k, v)
    assert torch.isfinite(out).all()
    assert rel_err(out, attention_reference(q, k, v)) < 1e-4


def test_backward_matches_sdpa() -> None:
    q, k, v = (t.requires_grad_(True) for t in qkv(1, 2, 21, 16, seed=7))
    out = CourseFlashAttention(causal=True)(q, k, v)
    grad = torch.randn_like(out)
    out.backward(grad)
    mine = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(grad)
    for a, b in zip(mine, (q.grad, k.grad, v.grad)):
        assert rel_err(a, b) < 1e-5


def test_backward_with_grouped_heads_and_a_cache_offset() -> None:
    q, k, v = (t.double().float().requires_grad_(True) for t in qkv(1, 4, 5, 16, kv=2, sk=12, seed=8))
    out = FlashAttentionFunction.apply(q, k, v, True, None)
    out.sum().backward()
    qr, kr, vr = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    kk, vv = kr.repeat_interleave(2, dim=1), vr.repeat_interleave(2, dim=1)
    visible = torch.ones(5, 12, dtype=torch.bool, device=q.device).tril(diagonal=7)
    F.scaled_dot_product_attention(qr, kk, vv, attn_mask=visible).sum().backward()
    for a, b in ((q.grad, qr.grad), (k.grad, kr.grad), (v.grad, vr.grad)):
        assert rel_err(a, b) < 1e-5


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: (torch.randn(2, 3, 4), torch.randn(2, 3, 4), torch.randn(2, 3, 4)), "4-D"),
        (lambda: (torch.randn(1, 3, 8, 16), torch.randn(1, 2, 8, 16), torch.randn(1, 2, 8, 16)), "multiple"),
        (lambda: (torch.randn(1, 2, 8, 16), torch.randn(1, 2, 8, 16).half(), torch.randn(1, 2, 8, 16)), "dtype"),
        (lambda: (torch.randn(1, 2, 9, 16), torch.randn(1, 2, 8, 16), torch.randn(1, 2, 8, 16)), "more queries"),
        (lambda: (torch.randn(1, 2, 8, 16), torch.randn(1, 2, 8, 8), torch.randn(1, 2, 8, 8)), "head_dim"),
        (
            lambda: (
                torch.randn(1, 2, 8, 16, 2, device=device())[..., 0],
                torch.randn(1, 2, 8, 16),
                torch.randn(1, 2, 8, 16),
            ),
            "contiguous",
        ),
    ],
)
def test_bad_inputs_are_rejected_clearly(make, message) -> None:
    q, k, v = (t.to(device()) for t in make())
    with pytest.raises(ValueError, match=message):
        flash_attention(q, k, v)


def test_bad_options_are_rejected() -> None:
    q, k, v = qkv(1, 1, 8, 16)
    with pytest.raises(ValueError, match="kernel must be one of"):
        flash_attention(q, k, v, kernel="fast")
    with pytest.raises(ValueError, match="scale"):
        flash_attention(q, k, v, scale=-1.0)
    with pytest.raises(TypeError, match="torch.Tensor"):
        flash_attention(q.tolist(), k, v)
    with pytest.raises(TypeError, match="FlashConfig"):
        flash_attention(q, k, v, config=(16, 16))


def test_tma_path_refuses_misaligned_strides() -> None:
    # head dim 6 in fp16: 12-byte rows cannot be described for the tensor memory accelerator
    q, k, v = qkv(1, 1, 8, 6, dtype=torch.float16)
    with pytest.raises(ValueError, match="16-byte"):
        flash_attention(q, k, v, kernel="tma")
    assert rel_err(flash_attention(q, k, v), attention_reference(q, k, v)) < 5e-3  # auto takes pointers


def test_kernel_names_decode_as_the_courses_attention_kernels() -> None:
    # Triton names a kernel in a trace after its @triton.jit function.
    for jitted in (kernels._flash_attn_fwd_kernel, kernels._flash_attn_fwd_tma_kernel):
        decoded = helpers.decode_kernel(jitted.fn.__name__)
        assert decoded["family"] == "attention" and decoded["source"] == "course-triton", decoded
        assert "fused_ops" not in decoded  # not a GeGLU


def test_kernel_source_shows_the_online_softmax() -> None:
    src = helpers.kernel_source("_online_softmax_update")
    for landmark in ("tl.maximum", "tl.math.exp2", "alpha", "tl.dot"):
        assert landmark in src


def test_the_launcher_keeps_the_first_configuration_that_runs_and_is_right() -> None:
    configs = [
        configs_mod.FlashConfig(64, 64, 4, 3),
        configs_mod.FlashConfig(32, 32, 4, 2),
        configs_mod.FlashConfig(16, 16, 4, 1),
    ]
    state = {"current": None, "launches": 0}

    def launch(cfg):
        state["launches"] += 1
        if cfg.block_m == 64:
            raise RuntimeError("out of resources: shared memory")
        state["current"] = cfg

    def check():
        return "wrong result" if state["current"].block_m == 32 else None

    key = ("test", object())
    chosen = configs_mod.pick_config(key, configs, launch, check)
    assert chosen == configs[2] and state["launches"] == 3
    assert configs_mod.pick_config(key, configs, launch, check) is chosen  # remembered: nothing runs again
    assert state["launches"] == 3


def test_the_tuned_table_comes_first_for_the_nearest_length() -> None:
    if configs_mod.triton_mode() == "interpreter":  # one configuration only
        assert configs_mod.configs_to_try("tma", 4096, 4096, 128, torch.bfloat16, 9) == [configs_mod.INTERPRETER_CONFIG]
        return
    first = configs_mod.configs_to_try("tma", 6000, 6000, 128, torch.bfloat16, 9)[0]
    assert first == configs_mod.FlashConfig(*configs_mod.TUNED_H200[("tma", 128)][8192])


def test_configs_to_try_in_compiled_mode(monkeypatch) -> None:
    monkeypatch.setattr(configs_mod, "triton_mode", lambda: "cuda")
    tried = configs_mod.configs_to_try("tma", 7000, 7000, 128, torch.bfloat16, 9)
    assert tried[0] == configs_mod.FlashConfig(128, 64, 4, 2)  # tuned at 8192, the nearest length
    assert sorted(map(str, tried)) == sorted(map(str, configs_mod.GPU_CONFIGS))  # then every other candidate
    decode = configs_mod.configs_to_try("pointer", 1, 4096, 128, torch.bfloat16, 9)
    assert all(c.block_m <= 64 for c in decode)  # one query: no tall blocks, the tuned 128x128 is not among them
    assert configs_mod.configs_to_try("tma", 7000, 7000, 128, torch.bfloat16, 8) == configs_mod.candidates(
        7000, 128, torch.bfloat16
    )
    assert configs_mod.configs_to_try("pointer", 64, 64, 64, torch.float32, 9) == [configs_mod.FP32_CONFIG]


def test_the_launcher_reports_when_nothing_runs() -> None:
    def launch(cfg):
        raise RuntimeError("no")

    with pytest.raises(RuntimeError, match="no flash-attention configuration ran"):
        configs_mod.pick_config(("none", object()), [configs_mod.FlashConfig(16, 16, 4, 1)] * 2, launch)


@requires_cuda
@pytest.mark.parametrize("kernel", ["auto", "pointer"])
@pytest.mark.parametrize("d", [64, 128])
def test_compiled_bf16_matches_reference(kernel, d) -> None:
    q, k, v = qkv(2, 4, 1000, d, kv=2, dtype=torch.bfloat16, seed=d)
    out = flash_attention(q, k, v, kernel=kernel)
    assert rel_err(out, attention_reference(q, k, v)) < 1e-2


@requires_cuda
def test_compiled_long_sequence_against_sdpa() -> None:
    q, k, v = qkv(1, 16, 4096, 128, dtype=torch.bfloat16, seed=9)
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
    assert rel_err(flash_attention(q, k, v), ref) < 1e-2


def test_a_group_that_failed_fails_fast() -> None:
    calls = []

    def launch(cfg):
        calls.append(cfg)
        raise RuntimeError("does not compile")

    group = ("group", object())
    configs = [configs_mod.FlashConfig(16, 16, 4, 1), configs_mod.FlashConfig(32, 32, 4, 1)]
    with pytest.raises(RuntimeError, match="does not compile"):
        configs_mod.pick_config((*group, 64), configs, launch, group=group)
    with pytest.raises(RuntimeError, match="does not compile"):
        configs_mod.pick_config((*group, 128), configs, launch, group=group)  # another length: no new compile
    assert len(calls) == 2


def test_auto_falls_back_to_pointers_when_the_tma_path_fails(monkeypatch) -> None:
    import helpers.kernels.flash_attention as fa

    real_launcher = fa._launcher

    def launcher(path, *args):
        if path == "tma":

            def broken(cfg):
                raise RuntimeError("TMA lowering failed")

            return broken
        return real_launcher(path, *args)

    configs = iter([[configs_mod.FlashConfig(16, 16, 4, 1), configs_mod.FlashConfig(32, 32, 4, 1)]])
    monkeypatch.setattr(fa, "_launcher", launcher)
    monkeypatch.setattr(fa, "choose_path", lambda kernel, *tensors: "tma" if kernel == "auto" else kernel)
    monkeypatch.setattr(fa, "configs_to_try", lambda *a: next(configs, [configs_mod.INTERPRETER_CONFIG]))
    monkeypatch.setattr(fa, "path_failures", {})
    monkeypatch.setattr(configs_mod, "_FAILED", {})  # keep this failure out of the other tests
    monkeypatch.setattr(configs_mod, "_CHOSEN", {})
    q, k, v = qkv(1, 2, 20, 16, seed=11)
    with pytest.warns(UserWarning, match="using the pointer path"):
        out = fa.flash_attention(q, k, v)
    assert rel_err(out, attention_reference(q, k, v)) < 1e-5
    assert len(fa.path_failures) == 1 and "TMA lowering failed" in next(iter(fa.path_failures.values()))
    with pytest.raises(RuntimeError, match="TMA lowering failed"):
        fa.flash_attention(q, k, v, kernel="tma")  # asked for by name: no silent fallback
