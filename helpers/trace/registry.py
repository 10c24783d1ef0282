"""What a project registers about itself: its kernels' names, and the ceilings of machines its recorded traces come from."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

# Kernel names a package registers for itself (register_kernel_names): the engine knows no
# project's kernels by name; a project that ships Triton kernels tells it what they are.
REGISTERED: dict[str, dict[str, Any]] = {}
_REGISTERED_KEYS = {"family", "source", "summary", "fused_ops", "op", "phase"}


def register_kernel_names(entries: Mapping[str, Mapping[str, Any]]) -> None:
    """Teach the decoder kernel names by their exact text: name -> {family, source, summary, ...}; the source
    is reported as inferred (another project's kernel could share the name)."""
    if not isinstance(entries, Mapping):
        raise TypeError(f"register_kernel_names expects a mapping of name -> fields, got {type(entries).__name__}")
    for name, fields in entries.items():
        if not isinstance(name, str) or not name.strip() or not isinstance(fields, Mapping):
            raise ValueError(f"a registered kernel needs a name and a mapping of fields, got {name!r}: {fields!r}")
        extra = set(fields) - _REGISTERED_KEYS
        if extra or not {"family", "source", "summary"} <= set(fields):
            raise ValueError(
                f"{name}: fields must be family, source, summary (+ {sorted(_REGISTERED_KEYS)}), got {sorted(fields)}"
            )
        REGISTERED[name.strip()] = dict(fields)


# Recorded ceilings of other machines: a device-name fragment ("H200") -> a function returning them
# (called only when needed, so registering imports nothing heavy).
REFERENCE_CEILINGS: dict[str, Callable[[], Any]] = {}


def register_reference_ceilings(device_fragment: str, load: Callable[[], Any]) -> None:
    """Judge recorded traces whose device name contains `device_fragment` against ``load()``'s ceilings."""
    if not isinstance(device_fragment, str) or not device_fragment:
        raise ValueError("device_fragment must be a non-empty part of a device name, e.g. 'H200'")
    if not callable(load):
        raise TypeError(f"load must be a function returning Ceilings, got {type(load).__name__}")
    REFERENCE_CEILINGS[device_fragment] = load
