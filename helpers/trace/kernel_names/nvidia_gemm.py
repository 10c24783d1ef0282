"""NVIDIA's GEMM libraries: cuBLAS nvjet (Hopper and later) and CUTLASS 2.x/3.x; cuBLAS's other
kernels are :mod:`helpers.trace.kernel_names.cublas`."""

from __future__ import annotations

import re
from typing import Any

from .common import (
    DTYPE_WORDS,
    NVJET_TYPE_LETTER,
    PRECISION_LETTER,
    explain_ab,
    instruction_shape,
    join,
    parse_dims,
    stages_text,
)


def parse_nvjet(text: str) -> dict[str, Any] | None:
    m = re.search(r"\bnvjet_[A-Za-z0-9_]+", text)
    if not m:
        return None
    kname = m.group(0)
    tokens = kname.split("_")[1:]
    info: dict[str, Any] = {"family": "gemm", "source": "cublas-nvjet", "short_name": kname}
    inferred: list[str] = []
    unparsed: list[str] = []
    if tokens and re.fullmatch(r"sm\d+", tokens[0]):
        info["arch"] = tokens.pop(0)
    if tokens and re.fullmatch(r"[a-z]+", tokens[0]) and not parse_dims(tokens[0]):
        code = tokens.pop(0)
        info["type_code"] = code
        if len(code) == 3 and all(c in NVJET_TYPE_LETTER for c in code):
            info["dtype"] = NVJET_TYPE_LETTER[code[0]]
            info["accumulate"] = NVJET_TYPE_LETTER[code[1]]
            info["out_dtype"] = NVJET_TYPE_LETTER[code[2]]
            inferred += ["dtype", "accumulate", "out_dtype"]
    if tokens and re.fullmatch(r"[TN]{2,4}", tokens[-1]):
        info["layout"] = tokens.pop()
    dims_seen = 0
    for tok in tokens:
        d = parse_dims(tok)
        if d is not None and len(d) == 2 and dims_seen == 0:
            info["tile"] = f"{d[0]}x{d[1]}"
            dims_seen = 1
        elif d is not None and len(d) == 2 and dims_seen == 1:
            info["tile"] = f"{info['tile']}x{d[0]}"
            info["stages"] = d[1]
            dims_seen = 2
        elif d is not None and len(d) == 2 and dims_seen == 2:
            info["cluster"] = tok
            dims_seen = 3
        elif tok == "bias":
            info["bias"] = True
        elif tok in ("relu", "gelu", "silu"):
            info["activation"] = tok
        else:
            unparsed.append(tok)
    inferred += ["tile", "stages", "cluster"]
    info["inferred"] = inferred
    info["unparsed"] = unparsed

    bits = []
    if "tile" in info:
        tile = info["tile"].split("x")
        bits.append(f"tile {tile[0]}x{tile[1]}" + (f", K-step {tile[2]}" if len(tile) == 3 else ""))
    if "stages" in info:
        bits.append(stages_text(info["stages"]))
    if "cluster" in info:
        bits.append(f"cluster {info['cluster']}")
    if info.get("dtype"):
        bits.append(f"{info['dtype']} in / {info['out_dtype']} out")
    epi = " with a bias epilogue" if info.get("bias") else ""
    built = f" built for {info['arch']}" if "arch" in info else ""
    info["summary"] = (
        f"cuBLAS GEMM (nvjet kernel{built}){epi}: {join(bits) or 'no tile read'}"
        f"{'; layout ' + info['layout'] if 'layout' in info else ''}. NVIDIA does not "
        "document nvjet names: tile, stages, cluster and types are read by analogy "
        "with CUTLASS names."
    )
    explain = []
    if "layout" in info:
        lay = info["layout"]
        explain.append(explain_ab(lay[:2], documented=False))
        if len(lay) >= 3:
            explain.append(
                f"The rest ({lay[2:]}) is undocumented: by analogy with CUTLASS 3.x (A, B, C) it is "
                "often read as the output's layout, but the same projection on the same output "
                "shows ...TNT at small batch and ...TNN at larger batch in public benchmarks, so "
                "it is not simply the output's memory layout."
            )
    explain.append(
        "Tokens such as h/v, bz, coopA/coopB, splitK, 2cta are kernel variants that "
        "NVIDIA does not document; they are listed in `unparsed`."
    )
    info["explain"] = " ".join(explain)
    return info


