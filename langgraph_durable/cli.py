"""The operator CLI: a thin layer where each subcommand calls one library function.

    langgraph-durable setup                      # create or migrate the tables
    langgraph-durable check                      # is the schema ready for this version?
    langgraph-durable schema                     # print the canonical schema for a DBA
    langgraph-durable prune THREAD... [--strategy keep_latest|delete]
    langgraph-durable delete-idle --older-than 30d

`--dsn` falls back to `LANGGRAPH_DURABLE_DSN`; `--json` prints machine-readable output.
Errors are printed as one line with what to do, and the exit code is 1 (2 for usage).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from langgraph_durable._sql import SCHEMA
from langgraph_durable.checkpoint import DurablePostgresSaver
from langgraph_durable.errors import DurableError

__all__ = ["main", "parse_age"]

_AGE = re.compile(r"^(?P<n>\d+)(?P<unit>[smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_age(text: str) -> timedelta:
    """Parse an age such as `90m`, `12h`, `30d` or `2w`."""
    match = _AGE.match(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(
            f"invalid age {text!r}: use a number and a unit, e.g. 90m, 12h, 30d, 2w"
        )
    return timedelta(**{_UNITS[match.group("unit")]: int(match.group("n"))})


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="langgraph-durable", description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("LANGGRAPH_DURABLE_DSN"))
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("setup", help="create or migrate the tables (idempotent)")
    commands.add_parser("check", help="check that the schema fits this version")
    commands.add_parser("schema", help="print the canonical schema SQL")
    prune = commands.add_parser("prune", help="prune threads")
    prune.add_argument("threads", nargs="+")
    prune.add_argument("--strategy", default="keep_latest", choices=["keep_latest", "delete"])
    idle = commands.add_parser("delete-idle", help="delete threads idle for longer than an age")
    idle.add_argument("--older-than", type=parse_age, required=True)
    return parser


def _run(args: argparse.Namespace) -> Any:
    if args.command == "schema":
        return SCHEMA
    if not args.dsn:
        raise DurableError("No database given: pass --dsn or set LANGGRAPH_DURABLE_DSN.")
    with DurablePostgresSaver.from_conn_string(args.dsn) as saver:
        if args.command == "setup":
            return {"applied": saver.setup()}
        if args.command == "check":
            saver.check_schema()
            return {"schema": "ok"}
        if args.command == "prune":
            saver.prune(args.threads, strategy=args.strategy)
            return {"pruned": args.threads, "strategy": args.strategy}
        if args.command == "delete-idle":
            return {"deleted": saver.delete_idle_threads(args.older_than)}
    raise AssertionError(f"unhandled command {args.command}")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        result = _run(args)
    except DurableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if isinstance(result, str):
        print(result)
    elif args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            shown = ", ".join(value) if isinstance(value, list) else value
            print(f"{key}: {shown if shown != '' else '(none)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
