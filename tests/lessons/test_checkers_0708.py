"""Every checker of lessons 07 and 08 fed the taught answer, a naive one and the tempting wrong one.

The expected values are what the notebooks measure: live CPU profiles at small shapes, and the
H200 reference traces and benchmark run the notebooks read on a CPU. The naive and tempting answers
must be wrong; where the measurement cannot tell two answers apart (a timing race inside its noise),
the checker must say so (a tie) instead of grading.
"""

from __future__ import annotations

import pytest
import torch

import helpers
from helpers import nb07, nb08

RIGHT, WRONG, TIE = "right", "wrong", "too close to call"


def statuses(book, key: str, expected, probes: dict[str, object], details: dict | None = None) -> dict[str, str]:
    return {name: book.check(key, answer, expected, details=details).status for name, answer in probes.items()}


# -- lesson 07 -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def block_gemms() -> dict[str, int]:
    out = {}
    for fused in (False, True):
        built = nb07.workloads.attention_block("cpu", shape=nb07.AttentionShape(batch=1, heads=2, seq=16, head_dim=16), fused_qkv=fused)  # fmt: skip
        t = helpers.profile(built.fn, *built.inputs, steps=1, warmup=1)
        out["fused" if fused else "separate"] = int(t.ops().set_index("name").loc["aten::linear", "calls"])
    return out


def test_07_gemm_counts(block_gemms):
    assert statuses(nb07, "gemms_separate", block_gemms["separate"], {"taught": 4, "naive": 3, "tempting": 5}) == {
        "taught": RIGHT, "naive": WRONG, "tempting": WRONG}  # fmt: skip
    # the old Summary's "three with a fused QKV projection" is the tempting wrong answer
    assert statuses(nb07, "gemms_fused", block_gemms["fused"], {"taught": 2, "naive": 4, "tempting": 3}) == {
        "taught": RIGHT, "naive": WRONG, "tempting": WRONG}  # fmt: skip


def test_07_score_matrix_megabytes_from_the_softmax_input():
    shape = nb07.AttentionShape(batch=2, heads=4, seq=64, head_dim=16)
    built = nb07.workloads.manual("cpu", torch.float32, shape)
    t = helpers.profile(built.fn, *built.inputs, steps=1, warmup=1)
    scores = helpers.op_input(t, "aten::_softmax")
    details = {"shape": list(scores.shape), "itemsize": scores.itemsize, "dtype": scores.dtype}
    taught = 2 * 4 * 64 * 64 * 4 / 1e6
    probes = {"taught": taught, "naive": 2 * 4 * 64 * 64 * 4, "tempting": 2 * 4 * 64 * 64 * 4 / 2**20}  # bytes; MiB
    assert statuses(nb07, "score_mb", scores.nbytes / 1e6, probes, details) == {"taught": RIGHT, "naive": WRONG, "tempting": WRONG}  # fmt: skip


