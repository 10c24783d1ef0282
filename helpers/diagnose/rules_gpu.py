"""Rules about the device work itself: slow or fp32 matrix products, misaligned shapes, unfused
elementwise chains, attention written by hand, an unfused optimizer. Each takes a
:class:`~.findings.Context` and returns a list of findings."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from helpers.trace.aten_ops import aten_family
from helpers.trace.dtypes import lookup
from helpers.trace.flops import parse_shapes
from helpers.trace.kernel_names import decode_kernels

from .findings import Context, typical_by_key

# fp32 GEMMs that do not use tensor cores, by name (decode_kernel gives the dtype of most others)
FP32_GEMM = re.compile(r"sgemm|gemm_f32f32|gemmSN_\w+<float|gemmk1_kernel<float|gemv2?T_kernel_val<int, int, float")
MEMORY_BOUND = {"elementwise", "normalization", "softmax-reduction", "copy", "fused"}
ATTENTION_OPS = {"aten::softmax", "aten::_softmax", "aten::_safe_softmax"}
PER_PARAM_OPTIM = {
    "aten::add_", "aten::mul_", "aten::addcmul_", "aten::addcdiv_", "aten::lerp_", "aten::sqrt", "aten::div"
}  # fmt: skip


def fp32_gemm(ctx: Context) -> list[dict]:
    """Matrix products in fp32 without tensor cores, where bf16 (or tf32) would run several times faster."""
    w = ctx.work
    if not len(w):
        return []
    gemm = w[w["family"] == "gemm"]
    slow = gemm[(gemm["dtype"] == "fp32") | gemm["name"].str.contains(FP32_GEMM)]
    slow = slow[~slow["name"].str.contains("tf32|s1688|s16816|tensorop", regex=True)]
    if slow.empty:
        return []
    t = float(slow["dur"].sum()) / ctx.per_step
    share = 100.0 * t / max(float(gemm["dur"].sum()) / ctx.per_step, 1e-9)
    return [
        ctx.finding(
            "fp32_gemm",
            "Matrix products run in fp32 on CUDA cores, not on tensor cores",
            slow["row"].to_numpy(),
            t,
            ctx.path_time(slow["row"], ("kernel",)),
            "high",
            "02",
            "Run the model in bf16 (torch.autocast('cuda', dtype=torch.bfloat16)) or allow tf32 "
            "(torch.backends.cuda.matmul.allow_tf32 = True / torch.set_float32_matmul_precision('high'))",
            f"{share:.0f} % of GEMM time; launched by {', '.join(sorted(set(slow['op']) - {''})[:3])}",
        )  # fmt: skip
    ]


def misaligned_gemm(ctx: Context) -> list[dict]:
    """GEMMs whose dimensions are not multiples of 8: tensor cores then take slower paths or padding."""
    w = ctx.work
    if not len(w):
        return []
    gemm = w[(w["family"] == "gemm") & (w["op_row"] >= 0)]
    dims = ctx.ev["input_dims"].to_numpy(dtype=object)
    bad = []
    for r, op_row in zip(gemm["row"], gemm["op_row"]):
        shapes = parse_shapes(dims[op_row]) if dims[op_row] else None
        mats = [s for s in (shapes or ()) if isinstance(s, (list, tuple)) and len(s) >= 2]
        if len(mats) >= 2 and any(int(d) % 8 for s in mats[:2] for d in s[-2:] if isinstance(d, int) and d > 8):
            bad.append(r)
    if not bad:
        return []
    rows = np.asarray(bad)
    t = float(ctx.ev["dur"].to_numpy()[rows].sum()) / ctx.per_step
    if t < 0.02 * ctx.step_us:
        return []
    example = dims[int(gemm.loc[gemm["row"] == rows[0], "op_row"].iloc[0])]
    return [
        ctx.finding(
            "misaligned_gemm",
            "GEMM dimensions are not multiples of 8 (16 bytes): slower tensor-core paths",
            rows,
            t,
            0.5 * ctx.path_time(rows, ("kernel",)),
            "low",
            "02",
            "Pad hidden sizes, vocabulary and batch*sequence to multiples of 8 (64 is better)",
            f"shapes such as {example}",
        )  # fmt: skip
    ]


def _itemsize(types: str) -> float:
    first = types.split(",")[0].strip(" []'\"") if types else ""
    try:
        return float(lookup(first).itemsize)
    except (TypeError, ValueError):
        return 4.0


def unfused_elementwise(ctx: Context) -> list[dict]:
    """Runs of 3 or more memory-bound kernels back to back on a stream: each reads and writes memory the next reads again."""
    w = ctx.work
    if not len(w):
        return []
    k = w[w["kind"] == "kernel"].sort_values(["lane", "start"], kind="stable")
    # multi-tensor (foreach / fused optimizer) and library kernels are already as fused as they get
    fused_already = k["name"].str.contains("multi_tensor_apply|cudnn|miopen", regex=True) | k["op"].str.contains(
        "_foreach_|_fused_", regex=True
    )
    mem = (k["family"].isin(MEMORY_BOUND) & ~fused_already).to_numpy()
    lane = k["lane"].to_numpy()
    chains, cur = [], []
    for i in range(len(k)):
        if mem[i] and cur and lane[cur[-1]] == lane[i]:
            cur.append(i)
        else:
            if len(cur) >= 3:
                chains.append(cur)
            cur = [i] if mem[i] else []
    if len(cur) >= 3:
        chains.append(cur)
    if not chains:
        return []
    rows = np.concatenate([k["row"].to_numpy()[c] for c in chains])
    dur = ctx.ev["dur"].to_numpy()
    # a fused kernel still moves the chain's inputs and outputs once: it costs about its longest kernel
    saving = sum(ctx.path_time(k["row"].to_numpy()[c], ("kernel",)) * (1 - max(dur[k["row"].to_numpy()[c]]) /
             max(dur[k["row"].to_numpy()[c]].sum(), 1e-9)) for c in chains)  # fmt: skip
    saving += _host_side_of_chains(ctx, k, chains)
    moved = 0.0
    dims, types = ctx.ev["input_dims"].to_numpy(dtype=object), ctx.ev["input_types"].to_numpy(dtype=object)
    for c in chains:  # each intermediate is written once and read once more than a fused kernel would
        for op_row in k["op_row"].to_numpy()[c][1:]:
            shapes = parse_shapes(dims[op_row]) if op_row >= 0 and dims[op_row] else None
            first = shapes[0] if shapes else None
            if isinstance(first, (list, tuple)) and first:
                moved += 2 * float(np.prod([int(d) for d in first])) * _itemsize(str(types[op_row]))
    t = float(dur[rows].sum()) / ctx.per_step
    longest = max(chains, key=len)
    # a replayed graph's kernels have no operator: the kernel's short name stands in
    shown = k.iloc[longest[:6]]
    dec = decode_kernels(list(shown["name"]))
    short = dict(zip(dec["name"], dec["short_name"]))
    ops = " -> ".join(str(o).removeprefix("aten::") if o else str(short[n]) for o, n in zip(shown["op"], shown["name"]))
    ops += " -> ..." if len(longest) > 6 else ""
    detail = f"{len(chains)} chains, the longest {len(longest)} kernels ({ops})"
    if moved:
        detail += f"; {moved / ctx.per_step / 1e6:,.1f} MB per step written and read again"
    return [
        ctx.finding(
            "unfused_elementwise",
            "Chains of memory-bound kernels could be one fused kernel",
            rows,
            t,
            saving,
            "medium",
            "04",
            "torch.compile the function (Inductor fuses pointwise chains) or use a fused kernel "
            "(05/06: Liger, your own Triton kernel)",
            detail,
        )  # fmt: skip
    ]


def _host_side_of_chains(ctx: Context, k: pd.DataFrame, chains: list[list[int]]) -> float:
    """What fusing each chain saves on the host, per step: one fused operator keeps the first member's dispatch
    and launch, and drops the rest. When the GPU waits for launches (a launch-bound step) those operators, their
    launch calls and the Python between them are on the critical path; when it does not, they are off it."""
    ev = ctx.ev
    launch = ev["launch"].to_numpy()
    ts, end = ev["ts"].to_numpy() - ctx.t0, (ev["ts"] + ev["dur"]).to_numpy() - ctx.t0
    op_rows, kernel_rows, mark, kept = k["op_row"].to_numpy(), k["row"].to_numpy(), np.full(len(ev), -1), []
    for i, c in enumerate(chains):
        ops = op_rows[c]
        if (ops < 0).any() or len(np.unique(ops)) < 2:
            continue  # kernels of one operator (or of none): no dispatch to save
        mark[np.unique(ops[ops != ops[0]])] = i
        calls = launch[kernel_rows[c][ops != ops[0]]]
        kept.append((i, ops, calls[calls >= 0]))
    owner = ctx.nearest_mark(mark)  # every member but the first, and all they ran, for all chains at once
    members = pd.Series(np.flatnonzero(owner >= 0)).groupby(owner[owner >= 0]).agg(list)
    savings, firsts = [], []
    for i, ops, calls in kept:
        host = np.union1d(np.asarray(members.get(i, []), dtype=np.int64), calls)
        between = ctx.path_time_in(end[ops[:1]], ts[ops[-1:]], ("cpu gap",))
        savings.append(ctx.path_time(host, ("cpu", "launch delay")) + between)
        firsts.append(ops[0])
    # each step launches the same chains: count each at its typical host cost over the steps the path covers
    keys = ctx.chain_keys([ops for _, ops, _ in kept])
    return float(typical_by_key(keys, np.asarray(savings), ctx.on_path_steps(firsts)).sum())


def manual_attention(ctx: Context) -> list[dict]:
    """Attention written as matmul + softmax + matmul over a [seq, seq] matrix, or SDPA's math backend."""
    ev = ctx.ev
    names = ev["name"].to_numpy(dtype=object)
    math = ctx.host_rows({"aten::_scaled_dot_product_attention_math"})
    soft = ctx.host_rows(ATTENTION_OPS)
    dims = ev["input_dims"].to_numpy(dtype=object)
    square = []
    for r in soft:
        shapes = parse_shapes(dims[r]) if dims[r] else None
        s = shapes[0] if shapes else None
        if isinstance(s, (list, tuple)) and len(s) >= 3 and s[-1] == s[-2] and s[-1] >= 64:
            square.append(r)
    if math.size:
        rows = math
        what = "Attention runs on SDPA's math backend (matmul + softmax in separate kernels), not flash"
        fix = ("Give SDPA inputs flash/efficient attention accept (bf16/fp16, no explicit dense mask: "
               "is_causal=True, head dim <= 256), check with torch.nn.attention.sdpa_kernel")  # fmt: skip
    elif square:
        rows = np.asarray(square)
        what = "Attention is computed by hand (matmul, softmax, matmul over a [seq, seq] matrix)"
        fix = "Call torch.nn.functional.scaled_dot_product_attention (flash attention never writes [seq, seq])"
    else:
        return []
    if not len(ctx.work):
        return [_manual_attention_on_host(ctx, rows, what, fix)]
    # device work launched under these ops, or between the two matrix products around the softmax
    lb = ev["launched_by"].to_numpy()
    parent = ev["parent"].to_numpy()
    under = set(rows.tolist())
    w = ctx.work
    inside = [r for r, o in zip(w["row"], w["op_row"]) if o in under or (o >= 0 and parent[o] in under)]
    if not math.size:  # the softmax's own kernels and the pointwise ones (scale, mask) around it
        spans = [(ev["ts"].iat[r] - 50.0, ev["ts"].iat[r] + ev["dur"].iat[r]) for r in rows]
        launch_ts = ev["ts"].to_numpy()[np.maximum(ev["launch"].to_numpy()[w["row"].to_numpy()], 0)]
        near = np.zeros(len(w), dtype=bool)
        for a, b in spans:
            near |= (launch_ts >= a) & (launch_ts <= b)
        inside = w.loc[near & (w["family"] != "gemm").to_numpy(), "row"].tolist() + inside
    inside = np.unique(np.asarray(inside, dtype=np.int64))
    t = float(ev["dur"].to_numpy()[inside].sum()) / ctx.per_step if len(inside) else 0.0
    del lb, names
    return [
        ctx.finding(
            "manual_attention",
            what,
            rows,
            t,
            ctx.path_time(inside, ("kernel",)) if len(inside) else 0.0,
            "high",
            "07",
            fix,
            f"{len(rows)} calls; {len(inside)} device kernels outside the matrix products",
        )  # fmt: skip
    ]


