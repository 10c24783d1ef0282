"""Planted training loops that notebook 10 never shows, recorded with plain ``torch.profiler`` (as a user would,
no course helper in the loop) and diagnosed: is every planted problem in its trace's top 3 findings?

    python -m benchmarks diagnose-planted --record tests/data/planted_h100     # on a GPU: record, then judge
    python -m benchmarks diagnose-planted --judge tests/data/planted_h100      # any machine: judge stored traces

Each loop plants one or two problems (a sync per expert in a mixture-of-experts layer, pageable host batches and
``.item()``, float32 GEMMs, attention by hand, a per-parameter optimizer, hand-written pointwise chains, a tiny
batch, an allocator emptied every step) and one plants none. Judging reads only the traces, so it runs on a CPU
against the traces a GPU recorded; ``--json`` keeps the verdicts with the recording's provenance.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import math
import platform
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import log, write_json  # noqa: E402

PROVENANCE = "recorded.json"
STEPS, WARMUP = 4, 3


def _loops(torch, nn, device: str) -> dict[str, tuple[Callable[[], None], set[str], str]]:
    """name -> (one training step, the rules its planted problems should raise, what was planted)."""
    fused = device == "cuda"

    def mlp(dim: int, hidden: int, n: int, dtype=torch.float32) -> nn.Module:
        blocks = [(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim)) for _ in range(n)]
        return nn.Sequential(*[m for block in blocks for m in block]).to(device, dtype)

    def train(loss, opt) -> None:
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def moe():
        dim, experts, tokens = 1024, 8, 4096
        router = nn.Linear(dim, experts).to(device)
        ffn = nn.ModuleList(
            nn.Sequential(nn.Linear(dim, 4 * dim), nn.SiLU(), nn.Linear(4 * dim, dim)) for _ in range(experts)
        ).to(device)
        opt = torch.optim.AdamW([*router.parameters(), *ffn.parameters()], lr=1e-4, fused=fused)
        x = torch.randn(tokens, dim, device=device)

        def step():
            with torch.autocast(device, dtype=torch.bfloat16):
                top = router(x).topk(2, dim=-1).indices
                out = torch.zeros_like(x)
                for e in range(experts):  # nonzero: the host waits for the GPU once per expert
                    rows = (top == e).any(-1).nonzero().squeeze(-1)
                    out.index_add_(0, rows, ffn[e](x[rows]).float())
                loss = out.square().mean()
            train(loss, opt)

        return step, {"host_sync"}, "routing by nonzero, one sync per expert"

    def pageable_item():
        model = mlp(2048, 8192, 2)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused)

        def step():
            x = torch.randn(2048, 2048).to(device)  # made on the host, in pageable memory, every step
            with torch.autocast(device, dtype=torch.bfloat16):
                loss = model(x).float().square().mean()
            train(loss, opt)
            loss.item()

        return (
            step,
            {"pageable_copies", "host_sync"},
            "a batch made on the host and copied from pageable memory; .item()",
        )

    def fp32():  # torch's default: no TF32 for float32 matmuls
        model = mlp(4096, 16384, 2)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused)
        x = torch.randn(4096, 4096, device=device)
        return lambda: train(model(x).square().mean(), opt), {"fp32_gemm"}, "float32 GEMMs, TF32 off"

    def attention():
        dim, heads, seq, batch = 1024, 16, 2048, 4
        qkv, proj = nn.Linear(dim, 3 * dim).to(device), nn.Linear(dim, dim).to(device)
        opt = torch.optim.AdamW([*qkv.parameters(), *proj.parameters()], lr=1e-4, fused=fused)
        x = torch.randn(batch, seq, dim, device=device)

        def step():
            with torch.autocast(device, dtype=torch.bfloat16):
                q, k, v = qkv(x).view(batch, seq, 3, heads, dim // heads).permute(2, 0, 3, 1, 4)
                scores = q @ k.transpose(-2, -1) / math.sqrt(dim // heads)
                mask = torch.ones(seq, seq, device=device, dtype=torch.bool).triu(1)
                p = scores.masked_fill(mask, float("-inf")).softmax(-1)
                loss = proj((p @ v).transpose(1, 2).reshape(batch, seq, dim)).float().square().mean()
            train(loss, opt)

        return step, {"manual_attention"}, "causal attention by hand at seq 2048"

    def optimizer():
        model = mlp(512, 512, 24)
        opt = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=False)
        x = torch.randn(1024, 512, device=device)

        def step():
            with torch.autocast(device, dtype=torch.bfloat16):
                loss = model(x).float().square().mean()
            train(loss, opt)

        return step, {"unfused_optimizer"}, "Adam with foreach=False over 96 parameters"

    def pointwise():
        dim, tokens = 4096, 8192
        w1, w2 = (nn.Linear(dim, dim).to(device, torch.bfloat16) for _ in range(2))
        g = torch.ones(dim, device=device, dtype=torch.bfloat16, requires_grad=True)
        opt = torch.optim.AdamW([*w1.parameters(), *w2.parameters(), g], lr=1e-4, fused=fused)
        x = torch.randn(tokens, dim, device=device, dtype=torch.bfloat16)

        def rms(h):
            return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * g

        def gelu(h):
            return 0.5 * h * (1 + torch.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))

        def step():
            train(w2(rms(gelu(w1(rms(x))))).float().square().mean(), opt)

        return step, {"unfused_elementwise"}, "RMSNorm and tanh-GELU by hand"

    def tiny_batch():
        model = mlp(256, 1024, 12)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused)
        x = torch.randn(4, 256, device=device)
        return lambda: train(model(x).square().mean(), opt), {"gpu_idle_cpu_bound"}, "a batch of 4 through 36 layers"

    def empty_cache():
        model = mlp(2048, 8192, 2, torch.bfloat16)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused)
        x = torch.randn(4096, 2048, device=device, dtype=torch.bfloat16)

        def step():
            train(model(x).float().square().mean(), opt)
            if device == "cuda":
                torch.cuda.empty_cache()

        return step, {"allocator"}, "torch.cuda.empty_cache() every step"

    def clean():
        dim, heads, seq, batch = 1024, 16, 1024, 8
        qkv, proj, ff = nn.Linear(dim, 3 * dim).to(device), nn.Linear(dim, dim).to(device), mlp(dim, 4 * dim, 1)
        opt = torch.optim.AdamW([*qkv.parameters(), *proj.parameters(), *ff.parameters()], lr=1e-4, fused=fused)
        x = torch.randn(batch, seq, dim, device=device)

        def step():
            with torch.autocast(device, dtype=torch.bfloat16):
                q, k, v = qkv(x).view(batch, seq, 3, heads, dim // heads).permute(2, 0, 3, 1, 4)
                a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
                loss = ff(x + proj(a.transpose(1, 2).reshape(batch, seq, dim))).float().square().mean()
            train(loss, opt)

        return step, set(), "nothing: bf16 autocast, SDPA, fused AdamW"

    makers = [moe, pageable_item, fp32, attention, optimizer, pointwise, tiny_batch, empty_cache, clean]
    return {m.__name__: m for m in makers}


def record(folder: Path) -> None:
    """Record every loop's trace (gzipped) into `folder`, with what was planted and where it was recorded."""
    import torch
    from torch import nn
    from torch.profiler import ProfilerActivity, profile

    if not torch.cuda.is_available():
        raise SystemExit("--record needs a CUDA GPU: the planted problems are GPU problems (judge runs anywhere)")
    folder.mkdir(parents=True, exist_ok=True)
    planted = {}
    for name, make in _loops(torch, nn, "cuda").items():
        torch.manual_seed(0)
        step, rules, what = make()
        for _ in range(WARMUP):
            step()
        torch.cuda.synchronize()
        with tempfile.TemporaryDirectory() as tmp:
            raw = Path(tmp) / f"{name}.json"
            # a schedule makes the profiler mark each step (ProfilerStep#N); the trace is written when it ends
            with profile(
                activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                schedule=torch.profiler.schedule(wait=0, warmup=0, active=STEPS),
                on_trace_ready=lambda p: p.export_chrome_trace(str(raw)),
                record_shapes=True,
                profile_memory=True,
            ) as prof:
                for i in range(STEPS):
                    step()
                    if i == STEPS - 1:  # the last step's kernels end inside the window (no sync in the others)
                        torch.cuda.synchronize()
                    prof.step()
            with raw.open("rb") as src, gzip.open(folder / f"{name}.json.gz", "wb") as dst:
                shutil.copyfileobj(src, dst)
        planted[name] = {"rules": sorted(rules), "planted": what}
        log(f"recorded {name}")
        del step
        torch.cuda.empty_cache()
    write_json(
        folder / PROVENANCE,
        {
            "gpu": torch.cuda.get_device_name(),
            "torch": torch.__version__,
            "recorded_on": datetime.date.today().isoformat(),
            "how": f"torch.profiler.profile(CPU+CUDA, record_shapes, profile_memory, schedule active={STEPS}), "
            f"{WARMUP} warm-up steps before it, export_chrome_trace",
            "recorded_by": "python -m benchmarks diagnose-planted --record",
            "loops": planted,
        },
    )