def test_07_growth_cpu_choice_flash_peak_causal_and_compile():
    sweep = nb07.score_sweep([32, 64], device="cpu", heads=1, head_dim=16, repeats=1)
    growth = float(sweep["measured_score_mb"].iloc[1] / sweep["measured_score_mb"].iloc[0])
    assert statuses(nb07, "growth", growth, {"taught": 4, "naive": 2, "tempting": 16}) == {"taught": RIGHT, "naive": WRONG, "tempting": WRONG}  # fmt: skip
    q, k, v = nb07.workloads.attention_inputs("cpu", shape=nb07.workloads.CPU_SHAPE)
    backends = nb07.sdpa_backends(q, k, v)
    chosen = backends.loc[backends["chosen"], "backend"].iloc[0]
    probes = {"taught": "flash", "spaced": " Flash ", "naive": "math", "tempting": "efficient"}
    assert statuses(nb07, "cpu_choice", chosen, probes) == {"taught": RIGHT, "spaced": RIGHT, "naive": WRONG, "tempting": WRONG}  # fmt: skip
    # the notebook's checker also takes the usual spellings of a backend, and still tells them apart
    spelled = {"FlashAttention": RIGHT, "flash attention": RIGHT, "Memory efficient": WRONG, "math": WRONG, 0: WRONG}
    spelled |= {"flash_attention": RIGHT, "Flash-Attention": RIGHT, "Memory_Efficient": WRONG}
    assert {a: nb07.check_cpu_choice(a, chosen).status for a in spelled} == spelled
    peak = nb07.peak_memory(nb07.sdpa_fn("flash"), q, k, v)
    holds = bool(peak >= nb07.score_matrix_bytes(nb07.workloads.CPU_SHAPE, q.dtype))
    assert statuses(nb07, "flash_holds_scores", holds, {"taught": False, "tempting": True, "text": "False"}) == {"taught": RIGHT, "tempting": WRONG, "text": WRONG}  # fmt: skip
    seq = nb07.workloads.CPU_SHAPE.seq
    kept = nb07.visible_pairs(seq, seq, "causal") / nb07.visible_pairs(seq, seq, "none")
    probes = {"taught": (seq + 1) / (2 * seq), "half": 0.5, "naive": 1.0, "tempting": 0.25}
    assert statuses(nb07, "causal_fraction", kept, probes) == {"taught": RIGHT, "half": RIGHT, "naive": WRONG, "tempting": WRONG}  # fmt: skip
    # compile_finds_sdpa is graded on the compiled trace in the notebook (a compile here would take too long):
    # the book's comparison of booleans is what the test can probe
    assert statuses(nb07, "compile_finds_sdpa", False, {"taught": False, "tempting": True, "text": "no"}) == {"taught": RIGHT, "tempting": WRONG, "text": WRONG}  # fmt: skip


def test_07_sliding_window_race_names_and_ties():
    details = {"kept": 0.12, "skipped": 77.0}
    apart = {"sdpa": [20.3, 21.0, 19.8], "flex": [6.6, 6.9, 6.5]}
    got = {
        a: nb07.check_faster_window(a, apart, details).status
        for a in ("flex", "FlexAttention", "flex_attention", "sdpa", "SDPA")
    }
    assert got == {"flex": RIGHT, "FlexAttention": RIGHT, "flex_attention": RIGHT, "sdpa": WRONG, "SDPA": WRONG}
    overlap = {"sdpa": [6.0, 7.5, 6.8], "flex": [6.6, 6.9, 7.9]}  # inside the noise: either answer, said to be a tie
    assert {a: nb07.check_faster_window(a, overlap, details).status for a in ("flex", "sdpa")} == {
        "flex": TIE,
        "sdpa": TIE,
    }
    assert nb07.check_faster_window(1, apart, details).status == WRONG


def test_07_prediction_at_the_learners_shape_rejects_the_tempting_counts():
    shape = nb07.AttentionShape(batch=1, heads=2, seq=24, head_dim=16)
    itemsize = 2 if torch.cuda.is_available() else 4  # the lesson runs bf16 on a GPU, float32 on a CPU
    taught = 1 * 2 * 24 * 24 * itemsize
    other_dtype = 1 * 2 * 24 * 24 * (6 - itemsize)  # the other machine's dtype
    for bytes_, kernels, want in ((taught, 6, RIGHT), (24 * 24 * itemsize, 5, WRONG), (other_dtype, 4, WRONG)):
        # naive: one head's matrix and forgetting the clone; tempting: the other dtype and only the four lines
        fb_bytes, fb_kernels = nb07.check_attention_prediction(shape, bytes_, kernels)
        assert (fb_bytes.status, fb_kernels.status) == (want, want)


# -- lesson 08 -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def h200():
    decode = nb08.reference_trace("h200_decoder_decode", missing_ok=True)
    prefill = nb08.reference_trace("h200_decoder_prefill", missing_ok=True)
    if decode is None or prefill is None:
        pytest.skip("the H200 reference traces of lesson 08 are not in this checkout")
    return {"decode": decode, "prefill": prefill, "results": helpers.load_results("h200_decoder")}


