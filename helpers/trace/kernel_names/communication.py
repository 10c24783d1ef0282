"""Communication kernels: NCCL (and RCCL, which keeps NCCL's names), MSCCL, and a few custom all-reduces.

NCCL builds one device kernel per (collective, reduction op, data type, algorithm, protocol) and
names it after them. Three naming schemes are in use (read from NCCL's own source, ``src/device``
and its generator scripts):

* NCCL 2.19 and later: ``ncclDevKernel_<Collective>_<Op>_<type>_<ALGORITHM>_<PROTOCOL>``, e.g.
  ``ncclDevKernel_AllReduce_Sum_bf16_RING_LL``; collectives without a reduction drop the op and
  type (``ncclDevKernel_AllGather_RING_LL``); ``ncclDevKernel_SendRecv`` and the generic
  ``ncclDevKernel_Generic[_n]`` carry no more than that.
* NCCL 2.8 to 2.18: ``ncclKernel_<Collective>_<ALGORITHM>_<PROTOCOL>_<Op>_<C type>``, e.g.
  ``ncclKernel_AllReduce_RING_LL_Sum_float``. Send/receive kernels were instantiated with a
  placeholder op and type (``ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t``): they reduce nothing.
* NCCL 2.4 to 2.7: ``nccl<Collective><Algorithm><Protocol>Kernel_<op>_<type>``, e.g.
  ``ncclAllReduceRingLLKernel_sum_f32``.

Algorithms: RING, TREE, COLLNET_DIRECT, COLLNET_CHAIN, NVLS, NVLS_TREE, PAT. Protocols: SIMPLE (large
messages, full bandwidth), LL (low latency: 8-byte stores with a flag, half the bandwidth), LL128
(128-byte lines with a flag, near full bandwidth on NVLink).
"""

from __future__ import annotations

import re
from typing import Any

from .common import camel_words