def judge(folder: Path, top: int = 3) -> dict:
    """Diagnose every recorded loop: its top findings and whether each planted rule is among them."""
    from helpers.diagnose import diagnose

    meta = json.loads((folder / PROVENANCE).read_text())
    rows = []
    for name, loop in meta["loops"].items():
        found = diagnose(folder / f"{name}.json.gz")
        head = found.head(top)
        rows.append(
            {
                "loop": name,
                "planted": loop["planted"],
                "rules_expected": loop["rules"],
                "top": [
                    {"rule": r.rule, "finding": r.finding, "saving_upper_bound_us": round(r.saving_upper_bound_us, 1)}
                    for r in head.itertuples()
                ],
                "missed": sorted(set(loop["rules"]) - set(head["rule"])),
                "rank_of_missed": {
                    rule: int(found.index[found["rule"] == rule][0]) + 1 if (found["rule"] == rule).any() else None
                    for rule in sorted(set(loop["rules"]) - set(head["rule"]))
                },
            }
        )
        log(f"{name}: top {top} {list(head['rule'])}, missed {rows[-1]['missed']}")
    hit = sum(not r["missed"] for r in rows if r["rules_expected"])
    planted = sum(bool(r["rules_expected"]) for r in rows)
    return {"recording": {k: v for k, v in meta.items() if k != "loops"}, "top": top, "loops": rows,
            "all_planted_in_top": f"{hit} of {planted} loops"}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--record", type=Path, help="record the loops' traces into this folder (needs a GPU), then judge")
    ap.add_argument("--judge", type=Path, help="judge the traces stored in this folder")
    ap.add_argument("--json", type=Path, help="write the verdicts here")
    args = ap.parse_args(argv)
    if (args.record is None) == (args.judge is None):
        ap.error("give either --record FOLDER or --judge FOLDER")
    folder = args.record or args.judge
    if args.record is not None:
        record(folder)
    result = judge(folder)
    result["judged_with"] = {"python": platform.python_version(), "on": datetime.date.today().isoformat()}
    log(f"every planted problem in the top {result['top']}: {result['all_planted_in_top']}")
    if args.json:
        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
