"""Pin, fetch and check the hand-tuned kernel the course loads (kernels-community/liger-kernels, version 1).

python scripts/prefetch_kernels.py lock       # with network: write local_kernels/hub-lock/kernels.lock (`kernels lock`)
python scripts/prefetch_kernels.py prefetch   # with network: download the pinned kernel into the cache and record
                                              # its files' hashes, which offline loads check first (the Space's build step)
python scripts/prefetch_kernels.py pin        # which pin applies here: a commit (exact) or the branch v1 (movable)
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
from helpers.mlp.hub_cache import LIGER_REPO, LIGER_VERSION, offline_mode  # noqa: E402
from helpers.mlp.hub_pin import KERNEL_LOCK_DIR, kernel_pin, prefetch  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    pre = sub.add_parser("prefetch", help="download the pinned Hub kernel into the cache (needs network)")
    pre.add_argument("--repo", default=LIGER_REPO)
    pre.add_argument("--version", type=int, default=LIGER_VERSION)
    pre.add_argument("--revision", default=None, help="an exact commit sha (default: the lock file, else branch v1)")
    pre.add_argument("--all-variants", action="store_true")
    sub.add_parser("lock", help=f"write {KERNEL_LOCK_DIR.name}/kernels.lock with `kernels lock` (needs network)")
    sub.add_parser("pin", help="print which pin applies here")
    sub.add_parser("status", help="run the loader here and print which source it used and why")
    args = parser.parse_args(argv)
    if args.command == "lock":
        from kernels.cli.lock import lock_kernels

        lock_kernels(argparse.Namespace(project_dir=KERNEL_LOCK_DIR))
        print(f"locked: {kernel_pin(LIGER_REPO, LIGER_VERSION).describe()}; commit {KERNEL_LOCK_DIR}/kernels.lock")
        return 0
    if args.command == "pin":
        print(kernel_pin(LIGER_REPO, LIGER_VERSION).describe())
        return 0
    if args.command == "prefetch":
        pin = kernel_pin(args.repo, args.version, args.revision)
        path = prefetch(args.repo, args.version, all_variants=args.all_variants, revision=args.revision)
        print(f"{pin.describe()} is in the cache: {path}")
        with offline_mode():
            loaded = load_geglu_mlp(
                sources=("cache",),
                repo_id=args.repo,
                version=args.version,
                revision=args.revision,
                verify=torch.cuda.is_available(),
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
