"""Record real traces of what the trace analysis must read, on this GPU, and check what it reads.

    python scripts/record_analysis_traces.py --out traces/local/analysis --json benchmarks/results/h200_analysis_traces.json
    python scripts/record_analysis_traces.py --device cpu --quick --out /tmp/analysis   # the CPU path CI runs

Each case is a few profiled steps of a small workload, saved as a gzipped trace in `--out`:

* ``cuda_graph``: the GeGLU MLP captured in a CUDA graph and replayed (one cudaGraphLaunch per step);
* ``compiled_reduce_overhead``: the MLP under torch.compile(mode="reduce-overhead") (CUDA graph trees);
* ``sdpa_flash``, ``sdpa_efficient``, ``sdpa_cudnn``, ``sdpa_math``: scaled_dot_product_attention
  forward and backward with each backend forced (a backend this GPU or build lacks is skipped);
* ``flex_attention``: torch.compile'd FlexAttention with a causal mask, forward and backward;
* ``conv``: a small conv / batch-norm / ReLU network, forward and backward (cuDNN);
* ``ddp_rank0``, ``ddp_rank1``: two ranks of DistributedDataParallel (NCCL all-reduce) when two
  GPUs are visible (skipped otherwise).

Then every trace is read back with helpers and the script prints, per case: kernels, the share of
kernel time with a family, the kernel names left unknown, launch calls against graph launches,
and for the DDP run the communication/computation overlap per rank. The JSON (with provenance)
holds all of it. Nothing is downloaded; on one H200 the whole run takes about 2-3 minutes (most of
it torch.compile), 3-4 with two GPUs.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import helpers  # noqa: E402
from helpers.measure.device import provenance  # noqa: E402
from helpers.trace.work import work_items  # noqa: E402


class _Mlp(torch.nn.Module):
    """A GeGLU MLP without the course's classes (the recording must not depend on their signatures)."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.gate = torch.nn.Linear(dim, hidden, bias=False)
        self.up = torch.nn.Linear(dim, hidden, bias=False)
        self.down = torch.nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.gate(x), approximate="tanh") * self.up(x))


def case_cuda_graph(device, dtype, quick):
    model = _Mlp(256 if quick else 768, 1024 if quick else 3072).to(device, dtype)
    x = torch.randn(512 if quick else 8192, model.gate.in_features, device=device, dtype=dtype)
    static = x.clone()
    with torch.no_grad():
        for _ in range(3):  # warm up on a side stream, as CUDA graph capture requires
            model(static)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            model(static)
    # (profile records the device the inputs live on: the static input says CUDA)
    return helpers.profile(lambda _static: graph.replay(), static, label="cuda_graph")


def case_compiled_reduce_overhead(device, dtype, quick):
    model = _Mlp(256 if quick else 768, 1024 if quick else 3072).to(device, dtype)
    compiled = torch.compile(model, mode="reduce-overhead")
    x = torch.randn(512 if quick else 8192, model.gate.in_features, device=device, dtype=dtype)
    return helpers.profile(compiled, x, warmup=4, label="compiled_reduce_overhead")


def _qkv(device, dtype, quick):
    b, h, s, e = (1, 2, 128, 64) if quick else (4, 16, 2048, 128)
    return [torch.randn(b, h, s, e, device=device, dtype=dtype, requires_grad=True) for _ in range(3)]


def _sdpa_case(backend_name):
    def run(device, dtype, quick):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backend = getattr(SDPBackend, backend_name)
        q, k, v = _qkv(device, dtype, quick)

        def step(q):
            with sdpa_kernel(backend):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            out.sum().backward()

        step(q)  # raises when the backend cannot run here: the case is then skipped
        return helpers.profile(step, q, grad=True, label=f"sdpa_{backend_name.lower()}")

    return run


def case_flex_attention(device, dtype, quick):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    q, k, v = _qkv(device, dtype, quick)
    s = q.shape[2]
    mask = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, s, s, device=device)
    flex = torch.compile(flex_attention)

    def step(q):
        flex(q, k, v, block_mask=mask).sum().backward()

    return helpers.profile(step, q, grad=True, warmup=2, label="flex_attention")