def test_08_graph_step_tells_the_taught_model_from_kernel_time_only(h200):
    model = nb08.graph_prediction(h200["decode"], h200["prefill"])
    configs = h200["results"].table("configurations").set_index("configuration")
    measured = float(configs.loc["eager+graph", "decode_us"])
    probes = {
        "taught": model["kernel_us"] + (model["kernels"] - 1) * model["latency_us"],
        "naive: kernel time only": model["kernel_us"],
        "tempting: the median wait": model["kernel_us"] + (model["kernels"] - 1) * model["median_waiting_us"],
        "tempting: 1.25 x kernel time": 1.25 * model["kernel_us"],
        "tempting: the profiled eager step": model["eager_window_us"],
    }
    got = {
        n: nb08.check_graph_step(a, h200["decode"], h200["prefill"], measured, "H200").status for n, a in probes.items()
    }
    assert got == {n: RIGHT if n == "taught" else WRONG for n in probes}
    fb = nb08.check_graph_step(probes["taught"], h200["decode"], h200["prefill"], measured, "H200")
    assert f"{measured:,.0f} us" in fb.message and "upper bound" in fb.message
    assert fb.message.startswith("the computation agrees")  # a formula on the traces, not a measurement
    wrong = nb08.check_graph_step(probes["naive: kernel time only"], h200["decode"], h200["prefill"], measured, "H200")
    assert "Hint:" in wrong.message and f"{model['predicted_us']:,.0f}" not in wrong.message  # no answer in a wrong one
    assert nb08.check_graph_step(None, h200["decode"], h200["prefill"]).status == "not answered yet"


def test_08_graph_table_judges_the_speedup_against_the_unprofiled_eager_step(h200):
    configs = h200["results"].table("configurations").set_index("configuration")
    eager, graphed = float(configs.loc["eager", "decode_us"]), float(configs.loc["eager+graph", "decode_us"])
    table = nb08.graph_table(h200["decode"], h200["prefill"], eager, graphed)["value"]
    assert table["eager step, profiled (first kernel to last)"] > 1.3 * table["eager step, no profiler"]
    assert table["speedup measured (over the eager row)"] == pytest.approx(eager / graphed, abs=0.05)
    assert (
        table["speedup the profiled trace would suggest"]
        > table["speedup predicted (against the eager step, no profiler)"]
    )
    assert table["graphed step, predicted (upper bound)"] >= table["graphed step, measured, no profiler"]


def test_08_gpu_busy_and_decode_per_token(h200):
    parts = nb08.part_breakdown(h200["decode"])
    busy = 1 - nb08.idle_share(parts)
    rows = nb08.kernel_parts(h200["decode"])
    eager = float(h200["results"].table("configurations").set_index("configuration").loc["eager", "decode_us"])
    details = {"busy": busy, "kernels": 700.0, "median_us": 1.7, "eager_us": eager,
               "busy_unprofiled": rows.duration_us.sum() / len(h200["decode"].steps) / eager}  # fmt: skip
    got = statuses(nb08, "gpu_busy", bool(busy > 0.5), {"taught": False, "tempting": True, "text": "no"}, details)
    assert got == {"taught": RIGHT, "tempting": WRONG, "text": WRONG}
    assert "without it the step takes" in nb08.check("gpu_busy", False, False, details=details).message
    # judged on the H200 run: the small CPU model's ratio swings around 10 with the machine's load
    eager_row = h200["results"].table("configurations").set_index("configuration").loc["eager"]
    setup = h200["results"].table("setup").iloc[0]
    ratio = eager_row["prefill_tokens_per_s"] / eager_row["decode_tokens_per_s"]
    assert ratio > 100  # far from the question's 10: no noise can flip it
    details = {"ratio": ratio, "where": "on the H200", "prefill_tokens": setup["prefill_batch"] * setup["prompt_len"], "decode_tokens": 1}  # fmt: skip
    assert statuses(nb08, "decode_per_token", bool(ratio > 10), {"taught": True, "tempting": False}, details) == {"taught": RIGHT, "tempting": WRONG}  # fmt: skip
    assert "on the H200" in nb08.check("decode_per_token", True, True, details=details).message


