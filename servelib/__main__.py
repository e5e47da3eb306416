"""Audit capacity plans from the command line.

    python -m servelib plan.toml [more.toml ...]

Prints each plan's derived capacity figures and its audit. Exit status: 0 when no plan has
a mistake, 1 when the audit finds one, 2 when a plan is invalid (the message names the
field) or cannot be read.
"""
from __future__ import annotations

import argparse
import sys

from .audit import audit, load_plan
from .audit.report import report


def main(argv=None) -> int:
    """Run the audit CLI on ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m servelib",
        description="Audit LLM-serving capacity plans written in TOML: print each plan's derived "
                    "figures, then the beginner mistakes found in it.",
        epilog="Exit status: 0 when every plan is sound, 1 when a mistake is found, 2 when a plan is "
               "invalid or unreadable. Example plans (one sound, one per mistake, one per war story) "
               "are in the repository's plans/ folder; servelib.audit.plan documents the fields.")
    parser.add_argument("plans", nargs="+", metavar="plan.toml", help="capacity plan file(s)")
    args = parser.parse_args(argv)
    status = 0
    for i, path in enumerate(args.plans):
        try:
            plan = load_plan(path)
        except (ValueError, TypeError) as e:          # PlanError, or a check deeper in servelib
            # The error names the file already when it could not be read.
            msg = str(e)
            print(msg if msg.startswith(str(path)) else f"{path}: invalid plan: {msg}", file=sys.stderr)
            status = 2
            continue
        try:
            text, found = report(plan), audit(plan)
        except (ValueError, TypeError) as e:
            # A combination of valid fields that servelib cannot plan: a usage error, not a
            # traceback. PlanError names the field; anything else is quoted with the file.
            print(f"{path}: invalid plan: {e}", file=sys.stderr)
            status = 2
            continue
        if i:
            print()
        print(text, end="")
        if found and status == 0:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
