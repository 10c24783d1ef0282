"""Write helpers/trace/aten_op_names.txt: every ATen and prims operator name torch registers.

Reading Inductor kernel names (``triton_poi_fused__unsafe_view_gelu_mul_0``) means splitting the
``_``-joined op names apart, which needs the list of real op names. The trace layer must not import
torch, so the list is shipped as a file; run this after a torch upgrade:

    python scripts/update_aten_op_names.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

OUT = Path(__file__).resolve().parent.parent / "helpers" / "trace" / "aten_op_names.txt"


def main() -> int:
    names = set()
    for qualified in torch._C._dispatch_get_all_op_names():
        namespace, _, rest = qualified.partition("::")
        if namespace in ("aten", "prims"):
            names.add(rest.split(".", 1)[0])
    header = (
        f"# ATen and prims operator names registered by torch {torch.__version__} (scripts/update_aten_op_names.py)\n"
    )
    OUT.write_text(header + "\n".join(sorted(names)) + "\n", encoding="utf-8")
    print(f"wrote {len(names)} names to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