def _fused_cost(ctx: Context, rows: np.ndarray) -> float:
    """What a fused optimizer step still costs on the host, per step: one pass over each parameter, about one
    typical per-parameter operator each (parameters counted by the rarest per-parameter operator)."""
    ev = ctx.ev
    names = pd.Series(ev["name"].to_numpy(dtype=object)[rows], dtype=object)
    per_param = names.isin(PER_PARAM_OPTIM).to_numpy()
    if not per_param.any():
        return 0.0
    ctx.path  # noqa: B018  (walking the path sets path_steps: this cost is subtracted from path times)
    params = float(names[per_param].value_counts().min()) / max(ctx.path_steps, 1)
    return params * float(np.median(ev["dur"].to_numpy()[rows[per_param]]))


def _manual_attention_on_host(ctx: Context, rows: np.ndarray, what: str, fix: str) -> dict:
    """On a CPU-only trace: the host time of the softmax, the elementwise operator just before it (the scale or
    mask) and their backward nodes: what a fused attention would not spend (it still does both products)."""
    ev = ctx.ev
    names = ev["name"].to_numpy(dtype=object)
    ts, end = ev["ts"].to_numpy(), (ev["ts"] + ev["dur"]).to_numpy()
    top = ctx.host_rows(prefix=("aten::",))
    top = top[ev["parent"].to_numpy()[top] < 0] if len(top) else top
    before = []
    for r in rows:  # the operator that ended last before the softmax started, if it is elementwise
        prior = top[(end[top] <= ts[r]) & (end[top] >= ts[r] - 50.0)]
        if len(prior):
            p = int(prior[np.argmax(end[prior])])
            if aten_family(str(names[p])) == "elementwise":
                before.append(p)
    back = ctx.host_rows(prefix=("autograd::engine::evaluate_function: SoftmaxBackward",
                                 "autograd::engine::evaluate_function: _SoftmaxBackward"))  # fmt: skip
    own = np.concatenate([rows, np.asarray(before, dtype=np.int64), back])
    inside = np.flatnonzero(ctx.under(own))
    t = float(ev["dur"].to_numpy()[own].sum()) / ctx.per_step
    return ctx.finding(
        "manual_attention", what, own, t, ctx.path_time(inside, ("cpu",)), "high", "07", fix,
        f"{len(rows)} calls; {len(own)} operators around the matrix products (softmax, scale, their backward)",
    )  # fmt: skip


