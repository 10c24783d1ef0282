"""The decoder on names it was not written for: the reading from words, MoE and FP8/FP4 families,
dtype / architecture / scale layout, and the per-name cache.

Training set: tests/data/kernel_names_public.tsv (real kernel names from public repositories and
the third-party traces, each with the family it must get and where the name comes from), the
names of tests/data/thirdparty_kernel_time.tsv.gz and those of the committed reference traces.
"""

from __future__ import annotations

import csv
import gzip
import io
from pathlib import Path

import pytest
from support import DATA

import helpers
import helpers.trace.kernel_names as kn
from helpers.trace.kernel_names import FAMILIES, MAX_NAME_CHARS, READ_CHARS, decode_kernel, decode_kernels

PUBLIC = list(csv.DictReader((DATA / "kernel_names_public.tsv").open(encoding="utf-8"), delimiter="\t"))
TRACES = Path(helpers.__file__).resolve().parents[1] / "traces"
# keys a reading from words may add; every one of them must be listed in `inferred` when it does
WORD_KEYS = ("family", "op", "fused_ops", "dtype", "arch", "scale_dtype", "scale_layout")


def _thirdparty_times() -> dict[str, float]:
    text = gzip.decompress((DATA / "thirdparty_kernel_time.tsv.gz").read_bytes()).decode()
    out: dict[str, float] = {}
    for row in csv.DictReader(io.StringIO(text), delimiter="\t"):
        out[row["name"]] = out.get(row["name"], 0.0) + float(row["total_us"])
    return out


@pytest.fixture(scope="module")
def reference_times() -> dict[str, float]:
    out: dict[str, float] = {}
    for path in sorted(TRACES.glob("*.json.gz")):
        k = helpers.load_trace(path).kernels(allow_empty=True)
        for name, us in k.groupby("name")["duration_us"].sum().items():
            out[name] = out.get(name, 0.0) + float(us)
    assert len(out) > 50
    return out


def test_the_training_file_is_well_formed() -> None:
    assert len(PUBLIC) >= 60
    for row in PUBLIC:
        assert row["family"] in FAMILIES and row["family"] != "unknown", row
        assert row["source"].strip(), row["name"]
    assert len({r["name"] for r in PUBLIC}) == len(PUBLIC)


@pytest.mark.parametrize("row", PUBLIC, ids=lambda r: r["name"][:60])
def test_every_public_name_gets_its_family(row: dict) -> None:
    d = decode_kernel(row["name"])
    assert d["family"] == row["family"], (d["family"], d["summary"], row["source"])


def _raw(text: str) -> dict:
    """What the first library reader that claims the name says, before any reading from words."""
    for parser in kn._PARSERS:
        if parser in (kn.parse_by_tokens, kn.parse_moe_context):
            continue
        fields = parser(text[:READ_CHARS])
        if fields is not None:
            return fields
    return {}


def test_no_label_read_from_words_is_shown_as_fact(reference_times) -> None:
    names = [r["name"] for r in PUBLIC] + list(_thirdparty_times()) + list(reference_times)
    checked = 0
    for name in names:
        d, raw = decode_kernel(name), _raw(name.strip())
        for key in WORD_KEYS:
            if key in d and raw.get(key) != d[key] and d[key] != "unknown":  # not the library reader's own reading
                assert key in d["inferred"], (key, d[key], name[:80])
                checked += 1
        assert set(d["inferred"]) <= set(d)
    assert checked > 100


def test_inferred_families_on_the_training_set_are_right(reference_times) -> None:
    """Every family read from words among the training names matches its label (public file) or is
    the family of its library (third-party and reference names)."""
    labels = {r["name"]: r["family"] for r in PUBLIC}
    inferred = 0
    for name in [*labels, *_thirdparty_times(), *reference_times]:
        d = decode_kernel(name)
        if "family" not in d["inferred"]:
            continue
        inferred += 1
        if name in labels:
            assert d["family"] == labels[name], name[:80]
        elif d["source"] == "cudnn":  # the third-party traces' guesses are cuDNN's convolutions
            assert d["family"] == "convolution", name[:80]
        else:
            pytest.fail(f"an inferred family with no label: {d['family']} for {name[:80]}")
    assert inferred >= 60


