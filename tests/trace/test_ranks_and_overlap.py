"""Several ranks (one file each, or merged into one), communication/computation overlap, idle time
and its causes, achieved TFLOP/s. Expected values are computed here independently, from the JSON
with plain Python loops (no numpy interval code shared with helpers)."""

from __future__ import annotations

import gzip
import json

import pytest
from support import data_file

import helpers
import helpers.paths
import helpers.trace.overlap

RANK0 = "hta__timeline_analysis_sampled_rank-0.json.gz"
RANK1 = "hta__trace_filter_sampled_rank-1.json.gz"
NCCL = "hta__nccl_parser_config_nccl_data.json.gz"


def load_json(name: str) -> dict:
    return json.loads(gzip.decompress(data_file(name).read_bytes()))


def write(tmp_path, doc, name):
    path = tmp_path / name
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


def merged(tmp_path, renumber_device: bool = False):
    """Rank 0 and rank 1 of one job in one file, as a user merging traces by hand would make it."""
    a, b = load_json(RANK0), load_json(RANK1)
    if renumber_device:  # both ranks on "GPU 0" of their own host: only the device pid tells them apart
        for e in b["traceEvents"]:
            if e.get("pid") == 1:
                e["pid"] = 1001
                if isinstance(e.get("args"), dict) and "device" in e["args"]:
                    e["args"]["device"] = 0
    doc = {k: v for k, v in a.items() if k not in ("traceEvents", "distributedInfo")}
    doc["traceEvents"] = a["traceEvents"] + b["traceEvents"]
    return write(tmp_path, doc, "merged.json.gz")


def _kernel_table(trace):
    k = trace.kernels()
    return sorted(zip(k["name"], k["duration_us"], k["launched_by"].fillna(""), k["launch_call"].fillna("")))


@pytest.mark.parametrize("renumber_device", [False, True])
def test_a_merged_two_rank_trace_keeps_every_kernel_on_its_rank(tmp_path, renumber_device):
    ids = [
        {e["args"]["correlation"] for e in load_json(f)["traceEvents"] if e.get("cat") == "cuda_runtime"}
        for f in (RANK0, RANK1)
    ]
    assert ids[0] & ids[1], "the two ranks reuse correlation ids: the case being tested"
    alone = [helpers.load_trace(data_file(f)) for f in (RANK0, RANK1)]
    run = helpers.trace.load_traces(merged(tmp_path, renumber_device))
    assert run.ranks == [0, 1]
    k = run.kernels()
    for rank, single in enumerate(alone):
        mine = k[k["rank"] == rank]
        assert sorted(
            zip(mine["name"], mine["duration_us"], mine["launched_by"].fillna(""), mine["launch_call"].fillna(""))
        ) == (_kernel_table(single))
    lanes = helpers.load_trace(merged(tmp_path, renumber_device)).device_lanes
    assert len(lanes) == len(alone[0].device_lanes) + len(alone[1].device_lanes)  # no lane shared by two ranks
    assert any("2 processes launch device work" in n for n in run.notes)


def test_load_traces_gives_one_table_a_timeline_per_rank_and_the_slowest_rank(tmp_path):
    files = [data_file(RANK0), data_file(RANK1)]
    run = helpers.trace.load_traces(files)
    k = run.kernels()
    counts = k.groupby("rank").size().to_dict()
    assert counts == {0: len(helpers.load_trace(files[0]).kernels()), 1: len(helpers.load_trace(files[1]).kernels())}
    # a folder gives the same run
    folder = tmp_path / "run"
    folder.mkdir()
    for f in files:
        (folder / f.name).write_bytes(f.read_bytes())
    assert helpers.trace.load_traces(folder).kernels().groupby("rank").size().to_dict() == counts
    # timeline: one group of lanes per rank, host threads before device streams inside each
    lanes = run.timeline().layout.meta["lanes"]
    ranks_in_order = [int(lane.split()[1]) for lane in lanes]
    assert ranks_in_order == sorted(ranks_in_order) and set(ranks_in_order) == {0, 1}
    for r in (0, 1):
        group = [lane for lane in lanes if lane.startswith(f"rank {r} ")]
        kinds = ["GPU" in lane for lane in group]
        assert kinds == sorted(kinds) and any(kinds) and not all(kinds)
    # slowest rank per step, against the ProfilerStep durations in the files
    steps = {}
    for rank, f in enumerate((RANK0, RANK1)):
        for e in load_json(f)["traceEvents"]:
            if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#"):
                steps.setdefault(int(e["name"].split("#")[1]), {})[rank] = e["dur"]
    table = run.step_times().set_index("step")
    for step, durations in steps.items():
        assert table.loc[step, "slowest_rank"] == max(durations, key=durations.get)
        assert table.loc[step, "spread_us"] == pytest.approx(max(durations.values()) - min(durations.values()))