# ---------------------------------------------------------------------------------------------
# CUTLASS (2.x and 3.x procedural names; also the cutlass_80_* kernels shipped inside cuBLAS)
# ---------------------------------------------------------------------------------------------


def parse_cutlass(text: str) -> dict[str, Any] | None:
    # a procedural kernel name, not a namespace (TensorRT-LLM's `cutlass_kernels::` MoE helpers)
    m = re.search(r"\bcutlass(?:3x)?_[A-Za-z0-9_]+(?![\w:])", text)
    if not m:
        return None
    kname = m.group(0)
    if re.search(r"fprop|dgrad|wgrad|conv", kname):
        phase = re.search(r"(fprop|dgrad|wgrad)", kname)
        return {
            "family": "convolution",
            "source": "cutlass",
            "short_name": kname,
            **(
                {
                    "phase": {
                        "fprop": "forward",
                        "dgrad": "backward (input gradient)",
                        "wgrad": "backward (weight gradient)",
                    }[phase.group(1)]
                }
                if phase
                else {}
            ),
            "summary": "CUTLASS implicit-GEMM convolution kernel.",
        }
    if "gemm" not in kname:
        return {
            "family": "unknown",
            "source": "cutlass",
            "short_name": kname,
            "summary": "A CUTLASS kernel that is not a GEMM this decoder reads.",
        }
    if kname.startswith("cutlass3x_"):
        return parse_cutlass3(kname)
    tokens = kname.split("_")[1:]
    info: dict[str, Any] = {"family": "gemm", "source": "cutlass", "short_name": kname}
    unparsed: list[str] = []
    if tokens and re.fullmatch(r"(?:sm)?\d{2,3}", tokens[0]):
        info["arch"] = "sm" + tokens.pop(0).removeprefix("sm")
    # the opcode class runs up to the token that carries 'gemm' or a type word
    opcode = []
    while tokens and "gemm" not in tokens[0] and tokens[0] not in DTYPE_WORDS:
        opcode.append(tokens.pop(0))
    if opcode:
        info["opcode_class"] = "_".join(opcode)
    types: list[str] = []
    dims: list[list[int]] = []
    for tok in tokens:
        core = re.fullmatch(r"([a-z]?)(\d*)(tf32|bf16|f16)?gemm", tok)
        if core:
            acc, digits, mma_type = core.groups()
            if digits:
                if acc:
                    info["accumulate"] = PRECISION_LETTER.get(acc)
                shape = instruction_shape(digits)
                if shape:
                    info["instruction"] = shape
                else:
                    unparsed.append(tok)
            elif acc:  # simt: sgemm, dgemm, hgemm - the BLAS precision letter
                info["dtype"] = PRECISION_LETTER.get(acc)
            continue
        if tok in DTYPE_WORDS:
            types.append(DTYPE_WORDS[tok])
        elif parse_dims(tok) and len(parse_dims(tok)) == 2:
            dims.append(parse_dims(tok))
        elif re.fullmatch(r"[tn]{2}", tok):
            info["layout"] = tok
        elif re.fullmatch(r"align\d+", tok):
            info["alignment"] = int(tok[5:])
        elif tok in ("relu", "gelu", "silu"):
            info["activation"] = tok
        elif tok == "bias":
            info["bias"] = True
        else:
            unparsed.append(tok)
    # CUTLASS 2.x extended name: <element C>_<core>_<element A> (CUTLASS gemm_operation.py)
    if types:
        info["out_dtype"] = types[0]
        info["dtype"] = types[-1]
    if dims:
        info["tile"] = f"{dims[0][0]}x{dims[0][1]}"
    if len(dims) >= 2:
        info["tile"] += f"x{dims[1][0]}"
        info["stages"] = dims[1][1]
    info["unparsed"] = unparsed + [f"{d[0]}x{d[1]}" for d in dims[2:]]
    bits = [
        f"tile {info['tile']}" if "tile" in info else None,
        stages_text(info["stages"]) if "stages" in info else None,
        f"{info['dtype']}" if "dtype" in info else None,
        f"MMA instruction {info['instruction']}" if "instruction" in info else None,
        f"align{info['alignment']}" if "alignment" in info else None,
    ]
    arch = f" built for {info['arch']}" if "arch" in info else ""
    info["summary"] = (
        f"CUTLASS GEMM{arch} ({info.get('opcode_class', 'opcode class not named')}): "
        f"{join(bits)}{'; layout ' + info['layout'] if 'layout' in info else ''}."
    )
    explain = [
        "CUTLASS 2.x procedural name: tile MxN, then KxStages, the layouts of A and B, and "
        "alignN = maximum alignment of A and B in elements (CUTLASS profiler docs); the letter "
        "before the instruction shape is the accumulator type (s = fp32)."
    ]
    if "layout" in info:
        explain.append(explain_ab(info["layout"], documented=True))
    info["explain"] = " ".join(explain)
    return info


