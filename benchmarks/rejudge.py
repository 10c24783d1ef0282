"""Rewrite the tables stored in recorded results from their raw measurements, with today's code and ceilings.

    python -m benchmarks rejudge            # every results file a benchmark knows
    python -m benchmarks rejudge ceilings   # one benchmark's files

A results file keeps what was measured (times, kernel names, shapes) and, beside it, the tables the
lessons show (rates, % of the floor, which kernel plays which role). Those tables depend on the
course's ceilings and on what the kernel-name decoder knows; when either changes, this rewrites them.
"""

from __future__ import annotations

import argparse
import importlib
import json

from .common import RESULTS_DIR, log, store_tables, write_json

# benchmarks whose modules define RESULTS (file stems) and tables(data); the ceilings first, since
# every other table is judged against them
JUDGED = ("ceilings", "mlp", "attention", "decoder", "ddp", "timing_methods", "fp8_gate_up")


def rejudge(names: list[str]) -> list[str]:
    """Rewrite the stored tables of every file of the named benchmarks; returns the files written."""
    written = []
    for name in names:
        module = importlib.import_module(f"benchmarks.{name}")
        for stem in module.RESULTS:
            path = RESULTS_DIR / f"{stem}.json"
            if not path.is_file():
                log(f"{name}: {path.name} is not recorded; skipped")
                continue
            data = json.loads(path.read_text(encoding="utf-8"))
            write_json(path, store_tables(data, module.tables(data)))
            written.append(path.name)
            log(f"{name}: rewrote the tables of {path.name}")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="benchmarks (default: all)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(JUDGED))
    if unknown:
        parser.error(f"no benchmark stores tables under {unknown}; known: {', '.join(JUDGED)}")
    rejudge(list(args.names) or list(JUDGED))
    return 0