def _union(intervals):
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def _intersection(a, b):
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0.0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def test_overlap_equals_an_independent_interval_computation():
    events = [e for e in load_json(NCCL)["traceEvents"] if e.get("ph") == "X"]
    work = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    comm = [(e["ts"], e["ts"] + e["dur"]) for e in work if e["cat"] == "kernel" and e["name"].startswith("nccl")]
    compute = [(e["ts"], e["ts"] + e["dur"]) for e in work if e["cat"] == "kernel" and not e["name"].startswith("nccl")]
    busy = _union([(e["ts"], e["ts"] + e["dur"]) for e in work])
    comm_u, compute_u = _union(comm), _union(compute)
    expected = {
        "communication_us": sum(e - s for s, e in comm_u),
        "compute_us": sum(e - s for s, e in compute_u),
        "overlap_us": _intersection(comm_u, compute_u),
        "busy_us": sum(e - s for s, e in busy),
        "idle_us": (busy[-1][1] - busy[0][0]) - sum(e - s for s, e in busy),
    }
    row = helpers.trace.overlap.overlap(helpers.load_trace(data_file(NCCL))).iloc[0]
    assert row["rank"] == 0 and row["gpu"] == "GPU 0"
    for key, value in expected.items():
        assert row[key] == pytest.approx(value, rel=1e-9, abs=1e-6), key
    assert expected["overlap_us"] > 0 and row["exposed_communication_us"] == pytest.approx(
        expected["communication_us"] - expected["overlap_us"]
    )
    assert row["idle_cpu_bound_us"] + row["idle_waiting_us"] + row["idle_unknown_us"] == pytest.approx(row["idle_us"])


