"""decode_kernel / decode_kernels: each family of names the course meets, unknown names, bad input."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers.trace.kernel_names import FAMILIES, FIELDS, decode_kernel, decode_kernels

# Names as they appear in the course's traces (H200, CPU) and the blog's A100 profile.
GELU_VEC = (
    "void at::native::vectorized_elementwise_kernel<8, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
    "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, "
    "std::array<char*, 2ul> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::"
    "{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)"
)
MUL_VEC = (
    "void at::native::vectorized_elementwise_kernel<8, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, "
    "c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul> >(...)"
)
COPY_ELEMENTWISE = (
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda("
    "at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1}>"
    "(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() "
    "const::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1} const&)::{lambda(int)#1}>(int, "
    "at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::"
    "operator()() const::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&, "
    "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::"
    "operator()() const::{lambda(c10::BFloat16)#1} const&)::{lambda(int)#1})"
)
ADD_UNROLLED = (
    "void at::native::unrolled_elementwise_kernel<at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>, 4, "
    "TrivialOffsetCalculator<2, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<2>, "
    "at::native::memory::StoreWithCast<1> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>, "
    "TrivialOffsetCalculator<2, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<2>, "
    "at::native::memory::StoreWithCast<1>)"
)
SUM_REDUCE = (
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
    "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
    "unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<"
    "float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4>)"
)


def _absent(d: dict, *keys: str) -> None:
    for key in keys:
        assert key not in d, f"{key} should be absent for {d['name'][:60]}, got {d[key]!r}"


# --- cuBLAS nvjet (H200) ---------------------------------------------------------------------


def test_nvjet_gate_up_gemm() -> None:
    d = decode_kernel("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT")
    assert (d["family"], d["source"], d["arch"]) == ("gemm", "cublas-nvjet", "sm90")
    assert d["tile"] == "256x128x64"
    assert d["stages"] == 4
    assert d["cluster"] == "1x2"
    assert d["layout"] == "TNT"
    assert d["dtype"] == "bf16"
    # undocumented naming: the readings are flagged, and unread tokens are listed, not guessed
    assert {"tile", "stages", "cluster", "dtype"} <= set(d["inferred"])
    assert d["unparsed"] == ["h", "bz", "coopA"]
    _absent(d, "bias", "alignment", "instruction")
    assert "256x128" in d["summary"] and "sm90" in d["summary"]


def test_nvjet_down_gemm() -> None:
    d = decode_kernel("nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_TNT")
    assert d["tile"] == "192x128x64" and d["stages"] == 5 and d["cluster"] == "1x2"
    assert "coopB" in d["unparsed"]


def test_nvjet_bias_epilogue() -> None:
    d = decode_kernel("nvjet_sm90_tst_64x8_64x16_1x2_h_bz_bias_TNT")
    assert d["bias"] is True
    assert d["tile"] == "64x8x64" and d["stages"] == 16
    assert "bias" not in d["unparsed"]
    assert "bias" in d["summary"]


def test_nvjet_layout_explained_as_column_major_linear() -> None:
    explain = decode_kernel("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT")["explain"]
    assert "column-major" in explain
    assert "y^T = w . x^T" in explain
    assert "A T (transposed" in explain and "B N (not transposed" in explain
    # the third letter is not presented as a known fact
    assert "undocumented" in explain


def test_nvjet_without_arch_and_newer_form() -> None:
    d = decode_kernel("nvjet_tst_128x8_64x12_2x1_v_bz_splitK_TNT")
    _absent(d, "arch")
    assert d["tile"] == "128x8x64" and d["cluster"] == "2x1"
    assert "splitK" in d["unparsed"]
    # a form this decoder does not read: the tokens stay unparsed instead of being guessed
    d = decode_kernel("nvjet_sm121_qqtst_mma_64x64x128_6_16x32x128_tmaAB_bz_TNNN")
    assert d["family"] == "gemm" and d["arch"] == "sm121" and d["layout"] == "TNNN"
    _absent(d, "tile", "stages", "cluster", "dtype")
    assert "64x64x128" in d["unparsed"]


# --- A100 names from the blog: cuBLAS ampere kernels and CUTLASS ------------------------------


def test_cublas_ampere() -> None:
    d = decode_kernel("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn")
    assert (d["family"], d["source"], d["arch"]) == ("gemm", "cublas-ampere", "ampere")
    assert d["instruction"] == "16x8x16"
    assert d["tile"] == "128x128x32" and d["stages"] == 5
    assert d["layout"] == "tn" and d["dtype"] == "bf16" and d["accumulate"] == "fp32"
    assert d["unparsed"] == ["ldg8", "f2f"]
    assert "tile" in d["inferred"]
    _absent(d, "alignment", "bias", "cluster")
    assert "nn.Linear" in d["explain"]


def test_cutlass_wmma() -> None:
    d = decode_kernel("cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_32x1_tn_align8")
    assert (d["family"], d["source"], d["arch"]) == ("gemm", "cutlass", "sm80")
    assert d["instruction"] == "16x16x16"
    assert d["tile"] == "32x32x32" and d["stages"] == 1
    assert d["alignment"] == 8 and d["layout"] == "tn" and d["dtype"] == "bf16"
    assert d["opcode_class"] == "wmma_tensorop"
    # CUTLASS documents its names: nothing here is an inference
    assert d["inferred"] == [] and d["unparsed"] == []
    assert "1 stage," in d["summary"]


def test_cutlass_wrapped_in_kernel_template_with_relu() -> None:
    name = (
        "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8>"
        "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8::Params)"
    )
    d = decode_kernel(name)
    assert d["short_name"] == "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8"
    assert d["activation"] == "relu" and d["stages"] == 6 and d["tile"] == "64x64x32"


def test_cutlass3x_documented_form() -> None:
    d = decode_kernel("cutlass3x_sm90_tensorop_s64x128x16gemm_f16_f16_f32_f16_f32_128x128x64_2x1x1_0_ntn_align8")
    assert d["arch"] == "sm90" and d["instruction"] == "64x128x16"
    assert d["tile"] == "128x128x64" and d["cluster"] == "2x1x1" and d["layout"] == "ntn"
    _absent(d, "stages")  # 0 means "chosen automatically", not zero stages


# --- Inductor -----------------------------------------------------------------------------------


def test_triton_pointwise_fused() -> None:
    d = decode_kernel("triton_poi_fused__unsafe_view_gelu_mul_0")
    assert (d["family"], d["source"]) == ("fused", "triton-inductor")
    assert d["kind"] == "pointwise" and d["kind_code"] == "poi"
    assert d["fused_ops"] == ["_unsafe_view", "gelu", "mul"]
    assert d["index"] == 0
    _absent(d, "dtype", "tile", "layout")
    assert "alphabetically" in d["explain"]


def test_triton_reduction_and_persistent_reduction() -> None:
    red = decode_kernel("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0")
    # a mean and an rsqrt in one reduction: Inductor's decomposed RMSNorm, so the ops say normalization
    assert red["family"] == "normalization" and red["kind"] == "reduction"
    assert decode_kernel("triton_red_fused_add_sum_1")["family"] == "reduction"
    assert red["fused_ops"] == ["_to_copy", "add", "mean", "mul", "pow", "rsqrt"]
    per = decode_kernel("triton_per_fused__softmax_1")
    # the kind says reduction; the ops say what for: a softmax (a norm would read as normalization)
    assert per["family"] == "softmax" and per["kind"] == "persistent reduction" and per["index"] == 1
    assert per["fused_ops"] == ["_softmax"]
    assert decode_kernel("triton_per_fused_native_layer_norm_0")["family"] == "normalization"


def test_triton_template_gemms() -> None:
    d = decode_kernel("triton_tem_fused_mm_t_view_0")
    assert (d["family"], d["kind"]) == ("gemm", "template")
    assert d["fused_ops"] == ["mm", "t", "view"]
    assert "fused in" not in d["summary"]  # views only: nothing computed besides the GEMM
    d = decode_kernel("triton_tem_fused__unsafe_view_gelu_mm_mul_t_view_2")
    assert d["family"] == "gemm" and d["index"] == 2
    assert d["fused_ops"] == ["_unsafe_view", "gelu", "mm", "mul", "t", "view"]
    assert "gelu, mul fused in" in d["summary"]


def test_triton_single_op_and_nameless() -> None:
    assert decode_kernel("triton_poi_fused_gelu_0")["family"] == "elementwise"
    assert decode_kernel("triton_poi_fused_clone_3")["family"] == "copy"
    d = decode_kernel("triton_poi_fused_0")
    assert d["family"] == "elementwise"
    _absent(d, "fused_ops")


def test_cpp_inductor_kernel() -> None:
    d = decode_kernel("graph_0_cpp_fused__unsafe_view_gelu_mul_0")
    assert (d["family"], d["source"]) == ("fused", "cpp-inductor")
    assert d["fused_ops"] == ["_unsafe_view", "gelu", "mul"]
    assert d["inferred"] == ["family"]  # a C++ kernel name carries no kind
    _absent(d, "kind")
    assert decode_kernel("cpp_fused_sum_2")["family"] == "reduction"


# --- ATen elementwise templates ------------------------------------------------------------------


def test_aten_gelu_vectorized() -> None:
    d = decode_kernel(GELU_VEC)
    assert (d["family"], d["source"], d["op"]) == ("elementwise", "aten", "gelu")
    assert d["vector_width"] == 8 and d["dtype"] == "bf16"
    assert d["short_name"] == "vectorized_elementwise_kernel<gelu>"
    _absent(d, "tile", "layout", "fused_ops")


def test_aten_mul_binary_functor() -> None:
    d = decode_kernel(MUL_VEC)
    assert (d["family"], d["op"], d["vector_width"], d["dtype"]) == ("elementwise", "mul", 8, "bf16")


def test_aten_elementwise_unrolled_reduce() -> None:
    d = decode_kernel(COPY_ELEMENTWISE)
    assert (d["family"], d["op"]) == ("copy", "copy")
    assert d["block_threads"] == 128 and d["items_per_thread"] == 2
    assert d["dtype"] == "bf16"  # from the lambda, not the lambda(int) loop index
    d = decode_kernel(ADD_UNROLLED)
    assert (d["family"], d["op"], d["items_per_thread"], d["dtype"]) == ("elementwise", "add", 4, "bf16")
    d = decode_kernel(SUM_REDUCE)
    assert (d["family"], d["op"], d["block_threads"]) == ("reduction", "sum", 512)
    _absent(d, "dtype")


def test_bare_aten_template_names() -> None:
    for name, family in [
        ("unrolled_elementwise_kernel", "elementwise"),
        ("reduce_kernel", "reduction"),
        ("at::native::elementwise_kernel<128, 2, ...>", "elementwise"),
    ]:
        d = decode_kernel(name)
        assert (d["family"], d["source"]) == (family, "aten"), name
    assert decode_kernel("reduce_kernel")["inferred"] == ["source"]
    assert decode_kernel("at::native::elementwise_kernel<128, 2, ...>")["block_threads"] == 128


# --- memory operations, Liger, unknown -------------------------------------------------------------


def test_memset_and_memcpy() -> None:
    d = decode_kernel("Memset (Device)")
    assert (d["family"], d["source"]) == ("memset", "cuda")
    d = decode_kernel("Memcpy DtoD (Device -> Device)")
    assert (d["family"], d["direction"], d["src_memory"], d["dst_memory"]) == ("copy", "DtoD", "Device", "Device")
    d = decode_kernel("Memcpy HtoD (Pageable -> Device)")
    assert (d["direction"], d["src_memory"]) == ("HtoD", "Pageable")
    assert "pinned" in d["summary"]


def test_liger_geglu() -> None:
    d = decode_kernel("_geglu_tanh_forward_kernel")
    assert (d["family"], d["source"]) == ("fused", "liger")
    assert d["fused_ops"] == ["gelu", "mul"]
    assert "source" in d["inferred"]


def test_course_triton_kernels() -> None:
    d = decode_kernel("_geglu_kernel")
    assert (d["family"], d["source"], d["fused_ops"]) == ("fused", "course-triton", ["gelu", "mul"])
    d = decode_kernel("_gate_up_geglu_tma_kernel")
    assert (d["family"], d["source"]) == ("gemm", "course-triton")
    assert d["inferred"] == ["source"]
    _absent(d, "tile", "layout")


@pytest.mark.parametrize(
    "name", ["my_custom_kernel", "fwd_kernel", "triton_poi_something", "cpp_helper", "x", "kernel<1, 2>"]
)
def test_unknown_names_invent_nothing(name: str) -> None:
    d = decode_kernel(name)
    assert (d["family"], d["source"]) == ("unknown", "unknown")
    assert set(d) == {"name", "short_name", "family", "source", "summary", "explain", "inferred", "unparsed"}
    assert d["explain"] is None and d["inferred"] == [] and d["unparsed"] == []


def test_every_result_is_well_formed() -> None:
    names = [
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT",
        GELU_VEC,
        MUL_VEC,
        SUM_REDUCE,
        "Memset (Device)",
        "triton_poi_fused__unsafe_view_gelu_mul_0",
        "_geglu_tanh_forward_kernel",
        "unknown_thing",
    ]
    for name in names:
        d = decode_kernel(name)
        assert d["family"] in FAMILIES
        assert set(d) <= set(FIELDS)
        assert isinstance(d["summary"], str) and d["summary"].endswith(".")
        assert set(d["inferred"]) <= set(d)


def test_whitespace_is_stripped() -> None:
    assert decode_kernel("  Memset (Device)\n")["name"] == "Memset (Device)"


# --- bad input --------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [None, 3, b"nvjet_sm90", ["Memset (Device)"]])
def test_non_string_raises_type_error(bad: object) -> None:
    with pytest.raises(TypeError, match="str"):
        decode_kernel(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", "   "])
def test_empty_raises_value_error(bad: str) -> None:
    with pytest.raises(ValueError, match="empty"):
        decode_kernel(bad)


# --- DataFrame form ------------------------------------------------------------------------------------


def test_decode_kernels_frame() -> None:
    names = [
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT",
        GELU_VEC,
        "Memset (Device)",
        GELU_VEC,
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT",
        "mystery",
    ]
    df = decode_kernels(pd.Series(names))
    assert isinstance(df, pd.DataFrame)
    assert list(df["name"]) == [names[0], GELU_VEC, "Memset (Device)", "mystery"]  # distinct, first-seen order
    assert list(df.columns[:4]) == ["name", "short_name", "family", "source"]
    assert {"tile", "vector_width", "op", "summary", "inferred"} <= set(df.columns)
    assert "fused_ops" not in df.columns  # no row has it
    row = df.set_index("name").loc["Memset (Device)"]
    assert row["family"] == "memset" and row["tile"] is None
    stages = df.set_index("name").loc[names[0], "stages"]
    assert stages == 4 and isinstance(stages, int)  # not 4.0 next to a missing value


def test_decode_kernels_empty_and_bad() -> None:
    df = decode_kernels([])
    assert df.empty and {"name", "family", "source", "summary"} <= set(df.columns)
    with pytest.raises(TypeError):
        decode_kernels("Memset (Device)")
    with pytest.raises(TypeError):
        decode_kernels(["Memset (Device)", 7])
