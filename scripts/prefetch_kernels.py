"""Fetch the pinned hand-tuned kernel into the cache while online, or show what the loader does here.

python scripts/prefetch_kernels.py prefetch   # download liger-kernels v1 into the cache (the Space's build step)
python scripts/prefetch_kernels.py status     # run the loader here and print which source it used and why
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

# The repository this script belongs to, before any installed copy of helpers.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers.mlp.hub import KernelLoadError, load_geglu_mlp  # noqa: E402
from helpers.mlp.hub_cache import LIGER_REPO, LIGER_VERSION, offline_mode, prefetch  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    pre = sub.add_parser("prefetch", help="download the pinned Hub kernel into the cache (needs network)")
    pre.add_argument("--repo", default=LIGER_REPO)
    pre.add_argument("--version", type=int, default=LIGER_VERSION)
    pre.add_argument("--all-variants", action="store_true")
    sub.add_parser("status", help="run the loader here and print which source it used and why")
    args = parser.parse_args(argv)
    if args.command == "prefetch":
        path = prefetch(args.repo, args.version, all_variants=args.all_variants)
        print(f"{args.repo} version {args.version} is in the cache: {path}")
        with offline_mode():
            loaded = load_geglu_mlp(
                sources=("cache",), repo_id=args.repo, version=args.version, verify=torch.cuda.is_available()
            )
        print(f"offline load works: {loaded.origin}")
        return 0
    try:
        loaded = load_geglu_mlp()
    except KernelLoadError as err:
        print(err, file=sys.stderr)
        return 1
    print(repr(loaded))
    return 0


if __name__ == "__main__":
    sys.exit(main())