def test_idle_causes_against_the_launch_calls():
    events = [e for e in load_json(NCCL)["traceEvents"] if e.get("ph") == "X"]
    work = sorted((e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")), key=lambda e: e["ts"])
    calls = {
        e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime" and "correlation" in e["args"]
    }
    expected = {"cpu-bound": 0.0, "waiting": 0.0, "unknown": 0.0}
    reach = work[0]["ts"] + work[0]["dur"]
    for e in work[1:]:
        if e["ts"] > reach:
            call = calls.get(e["args"].get("correlation"))
            cause = "unknown" if call is None else ("cpu-bound" if call["ts"] + call["dur"] > reach else "waiting")
            expected[cause] += e["ts"] - reach
        reach = max(reach, e["ts"] + e["dur"])
    gaps = helpers.trace.idle_gaps(helpers.load_trace(data_file(NCCL)))
    got = gaps.groupby("cause")["idle_us"].sum().to_dict()
    for cause, value in expected.items():
        assert got.get(cause, 0.0) == pytest.approx(value, rel=1e-9, abs=1e-6), cause
    assert expected["cpu-bound"] > 0 and expected["waiting"] > 0


def test_overlap_per_rank_and_step_on_a_run():
    run = helpers.trace.load_traces([data_file(RANK0), data_file(RANK1)])
    table = helpers.trace.overlap.overlap(run)
    assert list(table["rank"]) == [0, 1] and (table["communication_us"] > 0).all()
    per_step = helpers.trace.overlap.overlap(run, per_step=True)
    assert {551, 552} <= set(per_step["step"]) and set(per_step["rank"]) == {0, 1}


def test_achieved_tflops_of_the_h200_gemms():
    doc = json.loads(gzip.decompress(data_file("h200_mlp_eager.json.gz").read_bytes()))
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    mm = [e for e in events if e.get("name") == "aten::mm"]
    kernel_us = {}
    for e in events:  # everything the op ran on the device: its GEMM kernel and cuBLAS's workspace memsets
        if e.get("cat") in ("kernel", "gpu_memset"):
            kernel_us[e["args"]["External id"]] = kernel_us.get(e["args"]["External id"], 0.0) + e["dur"]
    expected = {}
    for e in mm:
        (m, k), (_, n) = e["args"]["Input Dims"]
        key = str(e["args"]["Input Dims"])
        flops, us = expected.get(key, (0, 0.0))
        expected[key] = (flops + 2 * m * n * k, us + kernel_us[e["args"]["External id"]])
    table = helpers.trace.achieved_flops(helpers.load_trace(data_file("h200_mlp_eager.json.gz"))).set_index(
        "input_shapes"
    )
    assert set(table["op"]) == {"aten::mm"} and set(table["family"]) == {"gemm"}
    for shapes, (flops, us) in expected.items():
        assert table.loc[shapes, "tflops"] == pytest.approx(flops / us / 1e6)
    assert (table["tflops"] > 300).all()  # an H200 bf16 GEMM of this size: hundreds of TFLOP/s


def _one_op_trace(tmp_path, op: str, dims: list, kernel: str, dur: float, concrete=None):
    args = {"Input Dims": dims, "External id": 1}
    if concrete is not None:
        args["Concrete Inputs"] = concrete
    events = [
        {"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": 0.0, "dur": 50.0, "args": args},
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 5.0,
            "dur": 4.0,
            "args": {"correlation": 7, "External id": 1},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": kernel,
            "pid": 0,
            "tid": 7,
            "ts": 20.0,
            "dur": dur,
            "args": {"correlation": 7, "External id": 1, "stream": 7, "device": 0},
        },
    ]
    return helpers.load_trace(write(tmp_path, {"traceEvents": events}, f"{op.replace(':', '_')}.json.gz"))


def test_achieved_tflops_of_attention_and_convolution(tmp_path):
    b, h, lq, lk, e = 3, 5, 77, 131, 48  # awkward shapes, cross-attention (L != S)
    sdpa = _one_op_trace(
        tmp_path,
        "aten::_scaled_dot_product_flash_attention",
        [[b, h, lq, e], [b, h, lk, e], [b, h, lk, e], [], []],
        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 64, 4, false, false, cutlass::half_t>>()",
        10.0,
    )
    row = helpers.trace.achieved_flops(sdpa).iloc[0]
    qk, pv = 2 * b * h * lq * lk * e, 2 * b * h * lq * lk * e
    assert row["family"] == "attention" and row["tflops"] == pytest.approx((qk + pv) / 10.0 / 1e6)
    assert "causal" in row["note"]
    # a forward convolution needs its stride and padding: read from Concrete Inputs
    conv = _one_op_trace(
        tmp_path,
        "aten::convolution",
        [[2, 3, 33, 17], [8, 3, 5, 3], [8], [], [], [], [], [], []],
        "cudnn_infer_ampere_scudnn_128x64_relu_small_nn_v1",
        4.0,
        concrete=["", "", "", "[2, 1]", "[1, 0]", "[1, 1]", "False", "[0, 0]", "1"],
    )
    row = helpers.trace.achieved_flops(conv).iloc[0]
    out_h, out_w = (33 + 2 * 1 - 5) // 2 + 1, (17 - 3) // 1 + 1
    assert row["gflop_per_call"] == pytest.approx(2 * 2 * 8 * out_h * out_w * 3 * 5 * 3 / 1e9)
    bare = _one_op_trace(tmp_path, "aten::convolution", [[2, 3, 33, 17], [8, 3, 5, 3], [8]], "x_kernel", 4.0)
    row = helpers.trace.achieved_flops(bare).iloc[0]
    assert row["tflops"] != row["tflops"] and "Concrete Inputs" in row["note"]  # NaN, and why


def test_kernel_breakdown_by_family_and_library():
    trace = helpers.load_trace(data_file(NCCL))
    table = helpers.trace.kernel_breakdown(trace)
    work = [e for e in load_json(NCCL)["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert table["kernels"].sum() == len(work)
    assert table["device_us"].sum() == pytest.approx(sum(e["dur"] for e in work))
    assert table["pct"].sum() == pytest.approx(100.0)
    rows = table.set_index(["family", "source"])
    assert rows.loc[("communication", "nccl"), "example"].startswith("ncclKernel_AllReduce")
    assert ("convolution", "cudnn") in rows.index and ("unknown", "unknown") not in rows.index
    run = helpers.trace.load_traces([data_file(RANK0), data_file(RANK1)])
    per_rank = helpers.trace.kernel_breakdown(run)
    assert per_rank.groupby("rank")["pct"].sum().round(6).tolist() == [100.0, 100.0]
    for rank in (0, 1):  # each rank's own kernels, whatever order the run's events are in
        own = helpers.trace.kernel_breakdown(helpers.load_trace(data_file((RANK0, RANK1)[rank])))
        assert per_rank[per_rank["rank"] == rank]["device_us"].sum() == pytest.approx(own["device_us"].sum())
    cpu_only = helpers.load_trace(data_file("hta__cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"))
    assert helpers.trace.kernel_breakdown(cpu_only).empty  # host operators are no device time


def test_a_run_folder_loads_with_its_summary_and_records_beside_the_ranks():
    """A run folder holds summary.json and the launcher's record next to the rank traces: they are not ranks."""
    from pathlib import Path

    folder = Path(helpers.paths.TRACES_DIR) / "h200x2_ddp_straggler"
    assert (folder / "summary.json").is_file()
    run = helpers.trace.load_traces(folder)
    assert run.ranks == [0, 1]
