"""Achieved TFLOP/s of FP8 GEMMs (``torch._scaled_mm``) and grouped GEMMs (``torch._grouped_mm``).

The operator events are recorded live on this CPU (torch runs e4m3 ``_scaled_mm`` and every layout
of ``_grouped_mm`` here; ``_scaled_grouped_mm`` raises on CPU, but the profiler records its event
first, with its real argument layout). The GPU side is then added as an H200 would record it: each
operator launches its kernels (the FP8 GEMM's ``nvjet_sm90_qqtst_...``; the grouped GEMM's
``prepare_grouped_gemm_data`` then the CUTLASS ``GroupProblemShape`` kernel) with known durations,
so the expected rate is exact: FLOPs computed by hand from the tensors / the known device time.
"""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch
from support import H200_REFERENCE

import helpers
from helpers.trace.flop_counts import grouped_mm_flops
from helpers.trace.kernel_names import decode_kernel

E4M3 = torch.float8_e4m3fn
FP8_GEMM = "nvjet_sm90_qqtst_128x256_128x4_2x1_v_bz_coopA_TNT"
PREPARE = (
    "void at::cuda::detail::prepare_grouped_gemm_data<cutlass::bfloat16_t, cutlass::bfloat16_t, cutlass::bfloat16_t, "
    "float, cute::tuple<int, int, int> >(cutlass::bfloat16_t*, cutlass::bfloat16_t*, cutlass::bfloat16_t*, float*, "
    "float*, float*, cutlass::bfloat16_t**, cutlass::bfloat16_t**, cutlass::bfloat16_t**, float const**, float const**, "
    "cute::tuple<int, int, int>*, long, long, long, long, long, long, long, long, long, int const*, int, int, int, "
    "std::optional<bool>)"
)
GROUPED_GEMM = (
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::GroupProblemShape<cute::tuple<int, "
    "int, int> >, cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90ArrayTmaGmmaWarpSpecializedCooperative"
    "<4, cute::tuple<cute::C<2>, cute::C<1>, cute::C<1> >, cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>, "
    "cute::tuple<cute::C<128>, cute::C<256>, cute::C<64> >, cutlass::bfloat16_t> > >(cutlass::gemm::kernel::GemmUniversal"
    "<cutlass::gemm::GroupProblemShape<cute::tuple<int, int, int> > >::Params)"
)


