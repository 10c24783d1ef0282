"""The decode step's attention at the 1b decoder's shapes: SDPA over the whole masked cache (what the decoder ran)
against the course's split-KV kernel, which reads the position on the device and skips the empty cache.

    python -m benchmarks decode-attention --out benchmarks/results/h100_decode_attention.json   # on a GPU (~1 min)

One query token, 16 heads of 128 (MHA), bf16, batch 1, for caches of ``max_len`` 4096 and 300 filled to
256, 1024, 4096 positions (those that fit, and the full buffer). Ways:

- ``sdpa_masked``: ``F.scaled_dot_product_attention`` over all ``max_len`` positions with the boolean mask of the
  visible ones (the decoder's step before the course's kernel; the mask is built once per step, not timed);
- ``course``: :func:`helpers.kernels.decode_attention.decode_attention` with its default split plan;
- ``sdpa_sliced``: SDPA over exactly the filled positions, no mask: what SDPA costs when it knows the length
  (not graph-capturable as the position moves: a reference, not a way the decoder can run);
- ``sweep`` (unless ``--no-sweep``): the course's kernel at other blocks, warps and split counts.

Each time is a CUDA-graph replay of one call per layer (16 layers, each its own cache, as in a decode step),
in microseconds per call; GB/s counts the filled K and V read. ``--device cpu --quick`` runs tiny shapes in
Triton's interpreter (the CI smoke run; its times mean nothing).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import torch.nn.functional as F

from helpers.decoder.config import get_config
from helpers.measure.device import provenance, resolve_device

from .common import log, store_tables, time_calls_graphed, write_json

REPLAYS = 50
MAX_LENS, FILLS = (4096, 300), (256, 1024, 4096)
QUICK = {"heads": 2, "head_dim": 16, "layers": 2, "max_lens": (40,), "fills": (8, 40)}
SWEEP = [(32, 4, None), (64, 4, None), (64, 8, None), (128, 8, None), (64, 8, 8), (64, 8, 16), (64, 8, 64)]


def measure(
    max_len: int, fill: int, heads: int, head_dim: int, layers: int, device: torch.device, sweep: bool
) -> dict[str, Any]:
    """Every way at one cache: microseconds per call, GB/s of the filled K and V, relative error to float32."""
    from helpers.kernels.decode_attention import (
        BLOCK_N,
        INTERPRETER_BLOCK_N,
        decode_attention,
        decode_attention_reference,
        device_sms,
        launch_decode_attention,
        split_plan,
    )

    dt = torch.bfloat16
    gen = torch.Generator(device=device).manual_seed(0)
    shape = (1, heads, max_len, head_dim)
    caches = [(torch.randn(shape, device=device, generator=gen).to(dt),
               torch.randn(shape, device=device, generator=gen).to(dt)) for _ in range(layers)]  # fmt: skip
    q = torch.randn(1, heads, 1, head_dim, device=device, generator=gen).to(dt)
    position = torch.tensor(fill - 1, device=device)
    visible = (torch.arange(max_len, device=device) <= position).view(1, 1, 1, -1)
    ways: dict[str, Callable[[torch.Tensor, torch.Tensor], Any]] = {
        "sdpa_masked": lambda k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=visible),
        "course": lambda k, v: decode_attention(q, k, v, position),
        "sdpa_sliced": lambda k, v: F.scaled_dot_product_attention(q, k[:, :, :fill], v[:, :, :fill]),
    }
    read = 2 * heads * fill * head_dim * 2  # the filled K and V, bf16
    block = BLOCK_N if device.type == "cuda" else INTERPRETER_BLOCK_N
    splits, split_len = split_plan(heads, max_len, block, device_sms(device))
    row: dict[str, Any] = {"max_len": max_len, "fill": fill, "heads": heads, "head_dim": head_dim,
                           "layers": layers, "splits": splits, "split_len": split_len, "kv_mb_read": read / 1e6}  # fmt: skip
    for name, fn in ways.items():
        us = time_calls_graphed([lambda k=k, v=v, fn=fn: fn(k, v) for k, v in caches], device, REPLAYS)
        row[f"{name}_us"] = round(us, 2)
        row[f"{name}_gbps"] = round(read / us / 1e3, 1)
    ref = decode_attention_reference(q, *caches[0], fill - 1)
    for name in ("course", "sdpa_masked"):
        row[f"{name}_rel_error"] = float((ways[name](*caches[0]).float() - ref).norm() / ref.norm())
    row["course_over_sdpa_masked"] = round(row["sdpa_masked_us"] / row["course_us"], 2)
    if sweep and device.type == "cuda":
        row["sweep"] = []
        out = torch.empty_like(q)
        for block_n, warps, n in SWEEP:

            def call(k, v, block_n=block_n, warps=warps, n=n) -> None:
                launch_decode_attention(q, k, v, position, out, head_dim**-0.5, block_n, n, warps)

            us = time_calls_graphed([lambda k=k, v=v: call(k, v) for k, v in caches], device, REPLAYS)
            used = split_plan(heads, max_len, block_n, device_sms(device), n)[0]
            row["sweep"].append({"block_n": block_n, "num_warps": warps, "splits": used, "us": round(us, 2)})
    return row


def tables(data: dict[str, Any]) -> dict[str, tuple[pd.DataFrame, str]]:
    cols = ["max_len", "fill", "splits", "sdpa_masked_us", "course_us", "course_over_sdpa_masked", "sdpa_sliced_us",
            "course_gbps", "course_rel_error", "sdpa_masked_rel_error"]  # fmt: skip
    frame = pd.DataFrame([{c: r.get(c) for c in cols} for r in data["rows"]], columns=cols)
    about = ("the decode step's attention per layer (1 token, 16 heads of 128, bf16): SDPA over the masked buffer "
             "against the course's split-KV kernel, us per call by CUDA-graph replay over 16 layers' caches")  # fmt: skip
    return {"decode_attention": (frame, about)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks decode-attention", description=__doc__.split("\n")[0])
    p.add_argument("--device", default=None)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--quick", action="store_true", help="tiny shapes (the CPU smoke run in Triton's interpreter)")
    p.add_argument("--no-sweep", action="store_true", help="skip the sweep over blocks, warps and splits")
    args = p.parse_args(argv)
    dev = resolve_device(args.device)
    if dev.type != "cuda" and not args.quick:
        p.error("the decoder's shapes need a CUDA GPU; on a CPU give --quick")
    cfg = get_config("1b")
    if args.quick:
        heads, head_dim, layers, max_lens, fills = (
            QUICK[k] for k in ("heads", "head_dim", "layers", "max_lens", "fills")
        )
    else:
        heads, head_dim, layers, max_lens, fills = (
            cfg.num_attention_heads,
            cfg.dim_per_head,
            cfg.num_hidden_layers,
            MAX_LENS,
            FILLS,
        )
    out: dict[str, Any] = {"benchmark": "decode-attention", "provenance": provenance(dev), "rows": []}
    for max_len in max_lens:
        for fill in sorted({f for f in fills if f <= max_len} | {max_len}):
            row = measure(max_len, fill, heads, head_dim, layers, dev, sweep=not args.no_sweep)
            out["rows"].append(row)
            log(f"max_len {max_len:5d} fill {fill:5d}: SDPA masked {row['sdpa_masked_us']:8.2f} us, course "
                f"{row['course_us']:8.2f} us ({row['splits']} splits), SDPA on the filled part "
                f"{row['sdpa_sliced_us']:8.2f} us")  # fmt: skip
            write_json(args.out, store_tables(out, tables(out)))  # after every cache: a run cut short keeps them
    log(f"wrote {args.out}")
    return 0