OPTIMIZER_WAITS = "Synchronize|c10d::|nccl|record_param_comms"


def _optimizer_saving(ctx: Context, step: int, within: np.ndarray, mine: pd.DataFrame, ranges: np.ndarray) -> float:
    """What fusing saves of one optimizer step (the range at row `step`, `within` its host events; `ranges`:
    every optimizer range), per step of the trace: the path time of its operators and launch calls, its ranges'
    own time (the Python loop over the parameters), and two thirds of its kernels' path time (a fused optimizer
    still reads and writes every parameter and state once; waits and communication are not counted)."""
    ev = ctx.ev
    names, cat = ev["name"].to_numpy(dtype=object), ev["cat"].to_numpy(dtype=object)
    own = np.flatnonzero(within & np.isin(cat, ["cpu_op", "cuda_runtime", "cuda_driver"]))
    own = own[~pd.Series(names[own], dtype=object).str.contains(OPTIMIZER_WAITS).to_numpy()]
    launch = ev["launch"].to_numpy()[mine["row"].to_numpy()]
    kernels = mine["row"].to_numpy()[within[np.maximum(launch, 0)]]
    # an inner optimizer's range (a wrapper's step runs it) is the same Python loop as the outer one's
    loops = np.append(ranges[within[ranges]], step)
    own = np.concatenate([own, loops])
    saving = ctx.path_time(own, ("cpu", "launch delay")) + ctx.path_time(kernels, ("kernel",)) * 2 / 3
    if not len(ctx.work):
        # on a CPU a fused step still runs the Python around the operators (it gathers the parameters and their
        # state): the range's own time stays, and one pass over the parameters
        ops = np.flatnonzero(within & (cat == "cpu_op"))
        saving -= ctx.path_time(loops, ("cpu",)) + _fused_cost(ctx, ops)
    return saving