def case_conv(device, dtype, quick):
    c = 16 if quick else 64
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, c, 7, stride=2, padding=3),
        torch.nn.BatchNorm2d(c),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(3, 2, 1),
        torch.nn.Conv2d(c, c, 3, padding=1),
        torch.nn.BatchNorm2d(c),
        torch.nn.ReLU(),
    ).to(device=device, dtype=dtype, memory_format=torch.channels_last)
    x = torch.randn(2 if quick else 32, 3, 64 if quick else 224, 64 if quick else 224, device=device, dtype=dtype)
    x = x.contiguous(memory_format=torch.channels_last)

    def step(x):
        net(x).float().sum().backward()

    return helpers.profile(step, x, grad=True, label="conv")


class _Moe(torch.nn.Module):
    """A top-k routed mixture of GeGLU experts: router, tokens sorted by expert, two GEMMs per expert, weighted sum.

    ``grouped=True`` runs each projection of every expert as one ``torch._grouped_mm`` (what MoE libraries
    do); ``grouped=False`` loops over the experts with one GEMM each (the plain way, one sync for the sizes).
    """

    def __init__(self, dim: int, hidden: int, experts: int, top_k: int, grouped: bool) -> None:
        super().__init__()
        self.top_k, self.grouped = top_k, grouped
        self.router = torch.nn.Linear(dim, experts, bias=False)
        # [experts, out, in], as nn.Linear stores a weight; the GEMMs read them transposed
        self.gate_up = torch.nn.Parameter(torch.randn(experts, 2 * hidden, dim) * dim**-0.5)
        self.down = torch.nn.Parameter(torch.randn(experts, dim, hidden) * hidden**-0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        probs = self.router(x).softmax(dim=-1)
        weights, chosen = torch.topk(probs, self.top_k, dim=-1)
        order = torch.argsort(chosen.flatten(), stable=True)
        token = order // self.top_k
        counts = torch.bincount(chosen.flatten(), minlength=self.gate_up.shape[0])
        xs = x[token]
        if self.grouped:
            offs = counts.cumsum(0).to(torch.int32)
            g, u = torch._grouped_mm(xs, self.gate_up.transpose(-2, -1), offs=offs).chunk(2, dim=-1)
            ys = torch._grouped_mm(F.gelu(g, approximate="tanh") * u, self.down.transpose(-2, -1), offs=offs)
        else:
            parts, start = [], 0
            for e, n in enumerate(counts.tolist()):
                g, u = (xs[start : start + n] @ self.gate_up[e].t()).chunk(2, dim=-1)
                parts.append((F.gelu(g, approximate="tanh") * u) @ self.down[e].t())
                start += n
            ys = torch.cat(parts)
        ys = ys * weights.flatten()[order, None].to(ys.dtype)
        return torch.zeros_like(x).index_add_(0, token, ys)


def _moe_case(grouped: bool, compiled: bool = False):
    def run(device, dtype, quick):
        dim, hidden, experts, tokens = (64, 128, 4, 256) if quick else (2048, 1408, 16, 8192)
        moe = _Moe(dim, hidden, experts, top_k=2, grouped=grouped).to(device, dtype)
        x = torch.randn(tokens, dim, device=device, dtype=dtype, requires_grad=True)
        fn = torch.compile(moe) if compiled else moe

        def step(x):
            fn(x).float().square().mean().backward()

        label = f"moe_{'grouped' if grouped else 'loop'}{'_compiled' if compiled else ''}"
        return helpers.profile(step, x, grad=True, warmup=3 if compiled else 2, label=label)

    return run


def case_fp8_scaled_mm(device, dtype, quick):
    """e4m3 GEMMs by ``torch._scaled_mm``: one scale per tensor, then one per row and column."""
    m, n, k = (64, 128, 64) if quick else (8192, 8192, 8192)
    e4m3 = torch.float8_e4m3fn
    a = torch.randn(m, k, device=device).to(e4m3)
    b = torch.randn(n, k, device=device).to(e4m3).t()  # column-major, as _scaled_mm requires
    one = torch.ones((), device=device)
    rows, cols = torch.ones(m, 1, device=device), torch.ones(1, n, device=device)

    def step(a):
        torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        try:  # row-wise scales need a GPU that has them
            torch._scaled_mm(a, b, scale_a=rows, scale_b=cols, out_dtype=torch.bfloat16)
        except RuntimeError:
            pass

    return helpers.profile(step, a, label="fp8_scaled_mm")


def case_graph_capture_profiled(device, dtype, quick):
    """The GeGLU MLP captured into a CUDA graph while the profiler runs, then replayed: one trace holds both."""
    model = _Mlp(256 if quick else 768, 1024 if quick else 3072).to(device, dtype)
    static = torch.randn(512 if quick else 8192, model.gate.in_features, device=device, dtype=dtype)
    with torch.no_grad():
        for _ in range(3):
            model(static)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
            with torch.cuda.graph(graph):
                model(static)
            for _ in range(3):
                graph.replay()
            torch.cuda.synchronize()
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"graph_capture_{os.getpid()}.json"
    prof.export_chrome_trace(str(path))
    return helpers.load_trace(path)


def _ddp_worker(rank: int, world: int, port: int, out: str, quick: bool) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    torch.cuda.set_device(rank)
    model = DistributedDataParallel(_Mlp(1024, 4096).cuda(rank).to(torch.bfloat16), device_ids=[rank])
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(4096, 1024, device=f"cuda:{rank}", dtype=torch.bfloat16)

    def step(x):
        opt.zero_grad(set_to_none=True)
        model(x).float().square().mean().backward()
        opt.step()

    trace = helpers.profile(step, x, grad=True, steps=3, label=f"ddp_rank{rank}")
    trace.save(Path(out) / f"ddp_rank{rank}.json.gz")
    dist.destroy_process_group()


def case_ddp(device, dtype, quick, out: Path):
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_ddp_worker, args=(2, port, str(out), quick), nprocs=2, join=True)
    return [out / "ddp_rank0.json.gz", out / "ddp_rank1.json.gz"]


