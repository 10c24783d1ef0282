"""cuDNN's kernels: convolutions (implicit GEMM, Winograd, FFT), batch norm, fused attention (SDPA).

cuDNN does not document its kernel names. What is read here comes from the words the names
share with cuDNN's documented API: ``fprop`` / ``dgrad`` / ``wgrad`` are its names for a
convolution's forward pass, gradient with respect to the input (data) and to the weights
(``cudnnConvolutionForward``, ``...BackwardData``, ``...BackwardFilter``); ``bn_fw_tr`` /
``bn_fw_inf`` / ``bn_bw`` are batch-norm forward (training, inference) and backward. Names such
as ``cudnn_infer_volta_scudnn_128x64_relu_medium_nn_v1`` say only "cuDNN, Volta, single precision"
and a tile: that such a kernel is a convolution is an inference (it is the job cuDNN runs them
for), listed in ``inferred``.
"""

from __future__ import annotations

import re
from typing import Any

from .common import mangled_words

PHASES = {
    "fprop": "forward",
    "dgrad": "backward (input gradient)",
    "wgrad": "backward (weight gradient)",
    "bprop": "backward",
}
_CONV_EXPLAIN = (
    "cuDNN names a convolution's three passes fprop (forward), dgrad (gradient with respect to the "
    "input) and wgrad (gradient with respect to the weights), as in its API "
    "(cudnnConvolutionForward, BackwardData, BackwardFilter). Implicit GEMM computes the "
    "convolution as a matrix product without materialising the unfolded input."
)


def _phase(text: str) -> str | None:
    m = re.search(r"(?<![a-z])(fprop|dgrad|wgrad|bprop)", text)
    return PHASES[m.group(1)] if m else None


def _conv(source: str, short: str, what: str, text: str, inferred: list[str] | None = None, **extra: Any) -> dict:
    info: dict[str, Any] = {"family": "convolution", "source": source, "short_name": short}
    phase = _phase(text)
    if phase:
        info["phase"] = phase
    info.update(extra)
    info["inferred"] = list(inferred or [])
    info["summary"] = f"{what}" + (f", {phase} pass" if phase else "") + "."
    info["explain"] = _CONV_EXPLAIN
    return info