def _record(tmp_path, fn) -> dict:
    """The Chrome trace of a live CPU profile of ``fn()`` with shapes recorded."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        fn()
    path = tmp_path / "live_cpu.json"
    prof.export_chrome_trace(str(path))
    return json.loads(path.read_text())


def _as_on_gpu(doc: dict, kernels: dict[str, list[tuple[str, float]]]) -> dict:
    """`doc` with each top-level event of an operator in `kernels` launching those kernels (name, us).

    On a GPU these operators call their kernels directly: the CPU fallback's inner events (a loop of
    ``aten::mm`` for a grouped GEMM) are dropped so the launch sits in the operator itself.
    """
    events = [e for e in doc["traceEvents"] if isinstance(e, dict)]
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("name") in kernels]
    inner = {
        id(e)
        for op in ops
        for e in events
        if e is not op and e.get("ph") == "X" and e.get("tid") == op["tid"]
        and op["ts"] <= e["ts"] and e["ts"] + e.get("dur", 0) <= op["ts"] + op["dur"]
    }  # fmt: skip
    ops = [op for op in ops if id(op) not in inner]  # a CPU fallback's inner aten::mm launches nothing
    out = [e for e in events if id(e) not in inner]
    gpu_ts, corr = max(e.get("ts", 0) + e.get("dur", 0) for e in events) + 100.0, 1000
    for op in ops:
        ext = op["args"]["External id"]
        for i, (name, dur) in enumerate(kernels[op["name"]]):
            corr += 1
            launch = {"correlation": corr, "External id": ext}
            out.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": op["pid"],
                        "tid": op["tid"], "ts": op["ts"] + op["dur"] * (i + 1) / 4, "dur": op["dur"] / 8,
                        "args": launch})  # fmt: skip
            out.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": gpu_ts, "dur": dur,
                        "args": {**launch, "stream": 7, "device": 0}})  # fmt: skip
            gpu_ts += dur + 1.0
    return {**doc, "traceEvents": out}


def _load(tmp_path, doc: dict) -> helpers.trace.Trace:
    path = tmp_path / "as_on_gpu.json"
    path.write_text(json.dumps(doc))
    return helpers.load_trace(path)


def test_fp8_scaled_mm_rate_from_a_live_cpu_profile(tmp_path):
    m, k, n = 96, 160, 80  # awkward multiples of 16 (FP8 GEMMs need K and N so)
    a = torch.randn(m, k).to(E4M3)
    b = torch.randn(n, k).to(E4M3).t()  # column-major B, as _scaled_mm requires
    # one scale per tensor: the only kind every CPU build of torch multiplies (row-wise needs torch >= 2.13 there)
    scale_a, scale_b = torch.tensor(1.5), torch.tensor(0.75)

    def run():
        torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16)
        torch._scaled_mm(a[:32], b, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.float32)

    trace = _load(tmp_path, _as_on_gpu(_record(tmp_path, run), {"aten::_scaled_mm": [(FP8_GEMM, 7.0)]}))
    table = helpers.trace.achieved_flops(trace).set_index("input_shapes")
    assert len(table) == 2 and set(table["op"]) == {"aten::_scaled_mm"} and set(table["family"]) == {"gemm"}
    assert set(table["dtype"]) == {"fp8_e4m3"}
    for rows, out in ((m, "bf16"), (32, "fp32")):
        row = table[table.index.str.startswith(f"[[{rows}, {k}], [{k}, {n}]")].iloc[0]
        flops = 2 * rows * n * k
        assert row["gflop_per_call"] == pytest.approx(flops / 1e9, rel=1e-12)
        assert row["tflops"] == pytest.approx(flops / 7.0 / 1e6, rel=1e-12)
        assert row["kernels"] == FP8_GEMM and row["basis"].endswith(f"out {out}")


def test_fp8_rows_are_judged_against_an_fp8_ceiling_only(tmp_path):
    m = k = n = 64
    a, b = torch.randn(m, k).to(E4M3), torch.randn(n, k).to(E4M3).t()
    x, w = torch.randn(m, k, dtype=torch.bfloat16), torch.randn(n, k, dtype=torch.bfloat16).t()

    def run():
        torch._scaled_mm(a, b, scale_a=torch.tensor(1.0), scale_b=torch.tensor(1.0), out_dtype=torch.bfloat16)
        torch.mm(x, w)

    doc = _as_on_gpu(_record(tmp_path, run), {"aten::_scaled_mm": [(FP8_GEMM, 2.0)], "aten::mm": [("nvjet_x", 4.0)]})
    trace = _load(tmp_path, doc)
    assert H200_REFERENCE.fp8_matmul_flop_per_s is None  # the committed H200 set has no FP8 rate (not re-recorded)
    table = helpers.trace.achieved_flops(trace, ceilings=H200_REFERENCE).set_index("dtype")
    fp8, bf16 = table.loc["fp8_e4m3"], table.loc["bf16"]
    assert math.isnan(fp8["pct_of_ceiling"]) and "no FP8 ceiling recorded" in fp8["note"]
    assert bf16["pct_of_ceiling"] == pytest.approx(100 * bf16["tflops"] / H200_REFERENCE.matmul_tflops)
    with_fp8 = dataclasses.replace(H200_REFERENCE, fp8_matmul_flop_per_s=1.5e15)
    table = helpers.trace.achieved_flops(trace, ceilings=with_fp8).set_index("dtype")
    assert table.loc["fp8_e4m3", "ceiling_tflops"] == pytest.approx(1500.0)
    assert table.loc["fp8_e4m3", "pct_of_ceiling"] == pytest.approx(100 * 2 * m * n * k / 2.0 / 1e6 / 1500.0)
    assert table.loc["fp8_e4m3", "note"] == ""
    with pytest.raises(TypeError, match="Ceilings"):
        helpers.trace.achieved_flops(trace, ceilings={"matmul_flop_per_s": 1e15})


def test_grouped_mm_rate_for_each_layout_from_a_live_cpu_profile(tmp_path):
    g, m, k, n = 3, 40, 48, 24
    bf16 = torch.bfloat16
    offs_m = torch.tensor([8, 8, 40], dtype=torch.int32)  # one expert gets no tokens
    offs_k = torch.tensor([16, 32, 48], dtype=torch.int32)
    offs_n = torch.tensor([8, 16, 24], dtype=torch.int32)
    cases = {  # layout: (a, b, offs, FLOPs by hand: one product per group, summed)
        "2d x 3d": (torch.randn(m, k, dtype=bf16), torch.randn(g, n, k, dtype=bf16).transpose(-2, -1), offs_m,
                    sum(2 * rows * n * k for rows in (8, 0, 32))),
        "3d x 3d": (torch.randn(g, m, k, dtype=bf16), torch.randn(g, n, k, dtype=bf16).transpose(-2, -1), None,
                    g * 2 * m * n * k),
        "2d x 2d": (torch.randn(m, k, dtype=bf16), torch.randn(n, k, dtype=bf16).t(), offs_k,
                    sum(2 * m * n * depth for depth in (16, 16, 16))),
        "3d x 2d": (torch.randn(g, m, k, dtype=bf16), torch.randn(n, k, dtype=bf16).t(), offs_n,
                    sum(2 * m * cols * k for cols in (8, 8, 8))),
    }  # fmt: skip

    def run():
        for a, b, offs, _ in cases.values():
            torch._grouped_mm(a, b, offs=offs)

    doc = _as_on_gpu(_record(tmp_path, run), {"aten::_grouped_mm": [(PREPARE, 2.5), (GROUPED_GEMM, 11.0)]})
    table = helpers.trace.achieved_flops(_load(tmp_path, doc))
    assert len(table) == 4 and set(table["op"]) == {"aten::_grouped_mm"} and set(table["dtype"]) == {"bf16"}
    for layout, (a, b, _, flops) in cases.items():
        row = table[table["basis"].str.startswith(layout)]
        assert len(row) == 1, layout
        row = row.iloc[0]
        assert json.loads(row["input_shapes"])[:2] == [list(a.shape), list(b.shape)]
        assert row["gflop_per_call"] == pytest.approx(flops / 1e9, rel=1e-12)
        assert row["tflops"] == pytest.approx(flops / 13.5 / 1e6, rel=1e-12)  # both kernels' time
        assert row["kernels"] == "; ".join(sorted([PREPARE, GROUPED_GEMM]))


def test_scaled_grouped_mm_event_layout_recorded_on_cpu(tmp_path):
    g, m, k, n = 4, 64, 128, 32
    a = torch.randn(m, k).to(E4M3)
    b = torch.randn(g, n, k).to(E4M3).transpose(-2, -1)
    offs = torch.tensor([16, 32, 48, 64], dtype=torch.int32)

    def run():  # no CPU kernel: the profiler records the event before dispatch fails
        with pytest.raises((NotImplementedError, RuntimeError)):
            torch._scaled_grouped_mm(a, b, torch.ones(m), torch.ones(g, n), offs=offs, out_dtype=torch.bfloat16)

    doc = _as_on_gpu(_record(tmp_path, run), {"aten::_scaled_grouped_mm": [(FP8_GEMM, 3.0)]})
    row = helpers.trace.achieved_flops(_load(tmp_path, doc)).iloc[0]
    assert row["dtype"] == "fp8_e4m3" and row["basis"].startswith("2d x 3d") and row["basis"].endswith("out bf16")
    assert row["tflops"] == pytest.approx(2 * m * n * k / 3.0 / 1e6, rel=1e-12)


def test_fp8_and_grouped_gemm_kernel_names_are_gemms():
    for name in (FP8_GEMM, GROUPED_GEMM, "nvjet_sm90_qqtst_256x128_64x4_1x2_h_bz_coopA_TNT"):
        assert decode_kernel(name)["family"] == "gemm", name


def test_grouped_mm_shapes_that_do_not_fit_are_refused():
    assert grouped_mm_flops((6, 4), (2, 4, 5)) == (2 * 6 * 5 * 4, grouped_mm_flops((6, 4), (2, 4, 5))[1])
    for a, b in (((6, 4), (2, 3, 5)), ((2, 6, 4), (3, 4, 5)), ((6,), (4, 5)), ((1, 2, 3, 4), (4, 5))):
        with pytest.raises(ValueError):
            grouped_mm_flops(a, b)