@pytest.mark.parametrize(
    ("name", "family", "fields"),
    [
        # a quantized GEMM is a GEMM, its dtype and scale layout read beside it
        ("_w8a8_block_fp8_matmul", "gemm", {"dtype": "fp8"}),
        ("fp8_quant_gemm_kernel", "gemm", {"dtype": "fp8"}),
        ("block_scaled_quant_kernel", "quantize", {"scale_layout": "block-scaled"}),
        # a norm with a fused FP8 quantization is a norm
        ("void mylib::fused_add_rms_norm_dynamic_fp8_quant_kernel<float>(float*)", "normalization", {"dtype": "fp8"}),
        ("l2norm_kernel", "reduction", {}),
        ("topkGatingSoftmax", "moe-routing", {}),
        ("void mylib::topk_kernel<float>(float*)", "sort", {}),
        ("void mylib::rotary_embedding_kernel<float>(float*)", "elementwise", {}),
        ("void mylib::embedding_bag_forward_kernel<float>(float*)", "embedding", {}),
        ("gelu_and_mul_kernel", "fused", {"fused_ops": ["gelu", "mul"]}),
        ("swiglu_fwd", "fused", {"fused_ops": ["silu", "mul"]}),
        ("fused_lamb_kernel", "elementwise", {"op": "lamb"}),
        ("ep_dispatch_kernel", "communication", {}),
        ("moe_combine_kernel", "communication", {}),
        ("gemm_sm100_kernel", "gemm", {"arch": "sm100"}),
        ("ck_gemm_gfx942_kernel", "gemm", {"arch": "gfx942"}),
        ("mxfp8_quantize_kernel", "quantize", {"dtype": "mxfp8"}),
        ("nvfp4_gemm_kernel", "gemm", {"dtype": "nvfp4"}),
        ("gemm_e5m2_kernel", "gemm", {"dtype": "fp8_e5m2"}),
        ("gemm_ue8m0_blockwise_kernel", "gemm", {"scale_dtype": "ue8m0", "scale_layout": "blockwise"}),
        ("int8_rowwise_gemm", "gemm", {"dtype": "int8", "scale_layout": "rowwise"}),
    ],
)
def test_precedence_and_fields_read_from_words(name: str, family: str, fields: dict) -> None:
    d = decode_kernel(name)
    assert d["family"] == family, d["summary"]
    for key, value in fields.items():
        assert d.get(key) == value and key in d["inferred"], (key, d.get(key))
    assert "family" in d["inferred"]


@pytest.mark.parametrize(
    "name",
    [
        "dispatch_kernel",  # dispatch alone says nothing
        "combine",
        "my_custom_kernel",
        "fwd_kernel",
        "void foo::helper<int4>(int4*, float4*)",  # CUDA vector types, not 4-bit data
    ],
)
def test_words_without_a_job_stay_unknown(name: str) -> None:
    d = decode_kernel(name)
    assert d["family"] == "unknown" and "dtype" not in d


def test_a_vector_type_is_not_a_dtype_but_an_fp4_name_is() -> None:
    d = decode_kernel("void deep_ep::intranode::dispatch<8>(int4*, float4*, int*)")
    assert d["family"] == "communication" and "dtype" not in d
    assert decode_kernel("void int4_gemm_kernel<half>(int4*)")["dtype"] == "int4"


def _coverage(names_times: dict[str, float]) -> tuple[float, float]:
    fam = decode_kernels(list(names_times)).set_index("name")["family"].to_dict()
    named = [n for n in names_times if fam[n.strip()] not in ("unknown", "other")]
    total = sum(names_times.values())
    by_time = sum(names_times[n] for n in named) / total if total else 1.0
    return len(named) / len(names_times), by_time


def test_families_cover_95_percent_of_the_training_set(reference_times, capsys) -> None:
    """By count over every training name, by kernel time where a trace gives times (neither unknown nor other)."""
    public = _coverage({r["name"]: 1.0 for r in PUBLIC})
    thirdparty = _coverage(_thirdparty_times())
    reference = _coverage(reference_times)
    with capsys.disabled():
        for label, (count, by_time) in [("public", public), ("third-party", thirdparty), ("reference", reference)]:
            print(f"\n  {label}: {count:.1%} of names, {by_time:.1%} of kernel time get a family")
    assert public[0] >= 0.95
    assert thirdparty[0] >= 0.95 and thirdparty[1] >= 0.95
    assert reference[0] >= 0.95 and reference[1] >= 0.95


def test_one_thousand_distinct_30k_names_are_read_only_up_to_the_cap_and_then_cached(monkeypatch) -> None:
    """The work per name is bounded by what the parsers are given (READ_CHARS), not by the name's length; the
    second pass is served from the cache. Structural, so a slow machine cannot fail it."""
    import helpers.trace.kernel_names as kn

    names = [f"void lib{i}::kernel_{i}<" + ", ".join(f"Shape<{i}, {j}, 64>" for j in range(2500)) for i in range(1000)]
    names = [n[:30_000] + ">(Params)" for n in names]
    assert all(30_000 < len(n) < MAX_NAME_CHARS for n in names)
    seen: list[int] = []

    def spy(parser):
        def read(text):
            seen.append(len(text))
            return parser(text)

        return read

    monkeypatch.setattr(kn, "_PARSERS", [spy(p) for p in kn._PARSERS])
    table = decode_kernels(names)
    assert len(table) == 1000 and seen and max(seen) <= READ_CHARS
    hits = kn._decode_cached.cache_info().hits
    decode_kernels(names)
    assert kn._decode_cached.cache_info().hits - hits == 1000  # the second pass reads the cache
    assert f"first {READ_CHARS:,} of its" in decode_kernel(names[0])["summary"]


def test_a_changed_result_does_not_change_the_cache() -> None:
    name = "void vllm::silu_and_mul_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, int)"
    first = decode_kernel(name)
    first["family"] = "poisoned"
    first["inferred"].append("poisoned")
    first["fused_ops"].clear()
    again = decode_kernel(name)
    assert again["family"] == "fused" and "poisoned" not in again["inferred"]
    assert again["fused_ops"] == ["silu", "mul"] and isinstance(again["inferred"], list)