def parse_cudnn(text: str) -> dict[str, Any] | None:
    # cuDNN's fused attention (its SDPA engine), e.g.
    # cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0
    m = re.search(r"\bcudnn_generated_\w+", text)
    if m:
        kname = m.group(0)
        if "_sdpa_" in kname:
            info: dict[str, Any] = {"family": "attention", "source": "cudnn", "short_name": kname}
            if a := re.search(r"_(sm\d+)_", kname):
                info["arch"] = a.group(1)
            phase = _phase(kname)
            if phase:
                info["phase"] = phase
            if d := re.search(r"_(f16|bf16|fp8|e4m3|e5m2)_", kname):
                info["dtype"] = {"f16": "fp16"}.get(d.group(1), d.group(1))
                info["inferred"] = ["dtype"]
            info["summary"] = (
                "cuDNN fused attention (the cuDNN backend of scaled_dot_product_attention)"
                + (f", {phase} pass" if phase else "")
                + "."
            )
            info["explain"] = (
                "cuDNN generates its SDPA kernels at run time ('generated'); 'flash' is the "
                "FlashAttention-style algorithm, fprop/bprop the forward and backward passes. "
                "The knob and tile numbers are not documented."
            )
            return info
        return {
            "family": "unknown",
            "source": "cudnn",
            "short_name": kname,
            "summary": "A kernel cuDNN generated at run time; its name does not say what it computes.",
        }
    words = mangled_words(text)
    if words and any(w.startswith(("cutlass_cudnn", "cudnn")) for w in words[:2]):
        joined = " ".join(words)
        if "Convolution" in joined or "conv" in words:
            direction = re.search(r"Conv[23]d(Fprop|Dgrad|Wgrad)", joined)
            info = _conv(
                "cudnn",
                "::".join(words[:2]),
                "cuDNN convolution (a CUTLASS implicit-GEMM kernel inside cuDNN)",
                direction.group(1).lower() if direction else joined,
            )
            return info
    # xmma kernels: sm80_xmma_fprop_implicit_gemm_..._cudnn, sm86_xmma_dgrad_...
    m = re.search(r"\b(sm\d+)_xmma_(fprop|dgrad|wgrad)_\w+", text)
    if m:
        kname = m.group(0)
        cudnn = "cudnn" in kname
        info = _conv(
            "cudnn" if cudnn else "xmma",
            kname,
            "cuDNN convolution (xmma implicit-GEMM kernel)" if cudnn else "Convolution (xmma implicit-GEMM kernel)",
            m.group(2),
            inferred=[] if cudnn else ["source"],
            arch=m.group(1),
        )
        if t := re.search(r"tilesize(\d+x\d+x\d+)", kname):
            info["tile"] = t.group(1)
        if s := re.search(r"_stage(\d+)", kname):
            info["stages"] = int(s.group(1))
        info["inferred"] += [k for k in ("tile", "stages") if k in info]
        if "nhwc" in kname or "nchw" in kname:
            info["unparsed"] = re.findall(r"n[hc]w[ch]\w*?(?=_|$)", kname)[:2]
        return info
    # CUTLASS convolution kernels inside cuDNN: cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688fprop_...>
    m = re.search(r"\b(cutlass\w*?_cudnn\w*)::", text)
    if m:
        inner = re.search(r"cutlass_tensorop_\w+", text)
        short = inner.group(0) if inner else m.group(1)
        what = "cuDNN convolution (a CUTLASS kernel inside cuDNN)"
        if "ReduceSplitK" in text:
            return _conv("cudnn", "cutlass_cudnn::ReduceSplitK", what + ": split-K reduction", text)
        info = _conv("cudnn", short, what, short)
        if t := re.search(r"_(\d+x\d+)_(\d+)x(\d+)_", short):
            info["tile"], info["stages"] = f"{t.group(1)}x{t.group(2)}", int(t.group(3))
        return info
    # cuDNN 8's xmma kernels in its own namespace: xmma_cudnn::gemm::kernel<xmma_cudnn::implicit_gemm::fprop...>
    m = re.search(r"\b(xmma\w*?_cudnn\w*)::", text)
    if m:
        if re.search(r"fprop|dgrad|wgrad|implicit_gemm|conv", text):
            return _conv("cudnn", m.group(1), "cuDNN convolution (xmma implicit-GEMM kernel)", text)
        return {"family": "gemm", "source": "cudnn", "short_name": m.group(1), "summary": "A GEMM kernel run by cuDNN."}
    # scudnn / hcudnn kernels: cudnn_infer_volta_scudnn_128x64_relu_medium_nn_v1, cudnn_ampere_scudnn_...; like
    # cuBLAS's names they may spell the operand type first and the tensor-core shape in the letter
    # (volta_fp16_scudnn_fp16_..., turing_fp16_s1688cudnn_fp16_...: s = accumulate in fp32)
    m = re.search(
        r"\b(?:cudnn_(?:infer|train)_)?(?:cudnn_)?(maxwell|pascal|volta|turing|ampere|hopper)_"
        r"(?:(fp16|bf16|int8|tf32)_)?([shdi])(?:\d{3,5})?cudnn_\w+",
        text,
    )
    if m:
        kname = m.group(0)
        info = _conv(
            "cudnn",
            kname,
            "cuDNN convolution kernel" + (" (Winograd)" if "winograd" in kname else ""),
            kname,
            inferred=["family"],
            arch=m.group(1),
            dtype=m.group(2) or {"s": "fp32", "h": "fp16", "d": "fp64", "i": "int8"}[m.group(3)],
        )
        info["inferred"].append("dtype")
        if t := re.search(r"_(\d+x\d+)_", kname):
            info["tile"] = t.group(1)
            info["inferred"].append("tile")
        if "relu" in kname:
            info["activation"] = "relu"
        return info
    if not re.search(
        r"\bcudnn(?:::|_[a-z])|\bcask_cudnn|(?<![A-Za-z_])(?:[wd]grad(?:_alg\d)?_engine|fft2d_|(?:implicit|explicit|precomputed)_convolve_)",
        text,
    ):
        return None  # cuDNN's own functions only (an xmma GEMM run for cuDNN stays a GEMM)
    return _cudnn_library_function(text)


