"""The decode-floor benchmark's split of a step into causes, on kernels whose timing is known."""

import pandas as pd
import pytest

from benchmarks.decode_floor import _busy_us, _causes

GEMM = "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn"
NORM = "void at::native::(anonymous namespace)::rms_norm_kernel<c10::BFloat16>(int)"
COPY = "void at::native::elementwise_kernel<128, 2, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)>()"


def _kernels(steps: int = 3) -> pd.DataFrame:
    rows = []
    for step in range(steps):
        t = 1000.0 * step
        # a GEMM, a norm, a 2 us gap, a copy, then the LM head's GEMM (the step's last)
        for name, start, dur in ((GEMM, 0, 10), (NORM, 10, 2), (COPY, 14, 1), (GEMM, 15, 20)):
            rows.append({"name": name, "step": step, "start_us": t + start, "duration_us": float(dur)})
    return pd.DataFrame(rows)


def test_the_causes_add_up_to_the_unprofiled_step():
    rows = _causes(_kernels(), step_us=50.0, floor_us=25.0, head_bytes=2_000_000, roof=1e12)
    by = {r["cause"]: r["us"] for r in rows}
    assert sum(by.values()) == pytest.approx(50.0)
    assert by["LM head GEMV above its own floor"] == pytest.approx(20.0 - 2.0)  # 2 MB at 1 TB/s: 2 us
    assert by["GPU idle between kernels inside the step (profiled)"] == pytest.approx(2.0)
    assert by[next(c for c in by if c.startswith("the unprofiled step beyond"))] == pytest.approx(50.0 - 35.0)
    assert sum(us for cause, us in by.items() if cause.endswith(" kernels")) == pytest.approx(3.0)


def test_overlapping_kernels_count_once_as_busy():
    start, end = pd.Series([0.0, 5.0, 20.0]).to_numpy(), pd.Series([10.0, 12.0, 21.0]).to_numpy()
    assert _busy_us(start, end) == pytest.approx(13.0)


def test_top_kernels_are_per_step_and_largest_first():
    from benchmarks.decode_floor import _top_kernels

    top = _top_kernels(_kernels(steps=3), steps=3)
    assert top[0]["family"] == "gemm" and top[0]["per_step"] == 2 and top[0]["us"] == pytest.approx(30.0)
    assert [t["us"] for t in top] == sorted((t["us"] for t in top), reverse=True)


def test_a_bad_configuration_is_refused_with_the_choices():
    from benchmarks.decode_floor import main

    with pytest.raises(SystemExit):
        main(["--out", "/nonexistent/x.json", "--configurations", "eager+graph@bogus"])


def test_the_recorded_split_is_the_table_its_measurements_give():
    import json
    from pathlib import Path

    from benchmarks.common import store_tables
    from benchmarks.decode_floor import tables

    data = json.loads((Path(__file__).resolve().parents[2] / "benchmarks/results/h200_decode_floor.json").read_text())
    assert data["tables"] == store_tables(data, tables(data))["tables"]
    for name, c in data["configurations"].items():
        # each part is a median over the profiled steps: they add up to the step within a microsecond or so
        assert sum(r["us"] for r in c["causes"]) == pytest.approx(c["timing"]["step_us"], abs=2.0), name
