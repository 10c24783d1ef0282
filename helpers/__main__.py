"""``python -m helpers <command>``: command-line tools of the course's engine.

python -m helpers report TRACE_OR_FOLDER [-o report.html]   # findings, kernels, timeline: one HTML page
"""

from __future__ import annotations

import sys

COMMANDS = {"report": "one self-contained HTML page of a trace's findings, kernels and timeline"}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help"} or args[0] not in COMMANDS:
        usage = "\n".join(f"  {name:8s} {what}" for name, what in COMMANDS.items())
        print(f"usage: python -m helpers <command> ...\ncommands:\n{usage}", file=sys.stderr)
        return 0 if args and args[0] in {"-h", "--help"} else 2
    from helpers.diagnose.report import main as report_main

    return report_main(args[1:])


if __name__ == "__main__":
    sys.exit(main())