def _gemm_rates(trace: helpers.trace.Trace) -> list[dict[str, Any]]:
    """Achieved TFLOP/s of each GEMM-like operator (FP8 and grouped ones included), as helpers reads them."""
    table = helpers.trace.achieved_flops(trace)
    cols = ["op", "dtype", "input_shapes", "calls", "gflop_per_call", "us_per_call", "tflops", "kernels"]
    return table.loc[table["family"] == "gemm", cols].round(4).to_dict(orient="records")


def analyse(trace: helpers.trace.Trace) -> dict[str, Any]:
    """What helpers reads in one trace: coverage, unknown names, launch calls vs graph launches."""
    k = trace.kernels(allow_empty=True)
    if k.empty:  # a CPU run: the host ops that did the work, by family
        items = work_items(trace)
        families = items.groupby("family")["duration_us"].sum()
        return {
            "kernels": 0,
            "coverage": None,
            "families": {f: round(float(us), 3) for f, us in families.items()},
            "unknown": [],
            "notes": trace.notes,
        }
    families = helpers.decode_kernels(k["name"].unique()).set_index("name")
    fam = k["name"].map(families["family"])
    items = work_items(trace)
    return {
        "kernels": int(len(k)),
        "kernel_us": float(k["duration_us"].sum()),
        "coverage": float(k.loc[fam != "unknown", "duration_us"].sum() / k["duration_us"].sum()),
        "families": {f: round(float(us), 3) for f, us in k.groupby(fam)["duration_us"].sum().items()},
        "unknown": sorted(k.loc[fam == "unknown", "name"].unique().tolist())[:20],
        "launch_calls": int(items.loc[items["launch_row"] >= 0, "launch_row"].nunique()),
        "graph_kernels": int(k["graph"].sum()),
        "graph_launch_calls": int((k["launch_call"].fillna("").str.contains("GraphLaunch")).sum()),
        "gemm_rates": _gemm_rates(trace),
        "notes": trace.notes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the recorded traces")
    parser.add_argument("--json", type=Path, default=None, help="write the summary (with provenance) here")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--quick", action="store_true", help="small shapes (the CPU path tests use)")
    parser.add_argument("--only", default="", help="comma-separated cases to record (default: all)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda needs a CUDA GPU; use --device cpu --quick here")
    args.out.mkdir(parents=True, exist_ok=True)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    cases = {
        "cuda_graph": case_cuda_graph,
        "compiled_reduce_overhead": case_compiled_reduce_overhead,
        "sdpa_flash": _sdpa_case("FLASH_ATTENTION"),
        "sdpa_efficient": _sdpa_case("EFFICIENT_ATTENTION"),
        "sdpa_cudnn": _sdpa_case("CUDNN_ATTENTION"),
        "sdpa_math": _sdpa_case("MATH"),
        "flex_attention": case_flex_attention,
        "conv": case_conv,
        "moe_grouped": _moe_case(grouped=True),
        "moe_loop": _moe_case(grouped=False),
        "moe_grouped_compiled": _moe_case(grouped=True, compiled=True),
        "fp8_scaled_mm": case_fp8_scaled_mm,
        "graph_capture_profiled": case_graph_capture_profiled,
    }
    gpu_only = {
        "cuda_graph",
        "compiled_reduce_overhead",
        "sdpa_flash",
        "sdpa_efficient",
        "sdpa_cudnn",
        "flex_attention",
        "graph_capture_profiled",
    }
    if args.only:
        unknown = set(args.only.split(",")) - set(cases) - {"ddp"}
        if unknown:
            parser.error(f"unknown cases {sorted(unknown)}; choose from {', '.join(cases)}, ddp")
        cases = {k: v for k, v in cases.items() if k in args.only.split(",")}
    results: dict[str, Any] = {}
    for name, case in cases.items():
        if device.type != "cuda" and name in gpu_only:
            results[name] = {"skipped": "needs a CUDA GPU"}
            continue
        start = time.perf_counter()
        print(f"{name} ...", flush=True)
        try:
            trace = case(str(device), dtype, args.quick)
        except Exception as err:  # a backend or feature missing here: say so and go on
            results[name] = {"skipped": f"{type(err).__name__}: {str(err)[:300]}"}
            continue
        path = trace.save(args.out / f"{name}.json.gz")
        results[name] = {"file": str(path), "seconds": round(time.perf_counter() - start, 1), **analyse(trace)}
    if args.only and "ddp" not in args.only.split(","):
        pass
    elif device.type == "cuda" and torch.cuda.device_count() >= 2:
        print("ddp (2 ranks) ...", flush=True)
        try:
            files = case_ddp(device, dtype, args.quick, args.out)
            run = helpers.trace.load_traces(files)
            results["ddp"] = {
                "files": [str(f) for f in files],
                **analyse(run),
                "overlap": helpers.trace.overlap(run).round(3).to_dict(orient="records"),
                "step_times": run.step_times().round(3).to_dict(orient="records"),
            }
        except Exception as err:
            results["ddp"] = {"skipped": f"{type(err).__name__}: {str(err)[:300]}"}
    else:
        results["ddp"] = {"skipped": "needs two CUDA GPUs"}

    print(f"\n{'case':26s} {'kernels':>8s} {'family cov.':>11s} {'launches':>9s} {'graph k.':>9s}  unknown names")
    for name, r in results.items():
        if "skipped" in r:
            print(f"{name:26s} skipped: {r['skipped'][:90]}")
            continue
        cov = "-" if r["coverage"] is None else f"{r['coverage']:.1%}"
        unknown = ", ".join(n[:40] for n in r["unknown"][:3])
        print(
            f"{name:26s} {r['kernels']:8d} {cov:>11s} {r.get('launch_calls', 0):9d} {r.get('graph_kernels', 0):9d}  {unknown}"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {"provenance": provenance(device, " ".join(sys.argv)), "results": results}
        args.json.write_text(json.dumps(payload, indent=1, default=str) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
    sys.exit(main())