# cuDNN functions by name: (pattern, family, op, what, inferred family?)
_CUDNN_FUNCTIONS = (
    (r"\bbn_fw_tr_", "normalization", "batch_norm", "cuDNN batch norm, forward (training)", False),
    (r"\bbn_fw_inf_", "normalization", "batch_norm", "cuDNN batch norm, forward (inference)", False),
    (r"\bbn_bw_", "normalization", "batch_norm", "cuDNN batch norm, backward", False),
    (r"\bbn_\w+", "normalization", "batch_norm", "cuDNN batch norm", False),
    (r"\bnchwToNhwcKernel|\bnhwcToNchwKernel", "copy", "layout", "cuDNN layout change (NCHW <-> NHWC)", False),
    (r"\bnhwcAddPaddingKernel", "copy", "pad", "cuDNN padding of an NHWC tensor (before a convolution)", False),
    (
        r"\bcudnn::fusion::(?:compute_dot_do_o|convert_dq_to_16bits|dq_)",
        "attention",
        "sdpa_backward",
        "cuDNN fused attention, a step of the backward (dot(dO, O) or the dQ conversion)",
        False,
    ),
    (r"\bscalePackedTensor_kernel", "elementwise", "scale", "cuDNN scaling of a tensor in place", False),
    (r"\bsoftmax_fw|\bsoftmax_bw|\bsoftmax", "softmax", "softmax", "cuDNN softmax", False),
    (r"\b[wd]grad(?:_alg\d)?_engine|\b[dw]grad2d_", "convolution", None, "cuDNN convolution", False),
    (
        r"(?<![A-Za-z_])(?:implicit|explicit|precomputed)_convolve_[sh]gemm",
        "convolution",
        None,
        "cuDNN convolution (GEMM algorithm)",
        False,
    ),
    (
        r"\bconv2d_grouped_direct_kernel|\bconvolve_common_engine",
        "convolution",
        None,
        "cuDNN direct convolution",
        False,
    ),
    (r"winograd", "convolution", None, "cuDNN Winograd convolution (a transform or product step)", False),
    (r"\bim2col|\bcol2im", "convolution", None, "cuDNN im2col: the input unfolded for a GEMM convolution", False),
    (r"\bfft2d_|\bfft3d_|\bflip_filter", "convolution", None, "cuDNN FFT convolution (a transform step)", True),
    (r"\breduce_wgrad|\bcompute\w*OffsetsKernel|\bcask_cudnn", "convolution", None, "cuDNN convolution helper", True),
    (r"\brnn|\bLSTM|\bGRU|elemWiseRNNcell", "other", "rnn", "cuDNN recurrent network kernel", True),
)


def _cudnn_library_function(text: str) -> dict[str, Any] | None:
    for pattern, family, op, what, guessed in _CUDNN_FUNCTIONS:
        m = re.search(pattern, text)
        if not m:
            continue
        info: dict[str, Any] = {"family": family, "source": "cudnn", "inferred": ["family"] if guessed else []}
        if op:
            info["op"] = op
        if family == "convolution":
            phase = _phase(text) or (
                PHASES["wgrad"] if "wgrad" in text.lower() else PHASES["dgrad"] if "dgrad" in text.lower() else None
            )
            if phase:
                info["phase"] = phase
            info["explain"] = _CONV_EXPLAIN
        if "cudnn" not in text:
            info["inferred"].append("source")
        info["summary"] = what + "."
        return info
    return {
        "family": "unknown",
        "source": "cudnn",
        "summary": "A cuDNN kernel whose name does not say what it computes.",
    }
