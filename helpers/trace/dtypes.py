"""Element types, one table for every spelling a trace or a user gives them (torch names, short names,
kernel-name tokens, C++ types): :func:`lookup` maps any to one :class:`DType`. No torch needed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DType:
    """One element type: the names it goes by and its size."""

    short: str  # what tables and decoded kernel names show: "bf16"
    torch_name: str  # the attribute of torch: torch.bfloat16
    itemsize: int
    floating: bool
    aliases: tuple[str, ...] = ()  # other spellings, kernel-name tokens among them
    cpp: tuple[str, ...] = ()  # C++ type names (ATen signatures, the profiler's "Input type")


DTYPES: tuple[DType, ...] = (
    DType("bf16", "bfloat16", 2, True, ("bfloat16",), ("c10::BFloat16",)),
    DType("fp16", "float16", 2, True, ("f16", "half", "float16"), ("c10::Half",)),
    DType("fp32", "float32", 4, True, ("f32", "float", "float32"), ("float",)),
    DType("tf32", "float32", 4, True, (), ()),  # a matmul mode: fp32 storage, 10-bit mantissa products
    DType("fp64", "float64", 8, True, ("f64", "double", "float64"), ("double",)),
    DType(
        "fp8_e4m3", "float8_e4m3fn", 1, True, ("e4m3", "fp8", "fp8_e4m3fn", "float8_e4m3fn"), ("c10::Float8_e4m3fn",)
    ),
    DType("fp8_e5m2", "float8_e5m2", 1, True, ("e5m2", "float8_e5m2"), ("c10::Float8_e5m2",)),
    DType("int8", "int8", 1, False, ("s8", "i8"), ("signed char", "int8_t")),
    DType("uint8", "uint8", 1, False, ("u8",), ("unsigned char", "uint8_t")),
    DType("int16", "int16", 2, False, ("s16", "short"), ("short", "short int", "int16_t")),
    DType("int32", "int32", 4, False, ("s32", "i32", "int"), ("int", "int32_t")),
    DType("int64", "int64", 8, False, ("s64", "i64", "long"), ("long", "long int", "long long", "int64_t")),
    DType("bool", "bool", 1, False, (), ("bool",)),
    DType("complex64", "complex64", 8, True, (), ("c10::complex<float>",)),
    DType("complex128", "complex128", 16, True, (), ("c10::complex<double>",)),
)

_BY_NAME: dict[str, DType] = {}
for _d in DTYPES:
    for _n in (_d.short, *_d.aliases):
        _BY_NAME.setdefault(_n, _d)
    if _d.short != "tf32":
        _BY_NAME.setdefault(_d.torch_name, _d)
_BY_CPP: dict[str, DType] = {c: d for d in DTYPES for c in d.cpp}


def lookup(name: str) -> DType:
    """The :class:`DType` of any spelling ("bf16", "torch.bfloat16", "c10::BFloat16" ...); ValueError lists the known."""
    if not isinstance(name, str):
        raise TypeError(f"a dtype name must be a str, got {type(name).__name__}: {name!r}")
    key = name.strip().removeprefix("torch.").removeprefix("const ").strip()
    found = _BY_NAME.get(key.lower()) or _BY_CPP.get(key)
    if found is None:
        raise ValueError(f"unknown dtype {name!r}; known names: {', '.join(sorted(_BY_NAME))}")
    return found


def from_cpp(type_name: str) -> DType | None:
    """The dtype of a C++ type name as ATen and the profiler write it; None when it is not one."""
    return _BY_CPP.get(type_name.strip().removeprefix("const ").strip())