def unfused_optimizer(ctx: Context) -> list[dict]:
    """An optimizer step made of many small per-parameter (or foreach, unfused) kernels."""
    ev = ctx.ev
    ranges = ctx.host_rows(prefix=("Optimizer.step#",))
    if not len(ranges):
        return []
    names, ts = ev["name"].to_numpy(dtype=object), ev["ts"].to_numpy()
    # a wrapper optimizer's step runs the inner one's inside it: count the outermost ranges only
    parent = ev["parent"].to_numpy()[ranges]
    steps = ranges[~((parent >= 0) & ctx.under(ranges)[np.maximum(parent, 0)])]
    mark = np.full(len(ev), -1)
    mark[steps] = np.arange(len(steps))
    owner = ctx.nearest_mark(mark)  # per host event: the optimizer step it runs in (-1: none)
    inside = owner >= 0
    ops = pd.Series(names[inside & (ev["cat"] == "cpu_op").to_numpy()], dtype=object)
    if ops.str.contains("_fused_adam|_fused_sgd|_fused_adagrad", regex=True).any():
        return []
    foreach = ops.str.startswith("aten::_foreach_").sum()
    per_param = ops.isin(PER_PARAM_OPTIM).sum()
    if foreach == 0 and per_param < 8:
        return []
    if foreach and per_param < 8 and foreach / ctx.per_step < 4:
        return []  # a foreach optimizer launches a few multi-tensor kernels: little left to fuse
    w = ctx.work
    launch = ev["launch"].to_numpy()[w["row"].to_numpy()]
    mine = w[(launch >= 0) & inside[np.maximum(launch, 0)] & (w["family"] != "communication").to_numpy()]
    t = float(mine["dur"].sum()) / ctx.per_step
    # each optimizer step at its typical cost over the steps the path covers: one slowed by the machine must not
    # stand for all; two optimizers stepped in each step (a GAN's) are told apart by their order in it
    walked = ctx.on_path_steps(steps)
    order = pd.Series(names[steps], dtype=object).groupby(np.searchsorted(ctx.steps["start"], ts[steps])).cumcount()
    keys = list(zip(names[steps], order))
    values = [_optimizer_saving(ctx, r, owner == i, mine, ranges) if on else 0.0
              for i, (r, on) in enumerate(zip(steps, walked))]  # fmt: skip
    saving = float(typical_by_key(keys, values, walked).sum())
    kind = "per-parameter (for-loop)" if per_param >= foreach else "foreach (multi-tensor) but not fused"
    rows = mine["row"].to_numpy()
    if not len(w):  # a CPU-only run: the operators are the work, and their host time its cost
        rows = np.flatnonzero(inside & (ev["cat"] == "cpu_op").to_numpy())
        t = float(ev["dur"].to_numpy()[steps].sum()) / ctx.per_step
    return [
        ctx.finding(
            "unfused_optimizer",
            f"The optimizer step is {kind}: many small {'kernels' if len(w) else 'operators'}",
            rows,
            t,
            saving,
            "medium" if per_param >= foreach else "low",
            "08",
            "Use the fused optimizer (torch.optim.AdamW(..., fused=True)) or compile the optimizer step",
            f"{len(mine) / ctx.per_step:,.0f} kernels and {len(ops) / ctx.per_step:,.0f} operators per optimizer step",
        )  # fmt: skip
    ]


RULES = [fp32_gemm, misaligned_gemm, unfused_elementwise, manual_attention, unfused_optimizer]