def test_08_counts_parts_layouts_optimizer_and_memory():
    cfg = helpers.DECODER_CONFIGS["small"]
    layers = cfg.num_hidden_layers
    assert statuses(nb08, "gemms", 7 * layers + 1, {"taught": 7 * layers + 1, "naive": 7 * layers, "tempting": 8 * layers + 1}) == {
        "taught": RIGHT, "naive": WRONG, "tempting": WRONG}  # fmt: skip
    details = {"share": nb08.mlp_flop_share(cfg), "config": cfg}
    assert statuses(nb08, "prefill_part", "mlp", {"taught": "mlp", "naive": "attention", "tempting": "lm_head"}, details) == {
        "taught": RIGHT, "naive": WRONG, "tempting": WRONG}  # fmt: skip
    probes = {
        "taught": {"NN", "NT"},
        "lower": ["nn", "nt"],
        "naive": {"TN"},
        "tempting": {"NN", "NT", "TN"},
        "text": "NN NT",
    }
    assert statuses(nb08, "backward_layouts", {"NN", "NT"}, probes) == {
        "taught": RIGHT, "lower": RIGHT, "naive": WRONG, "tempting": WRONG, "text": WRONG}  # fmt: skip
    # counted, never named: naming the wrong item would tell which one was right
    message = nb08.check("backward_layouts", {"NN", "TN"}, {"NN", "NT"}).message
    assert message.startswith("you said {NN, TN} (1 of your items is not in the answer; 1 missing);")
    assert "unexpected" not in message
    details = {"tensors": 38, "launches": {"for-loop": 380, "foreach": 89, "fused": 2}}
    assert statuses(nb08, "optimizer", "fused", {"taught": "fused", "naive": "for-loop", "tempting": "foreach"}, details) == {
        "taught": RIGHT, "naive": WRONG, "tempting": WRONG}  # fmt: skip
    probes = {"taught": "activations", "naive": "parameters", "tempting": "optimizer state"}
    assert statuses(nb08, "memory_peak", "activations", probes) == {"taught": RIGHT, "naive": WRONG, "tempting": WRONG}


def test_08_recompute_saving_counts_four_tensors():
    # the small model's training view: the notebook measured 33.53 MB saved for 4 x layers x tokens x intermediate x 4 B
    cfg, tokens = helpers.DECODER_CONFIGS["small"], 512
    one = cfg.num_hidden_layers * tokens * cfg.intermediate_size * 4 / 1e6
    measured = 4 * one * 0.999
    probes = {"taught": 4 * one, "mib": 4 * one * 1e6 / 2**20, "naive": 3 * one, "tempting": 5 * one}
    got = statuses(nb08, "recompute_mb", measured, probes)
    # counting in MiB is the right idea in the wrong unit: 4.6% off, inside the 5% band
    assert got == {"taught": RIGHT, "mib": RIGHT, "naive": WRONG, "tempting": WRONG}


def test_08_variant_x_on_its_h200_trace():
    trace = nb08.reference_trace("h200_decoder_variant_x", missing_ok=True)
    if trace is None:
        pytest.skip("the H200 variant trace is not in this checkout")
    measured = helpers.load_results("h200_decoder").value("exercise", "speedup")
    parts = nb08.part_breakdown(trace).set_index("part")
    step, head = parts.attrs["step_us"], parts.loc["lm_head", "time_us"]
    taught = step / (step - head)
    for speedup, want in ((taught, RIGHT), (1 + head / step, WRONG), (step / head, WRONG)):
        # naive: 1 + the share; tempting: the share's inverse (as if the head were the whole step)
        fbs = nb08.check_variant(trace, "lm_head", "Last logits", speedup, measured)
        # the fix and its speedup are one answer: a wrong speedup makes the pair wrong (the fix's feedback says so)
        assert [f.status for f in fbs] == [RIGHT, want, want], (speedup, fbs)
    assert [f.status for f in nb08.check_variant(trace, "mlp", "compile", taught, measured)][:2] == [WRONG, WRONG]