def parse_cutlass3(kname: str) -> dict[str, Any]:
    # cutlass3x_sm90_tensorop_s64x128x16gemm_f16_f16_f32_f16_f32_128x128x64_2x1x1_0_ntn_align8[_...]
    tokens = kname.split("_")[1:]
    info: dict[str, Any] = {"family": "gemm", "source": "cutlass", "short_name": kname}
    unparsed: list[str] = []
    types: list[str] = []
    dims3: list[str] = []
    for tok in tokens:
        if re.fullmatch(r"sm\d+", tok):
            info["arch"] = tok
        elif tok in ("tensorop", "simt", "wmma"):
            info["opcode_class"] = tok
        elif m := re.fullmatch(r"([a-z])(\d+x\d+x\d+)(?:[a-z0-9]*)gemm", tok):
            info["accumulate"] = PRECISION_LETTER.get(m.group(1))
            info["instruction"] = m.group(2)
        elif tok in DTYPE_WORDS or tok == "void":
            types.append(DTYPE_WORDS.get(tok, "void"))
        elif re.fullmatch(r"\d+x\d+x\d+", tok):
            dims3.append(tok)
        elif re.fullmatch(r"\d+", tok) and "stages" not in info and dims3:
            if tok != "0":  # 0 = stage count chosen automatically (CUTLASS profiler docs)
                info["stages"] = int(tok)
        elif re.fullmatch(r"[tn]{3}", tok):
            info["layout"] = tok
        elif re.fullmatch(r"align\d+", tok):
            info["alignment"] = int(tok[5:])
        else:
            unparsed.append(tok)
    if len(types) >= 5:  # A, B, accumulator, C, D
        info["dtype"] = types[0]
        info["out_dtype"] = types[4]
    if dims3:
        info["tile"] = dims3[0]
    if len(dims3) >= 2:
        info["cluster"] = dims3[1]
    info["unparsed"] = unparsed
    info["summary"] = (
        f"CUTLASS 3.x GEMM built for {info.get('arch', 'an unnamed arch')}: "
        + join(
            [
                f"tile {info.get('tile')}" if "tile" in info else None,
                f"cluster {info.get('cluster')}" if "cluster" in info else None,
                info.get("dtype"),
                f"layout {info.get('layout')}" if "layout" in info else None,
            ]
        )
        + "."
    )
    lay = info.get("layout")
    info["explain"] = (
        "CUTLASS 3.x procedural name (CUTLASS profiler docs): instruction MxNxK, types "
        "of A, B, accumulator, C, D, tile MxNxK, cluster, stages (0 = automatic), "
        "layouts of A, B, C (n = column-major, t = row-major), alignment."
        + (" " + explain_ab(lay[:2], documented=True) if lay else "")
    )
    return info