ALGORITHMS = ("RING", "TREE", "COLLNET_DIRECT", "COLLNET_CHAIN", "COLLNET", "NVLS_TREE", "NVLS", "PAT")
PROTOCOLS = ("SIMPLE", "LL128", "LL")
REDUCE_OPS = {"Sum": "sum", "Prod": "prod", "Min": "min", "Max": "max", "MinMax": "min/max", "PreMulSum": "premulsum"}
REDUCE_OPS.update({"SumPostDiv": "sum, then divide", "Avg": "average"})
NCCL_TYPES = {
    "i8": "int8",
    "u8": "uint8",
    "i32": "int32",
    "u32": "uint32",
    "i64": "int64",
    "u64": "uint64",
    "f16": "fp16",
    "f32": "fp32",
    "f64": "fp64",
    "bf16": "bf16",
    "f8e4m3": "fp8_e4m3",
    "f8e5m2": "fp8_e5m2",
    "int8_t": "int8",
    "uint8_t": "uint8",
    "int32_t": "int32",
    "uint32_t": "uint32",
    "int64_t": "int64",
    "uint64_t": "uint64",
    "half": "fp16",
    "float": "fp32",
    "double": "fp64",
    "__nv_bfloat16": "bf16",
    "rccl_bfloat16": "bf16",
    "hip_bfloat16": "bf16",
    "__nv_fp8_e4m3": "fp8_e4m3",
    "__nv_fp8_e5m2": "fp8_e5m2",
}
COLLECTIVES = ("AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "SendRecv", "AllToAll", "Generic")
_NO_REDUCTION = ("AllGather", "Broadcast", "SendRecv", "AllToAll")

_EXPLAIN = (
    "NCCL names each device kernel after what it does: the collective, the reduction op and data "
    "type (for reducing collectives), the algorithm (RING, TREE, NVLS ...) and the protocol "
    "(SIMPLE: full bandwidth for large messages; LL: low latency, half the bandwidth; LL128: "
    "near full bandwidth on NVLink). RCCL (AMD) keeps the same names. One kernel runs the whole "
    "collective, including the waiting for the other ranks: its time is communication plus "
    "synchronisation, not bandwidth alone."
)


def _nccl_fields(collective: str, op: str | None, dtype: str | None, algo: str | None, proto: str | None) -> dict:
    info: dict[str, Any] = {"family": "communication", "source": "nccl", "collective": collective}
    if op and collective not in _NO_REDUCTION:
        info["reduce_op"] = REDUCE_OPS.get(op, op.lower())
    if dtype and collective not in ("SendRecv",):
        info["dtype"] = NCCL_TYPES.get(dtype, dtype)
    if algo:
        info["algorithm"] = algo
    if proto:
        info["protocol"] = proto
    return info


def _tail_algo_proto(tokens: list[str]) -> tuple[str | None, str | None, list[str]]:
    """Pull '<ALGORITHM>_<PROTOCOL>' off the end (or the start) of a token list."""
    text = "_".join(tokens)
    for algo in sorted(ALGORITHMS, key=len, reverse=True):  # NVLS_TREE before TREE
        for proto in PROTOCOLS:
            where = f"{algo}_{proto}"
            if text.endswith(where) and (len(text) == len(where) or text[-len(where) - 1] == "_"):
                return algo, proto, [t for t in text[: -len(where)].split("_") if t]
            if text.startswith(where) and (len(text) == len(where) or text[len(where)] == "_"):
                return algo, proto, text[len(where) + 1 :].split("_") if len(text) > len(where) else []
    return None, None, tokens


def parse_nccl(text: str) -> dict[str, Any] | None:
    m = re.search(r"\b(ncclDevKernel|ncclKernel|mscclKernel)_(\w+)", text)
    if m:
        scheme, rest = m.groups()
        kname = m.group(0)
        tokens = rest.split("_")
        collective = tokens.pop(0) if scheme != "mscclKernel" else "MSCCL"
        unparsed: list[str] = []
        if scheme == "ncclDevKernel":
            if collective == "Generic":
                info = _nccl_fields("Generic", None, None, None, None)
                info["summary"] = (
                    "NCCL's generic device kernel (NCCL 2.19+ and RCCL): one kernel runs many kinds of "
                    "collective, so the name does not say which; the op that launched it does."
                )
                info.update(short_name=kname, explain=_EXPLAIN, unparsed=[t for t in tokens if not t.isdigit()])
                return info
            algo, proto, head = _tail_algo_proto(tokens)
            op = head.pop(0) if head and head[0] in REDUCE_OPS else None
            dtype = head.pop(0) if head and head[0] in NCCL_TYPES else None
            unparsed = head
        elif scheme == "ncclKernel":
            algo, proto, tail = _tail_algo_proto(tokens)
            op = tail.pop(0) if tail and tail[0] in REDUCE_OPS else None
            rest_type = "_".join(tail)
            dtype = rest_type if rest_type in NCCL_TYPES else None
            unparsed = [] if dtype or not tail else tail
        else:  # mscclKernel_<Op>_<type>_<PROTO>
            algo, proto = None, tokens.pop() if tokens and tokens[-1] in PROTOCOLS else None
            op = tokens.pop(0) if tokens and tokens[0] in REDUCE_OPS else None
            dtype = tokens.pop(0) if tokens and tokens[0] in NCCL_TYPES else None
            unparsed = tokens
        info = _nccl_fields(collective, op, dtype, algo, proto)
        if scheme == "mscclKernel":
            info["source"] = "msccl"
        info["short_name"] = kname
        info["unparsed"] = unparsed
        if scheme == "ncclKernel" and collective == "SendRecv":
            info["explain"] = (
                _EXPLAIN + " Send/receive kernels of NCCL 2.8-2.18 carry a placeholder op and type "
                "(Sum, int8_t): they move bytes and reduce nothing."
            )
        else:
            info["explain"] = _EXPLAIN
        info["summary"] = _summary(info)
        return info
    m = re.search(r"\bnccl([A-Z]\w*?)Kernel_(\w+)", text)  # NCCL 2.4-2.7
    if m:
        words = camel_words(m.group(1))
        joined = "".join(words)
        collective = next((c for c in COLLECTIVES if joined.startswith(c)), None)
        if collective is None:
            return None
        rest = words[len(camel_words(collective)) :]
        algo = next((a for a in ALGORITHMS if a.replace("_", "").lower() == "".join(rest[:1]).lower()), None)
        proto_word = "".join(rest[1:]) if algo else "".join(rest)
        proto = next((p for p in PROTOCOLS if p.lower() == proto_word.lower()), None)
        op_type = m.group(2).split("_")
        op = op_type[0].capitalize() if op_type and op_type[0].capitalize() in REDUCE_OPS else None
        dtype = op_type[1] if len(op_type) > 1 and op_type[1] in NCCL_TYPES else None
        info = _nccl_fields(collective, op, dtype, algo, proto)
        info.update(short_name=m.group(0), explain=_EXPLAIN, unparsed=[] if proto or not proto_word else [proto_word])
        info["summary"] = _summary(info)
        return info
    return None


def _summary(info: dict[str, Any]) -> str:
    bits = [info["collective"]]
    if "reduce_op" in info:
        bits.append(f"({info['reduce_op']}")
        bits[-1] += f", {info['dtype']})" if "dtype" in info else ")"
    elif "dtype" in info:
        bits.append(f"({info['dtype']})")
    how = ", ".join(x for x in (info.get("algorithm"), info.get("protocol")) if x)
    lib = "MSCCL" if info["source"] == "msccl" else "NCCL (or RCCL)"
    return f"{lib} collective kernel: {' '.join(bits)}" + (f", {how}" if how else "") + "."


# Communication kernels outside NCCL: (pattern, source, collective, what). Names from the projects'
# sources; a project could be vendored elsewhere, so the source is an attribution by name.
_CUSTOM = (
    (r"\bvllm::cross_device_reduce_(?:1|2)stage\b", "vllm", "AllReduce", "vLLM's custom all-reduce over NVLink/P2P"),
    (
        r"\bc10d::symmetric_memory::\w*?(all_reduce|allreduce)",
        "pytorch-symm-mem",
        "AllReduce",
        "PyTorch symmetric-memory all-reduce",
    ),
    (
        r"\bc10d::symmetric_memory::\w*?(all_gather|allgather)",
        "pytorch-symm-mem",
        "AllGather",
        "PyTorch symmetric-memory all-gather",
    ),
    (
        r"\bc10d::symmetric_memory::\w*?(reduce_scatter)",
        "pytorch-symm-mem",
        "ReduceScatter",
        "PyTorch symmetric-memory reduce-scatter",
    ),
    (
        r"\b(?:flashinfer|tensorrt_llm)::\w*?allreduce",
        "flashinfer/trt-llm",
        "AllReduce",
        "a fused all-reduce (TensorRT-LLM / FlashInfer)",
    ),
    (r"\bdeep_ep::\w*?(dispatch|combine)", "deep_ep", "AllToAll", "DeepEP expert-parallel all-to-all"),
)


def parse_custom_collective(text: str) -> dict[str, Any] | None:
    for pattern, source, collective, what in _CUSTOM:
        if re.search(pattern, text):
            return {
                "family": "communication",
                "source": source,
                "collective": collective,
                "inferred": ["source"],
                "summary": f"{what}: a communication kernel outside NCCL.",
            }
    return None
