"""Kernel families on the names people's traces hold: every GPU family, NCCL, cuDNN, attention, ROCm.

Names are real: copied from third-party traces (tests/data, SOURCES.tsv) and from public profiles
and issues (cuDNN SDPA, FlashAttention, memory-efficient attention, NCCL 2.19+ names). The
coverage test prints, per third-party trace, the share of kernel time that gets a family.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
from pathlib import Path

import pytest
from support import DATA

import helpers
from helpers.trace.kernel_names import FAMILIES, MAX_NAME_CHARS, decode_kernel, inductor

# (name, family, source) as the decoder must read them; the names are verbatim from real traces
REAL_NAMES = [
    # cuDNN convolutions (A100 AlexNet, V100 and A100 training traces)
    (
        "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_"
        "warpsize2x2x1_g1_tensor16x8x8_alignc4_execute_kernel_cudnn",
        "convolution",
        "cudnn",
    ),
    (
        "sm80_xmma_dgrad_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x128x32_stage5_warpsize2x2x1_g1_"
        "tensor16x8x8_execute_kernel_cudnn_infer",
        "convolution",
        "cudnn",
    ),
    (
        "sm80_xmma_wgrad_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x128x32_stage5_"
        "warpsize2x2x1_g1_tensor16x8x8_t1r1s1_execute_kernel_cudnn_train",
        "convolution",
        "cudnn",
    ),
    ("cudnn_infer_volta_scudnn_128x64_relu_medium_nn_v1", "convolution", "cudnn"),
    ("cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1", "convolution", "cudnn"),
    (
        "void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688fprop_optimized_tf32_128x128_32x4_nhwc_align4>"
        "(cutlass_tensorop_s1688fprop_optimized_tf32_128x128_32x4_nhwc_align4::Params)",
        "convolution",
        "cudnn",
    ),
    (
        "_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS1_11threadblock22ImplicitGemm"
        "MultistageINS_4gemm9GemmShapeILi128ELi128ELi32EEENS4_52Conv2dWgradOutputGradientTileAccessIteratorOptimized",
        "convolution",
        "cudnn",
    ),
    (
        "void fft2d_r2c_32x32<float, false, 0u, false>(float2*, float const*, int, int, int, int, int, int, int, int, "
        "int, cudnn::reduced_divisor, bool, int2, int, int)",
        "convolution",
        "cudnn",
    ),
    (
        "void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(cudnn::winograd_nonfused::"
        "WinogradDataParams<float, float>)",
        "convolution",
        "cudnn",
    ),
    (
        "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 128, true, 1, true>(cudnnTensorStruct, float const*, "
        "cudnnTensorStruct, float*, float const*, float const*, float, float, float*, float*, float*, float*, float, float)",
        "normalization",
        "cudnn",
    ),
    (
        "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>"
        "(cudnn::ops::nchw2nhwc_params_t<float>, float const*, float*)",
        "copy",
        "cudnn",
    ),
    # NCCL, three naming schemes
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "communication", "nccl"),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", "communication", "nccl"),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication", "nccl"),
    ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", "communication", "nccl"),
    ("ncclDevKernel_AllGather_RING_LL", "communication", "nccl"),
    ("ncclAllReduceRingLLKernel_sum_f32(CollectiveArgs)", "communication", "nccl"),
    # attention
    (
        "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0",
        "attention",
        "cudnn",
    ),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x128_1x", "attention", "cudnn"),
    (
        "fmha_cutlassF_f16_aligned_64x128_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::half_t, "
        "cutlass::arch::Sm80, true, 64, 128, 128, true, true>::Params)",
        "attention",
        "pytorch-mem-efficient",
    ),
    ("fmha_cutlassB_bf16_aligned_128x128_k128_sm80", "attention", "xformers-cutlass"),
    (
        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, "
        "Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, "
        "false>(pytorch_flash::Flash_fwd_params)",
        "attention",
        "pytorch-flash",
    ),
    ("triton_tem_fused_flex_attention_0", "attention", "triton-inductor"),
    ("triton_tem_fused_flex_attention_backward_mul_1", "attention", "triton-inductor"),
    # softmax, normalization and other ATen kernels
    (
        "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true, false>(float*, float const*, "
        "int, int, int, bool const*, int, bool)",
        "softmax",
        "aten",
    ),
    (
        "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel<float, float>(long, long, float const*, "
        "float const*, float const*, float const*, float*, float*)",
        "normalization",
        "aten",
    ),
    (
        "void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int, float const*, long, long, "
        "long, int, int, int, int, int, int, int, int, int, int, float*, long*)",
        "reduction",
        "aten",
    ),
    (
        "void at::native::elementwise_kernel_manual_unroll<128, 8, at::native::gpu_kernel_impl_nocast<"
        "at::native::CUDAFunctor_add<float> >(at::TensorIteratorBase&, at::native::CUDAFunctor_add<float> const&)"
        "::{lambda(int)#1}>(int, at::native::CUDAFunctor_add<float>)",
        "elementwise",
        "aten",
    ),
    # cuBLAS helpers
    (
        "void gemvNSP_kernel<float, float, float, float, 1, 32, 4, 1024, cublasGemvParams<cublasGemvTensorStridedBatched"
        "<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float> >"
        "(cublasGemvParams<cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, "
        "cublasGemvTensorStridedBatched<float>, float>)",
        "gemm",
        "cublas",
    ),
    (
        "void splitKreduce_kernel<32, 16, int, float, float, float, float, true, false, false>(cublasSplitKParams<float>, "
        "float const*, float const*, float*, float const*, float const*, float const*, float const*, float*, void*, long, "
        "float*, int*)",
        "gemm",
        "cublas",
    ),
    # ROCm
    (
        "Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CADS0_EPS0_"
        "GRVWA2_GRVWB2_GSUAMB_ISA90a_IU1_K1_LBSPPA128",
        "gemm",
        "tensile",
    ),
    (
        "igemm_fwd_gtcx_nhwc_fp16_bx0_ex1_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1_1x8x1x16_tb1x8x2x1_1x8x1x16",
        "convolution",
        "miopen",
    ),
    ("MIOpenBatchNormFwdTrainSpatial", "normalization", "miopen"),
    (
        "_ZN2ck27kernel_gemm_xdl_cshuffle_v3INS_30GridwiseGemmMX_xdl_cshuffle_v3INS_13tensor_layout4gemm8RowMajorENS3_"
        "11ColumnMajorES4_NS_9f4x2_pk_tENS_11e8m0_bexp_tES6_S7_fDF16_DF16_NS_16tensor_operation12element_w",
        "gemm",
        "composable-kernel",
    ),
    (
        "ck_tile::kentry<ck_tile::gfx950_t, 2, ck_tile::FmhaFwdKernel<ck_tile::BlockFmhaPipelineQRKSVSSageAttn<"
        "ck_tile::BlockFmhaPipelineProblem<pk_float4_e2m1_t, pk_float4_e2m1_t, pk_float4_e2m1_t, float, float, float>>>>",
        "attention",
        "composable-kernel",
    ),
    ("_ZN5aiter24paged_attention_ll4mi_QKV_mfma16_kernelI", "attention", "aiter"),
    ("SubTensorOpWithScalar1d", "elementwise", "miopen"),
    ("batched_transpose_32x16_dword", "copy", "miopen"),
    # FBGEMM and CUB (recommendation models)
    (
        "void split_embedding_codegen_forward_unweighted_kernel<c10::Half, c10::Half, float, false, long, 2ul, 32ul>"
        "(at::GenericPackedTensorAccessor<c10::Half, 1ul, at::RestrictPtrTraits, long>)",
        "embedding",
        "fbgemm",
    ),
    (
        "void cub::DeviceRadixSortOnesweepKernel<cub::DeviceRadixSortPolicy<long, int, int>::Policy800, false, long, int, "
        "int, int>(int*, int*, int*, int const*, long*, long const*, int*, int const*, int, int, int)",
        "sort",
        "cub",
    ),
]


@pytest.mark.parametrize(("name", "family", "source"), REAL_NAMES, ids=lambda v: v[:50] if isinstance(v, str) else v)
def test_real_names_get_their_family_and_library(name: str, family: str, source: str) -> None:
    d = decode_kernel(name)
    assert (d["family"], d["source"]) == (family, source), d["summary"]
    assert d["family"] in FAMILIES and set(d["inferred"]) <= set(d)


def test_xmma_convolutions_are_never_cublas_gemms() -> None:
    """The false claim of issue 12: fprop/dgrad/wgrad implicit-GEMM kernels are cuDNN convolutions."""
    phases = {}
    for pass_name in ("fprop", "dgrad", "wgrad"):
        d = decode_kernel(
            f"sm80_xmma_{pass_name}_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x128x32_stage5"
        )
        assert d["family"] == "convolution" and not d["source"].startswith("cublas")
        phases[pass_name] = d["phase"]
    assert phases == {
        "fprop": "forward",
        "dgrad": "backward (input gradient)",
        "wgrad": "backward (weight gradient)",
    }
    # an xmma GEMM stays a GEMM
    assert (
        decode_kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute")[
            "family"
        ]
        == "gemm"
    )


def test_nccl_fields_are_read_from_the_name() -> None:
    d = decode_kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)")
    assert (d["collective"], d["reduce_op"], d["dtype"], d["algorithm"], d["protocol"]) == (
        "AllReduce",
        "sum",
        "bf16",
        "RING",
        "LL",
    )
    d = decode_kernel("ncclDevKernel_AllReduce_Sum_f32_NVLS_TREE_SIMPLE")
    assert (d["algorithm"], d["protocol"]) == ("NVLS_TREE", "SIMPLE")  # not TREE with a stray NVLS
    d = decode_kernel("ncclKernel_AllReduce_RING_LL128_Sum___nv_bfloat16(ncclDevComm*, unsigned long, ncclWork*)")
    assert (d["protocol"], d["dtype"]) == ("LL128", "bf16")
    # send/receive kernels of NCCL 2.8-2.18 carry a placeholder op and type: not reported as a sum
    d = decode_kernel("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)")
    assert d["collective"] == "SendRecv" and "reduce_op" not in d and "dtype" not in d and "placeholder" in d["explain"]
    d = decode_kernel("ncclDevKernel_AllGather_RING_LL")
    assert "reduce_op" not in d and d["algorithm"] == "RING"


def _real(prefix: str) -> str:
    return next(name for name, _, _ in REAL_NAMES if name.startswith(prefix))


def test_attention_fields_and_guesses_are_labelled() -> None:
    d = decode_kernel(_real("void pytorch_flash::"))
    assert (d["head_dim"], d["tile"], d["dtype"], d["phase"]) == (128, "128x64", "bf16", "forward")
    d = decode_kernel("fmha_cutlassF_bf16_aligned_64x128_rf_sm80")
    assert (d["tile"], d["arch"], d["dtype"]) == ("64x128", "sm80", "bf16") and d["inferred"] == ["source"]
    # a bare FA2 name: the family is right, the library an attribution by name
    d = decode_kernel("flash_fwd_kernel")
    assert d["family"] == "attention" and "source" in d["inferred"]
    # a name no library claims, read from its words: always marked as a guess
    d = decode_kernel("_my_attn_fwd_kernel")
    assert d["family"] == "attention" and d["source"] == "unknown" and d["inferred"] == ["family"]


def test_partly_read_names_say_what_was_not_read() -> None:
    d = decode_kernel(_real("Cijk_"))  # Tensile: ~20 tuning tokens
    assert d["tile"] == "64x16x32" and d["arch"] == "gfx90a" and d["layout"] == "TN"
    assert "LDSB0" in d["unparsed"] and "dtype" in d["inferred"]
    d = decode_kernel("triton_poi_fused_add_mul_0_0d1d2de")  # Triton 2.1 appended its specialisation
    assert d["fused_ops"] == ["add", "mul"] and d["unparsed"] == ["0d1d2de"]
    old = decode_kernel("triton__0d1d2d3de4de")  # torch 2.0 Inductor: neither kind nor ops in the name
    assert (old["family"], old["source"]) == ("unknown", "triton-inductor") and old["inferred"] == ["source"]


def test_a_40_kb_name_is_refused_without_reading_it(monkeypatch) -> None:
    import helpers.trace.kernel_names as names_mod

    def never(_text):  # any parser call would mean the long name was read
        raise AssertionError("a parser ran on a name past the length limit")

    monkeypatch.setattr(names_mod, "_PARSERS", (never,))
    name = "triton_poi_fused_" + "_".join(["add"] * 10_000) + "_0"
    assert len(name) > 40_000 > MAX_NAME_CHARS
    d = decode_kernel(name)
    assert d["family"] == "unknown" and "too long to decode" in d["summary"].lower()
    assert d["name"] == name and d["short_name"] != name


def test_inductor_op_split_is_linear_in_the_name(monkeypatch) -> None:
    """Count vocabulary lookups: four times the tokens must cost about four times the lookups."""
    vocab = inductor.op_vocabulary()

    class Counting(frozenset):
        lookups = 0

        def __contains__(self, item):
            Counting.lookups += 1
            return frozenset.__contains__(self, item)

    counting = Counting(vocab)
    monkeypatch.setattr(inductor, "op_vocabulary", lambda: counting)
    costs = []
    for n in (500, 2000):
        Counting.lookups = 0
        inductor._split_ops("_".join(["gelu", "mul", "unknownword"] * n))
        costs.append(Counting.lookups)
    assert 3.5 < costs[1] / costs[0] < 4.5, costs  # linear (quadratic would give ~16)


def _coverage_from_table() -> dict[str, tuple[float, float]]:
    """Per trace of thirdparty_kernel_time.tsv.gz: (kernel time with a family / all kernel time, total us)."""
    text = gzip.decompress((DATA / "thirdparty_kernel_time.tsv.gz").read_bytes()).decode()
    per: dict[str, list[float]] = {}
    names = {}
    for row in csv.DictReader(io.StringIO(text), delimiter="\t"):
        names.setdefault(row["name"], None)
        per.setdefault(row["trace"], [])
        per[row["trace"]].append((row["name"], float(row["total_us"])))
    decoded = helpers.decode_kernels(list(names)).set_index("name")["family"].to_dict()
    out = {}
    for trace, items in per.items():
        total = sum(us for _, us in items)
        known = sum(us for name, us in items if decoded[name] != "unknown")
        out[trace] = (known / total if total else 1.0, total)
    return out


def test_families_cover_95_percent_of_kernel_time_on_every_third_party_trace(capsys) -> None:
    coverage = _coverage_from_table()
    with capsys.disabled():
        print("\nfamily coverage of kernel time per third-party trace:")
        for trace, (share, total) in sorted(coverage.items()):
            print(f"  {share:7.1%} of {total / 1e3:10.1f} ms  {trace}")
    gpu = {t: c for t, c in coverage.items() if "mtia" not in t}  # MTIA job names say nothing: not GPU kernels
    assert len(gpu) >= 10
    low = {t: f"{share:.1%}" for t, (share, _) in gpu.items() if share < 0.95}
    assert not low, f"traces where families cover less than 95% of kernel time: {low}"


def test_coverage_on_the_full_traces_when_asked(capsys) -> None:
    """The same check on the full third-party traces (about 20 s): set COURSE_THIRDPARTY_TRACES to their folder."""
    folder = Path(os.environ.get("COURSE_THIRDPARTY_TRACES", ""))
    if not os.environ.get("COURSE_THIRDPARTY_TRACES") or not folder.is_dir():
        pytest.skip(
            "set COURSE_THIRDPARTY_TRACES=<folder of the third-party traces> to run (tests/data covers the names)"
        )
    for path in sorted(folder.glob("*.json.gz")):
        trace = helpers.load_trace(path)
        k = trace.kernels(allow_empty=True)
        if k.empty or "mtia" in path.name:
            continue
        fam = k["name"].map(helpers.decode_kernels(k["name"].unique()).set_index("name")["family"])
        share = k.loc[fam != "unknown", "duration_us"].sum() / k["duration_us"].sum()
        with capsys.disabled():
            print(f"  {share:7.1%}  {path.name}")
        assert share >= 0.95, path.name


@pytest.mark.parametrize(
    ("name", "family", "source"),
    [
        (
            "void cutlass__5x_cudnn::Kernel<cutlass_tensorop_f16_s16816fprop_optimized_f16_128x128_32x5_nhwc_align8>"
            "(cutlass_tensorop_f16_s16816fprop_optimized_f16_128x128_32x5_nhwc_align8::Params)",
            "convolution",
            "cudnn",
        ),
        (
            "void xmma_cudnn::gemm::kernel<xmma_cudnn::implicit_gemm::fprop_indexed::Kernel_traits<xmma_cudnn::Ampere_hmma"
            "_fp32_traits, xmma_cudnn::Cta_tile<xmma_cudnn::Ampere, 64, 64, 64, 2, 2, 1, 1>>, false>(xmma_cudnn::"
            "implicit_gemm::fprop_indexed::Params)",
            "convolution",
            "cudnn",
        ),
        (
            "void attention_kernel_batched_impl<AttentionKernel<cutlass::half_t, cutlass::arch::Sm80, true, 64, 64, 64, "
            "true, true> >(AttentionKernel<cutlass::half_t, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
            "attention",
            "xformers-cutlass",
        ),
        ("triton_red_fused__log_softmax_0", "softmax", "triton-inductor"),
        ("triton_tem_fused_convolution_0", "convolution", "triton-inductor"),
        (
            "void wvSplitK_hf_sml_<__half, 64, 2, 16, 8, 2, 1>(int, int, __half const*, __half const*, __half*)",
            "gemm",
            "unknown",
        ),
    ],
)
def test_older_and_vendor_forms(name: str, family: str, source: str) -> None:
    d = decode_kernel(name)
    assert (d["family"], d["source"]) == (family, source), d["summary"]


@pytest.mark.parametrize(
    "name, family, source",
    [
        # recorded on the H200 with torch 2.11 (scripts/record_analysis_traces.py, 2026-12-01)
        (
            "void cudnn::fusion::compute_dot_do_o_specialized<true, 128>(void const*, void const*, void*, void*, "
            "unsigned int, unsigned int, float, void const*, bool, int, int)",
            "attention",
            "cudnn",
        ),
        (
            "void cudnn::fusion::convert_dq_to_16bits<true>(void const*, void*, unsigned int, float const*, bool, bool)",
            "attention",
            "cudnn",
        ),
        (
            "void nhwcAddPaddingKernel<__nv_bfloat16, __nv_bfloat16, float, true, (cudnnKernelDataType_t)0>(int, int, "
            "__nv_bfloat16 const*, __nv_bfloat16*, int, float, float, cudnn::reduced_divisor)",
            "copy",
            "cudnn",
        ),
        (
            "void at::native::(anonymous namespace)::unrolled_elementwise_kernel_for_multi_outputs<3, "
            "at::native::(anonymous namespace)::batch_norm_update_stats_and_invert(at::Tensor const&, "
            "double, double, long)::{lambda()#1}::operator()() const::{lambda(float, float, c10::BFloat16, "
            "c10::BFloat16)#1}, std::array<char*, 7ul>, TrivialOffsetCalculator<4, unsigned int>, "
            "TrivialOffsetCalculator<3, unsigned int> >(int)",
            "normalization",
            "aten",
        ),
    ],
)
def test_torch_2_11_names_seen_on_the_h200(name, family, source):
    decoded = decode_kernel(name)
    assert (decoded["family"], decoded["source"]) == (family, source)
