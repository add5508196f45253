"""The operator CLI: a thin layer where each subcommand calls one library function.

    langgraph-durable setup                      # create or migrate the tables
    langgraph-durable check                      # is the schema ready for this version?
    langgraph-durable schema                     # print the canonical schema for a DBA
    langgraph-durable prune THREAD... [--strategy keep_latest|delete]
    langgraph-durable delete-idle --older-than 30d
    langgraph-durable effects [--thread ID]      # effects running, unknown or waiting
    langgraph-durable resolve KEY (--allow-retry | --completed JSON | --failed REASON)
    langgraph-durable approvals [--thread ID]    # threads waiting at an interrupt()

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
from langgraph_durable.approvals import pending_approvals
from langgraph_durable.checkpoint import DurablePostgresSaver
from langgraph_durable.effects import EffectJournal, journal_of
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
    effects = commands.add_parser("effects", help="list effects that are not finished")
    effects.add_argument("--thread")
    effects.add_argument("--limit", type=int, default=100)
    approvals = commands.add_parser("approvals", help="list threads waiting for an answer")
    approvals.add_argument("--thread")
    approvals.add_argument("--limit", type=int, default=100)
    resolve = commands.add_parser("resolve", help="resolve an effect whose outcome is unknown")
    resolve.add_argument("key")
    how = resolve.add_mutually_exclusive_group(required=True)
    how.add_argument("--allow-retry", action="store_true", help="the receiver never acted")
    how.add_argument("--completed", metavar="JSON", help="the receiver acted; its result")
    how.add_argument("--failed", metavar="REASON", help="give up; replays raise this")
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
        if args.command == "approvals":
            waiting = pending_approvals(saver, thread_id=args.thread, limit=args.limit)
            return {
                "approvals": [
                    {
                        "thread_id": w.thread_id,
                        "interrupt_id": w.interrupt_id,
                        "is_approval": w.is_approval,
                        "waiting_since": str(w.waiting_since),
                        "age": str(w.age),
                        "value": w.value,
                    }
                    for w in waiting
                ]
            }
        journal = journal_of(saver)
        assert isinstance(journal, EffectJournal)
        if args.command == "effects":
            rows = journal.open_effects(args.thread, args.limit)
            return {
                "effects": [
                    {k: str(v) if v is not None else None for k, v in r.items()} for r in rows
                ]
            }
        if args.command == "resolve":
            if args.completed is not None:
                try:
                    result = json.loads(args.completed)
                except json.JSONDecodeError as exc:
                    raise DurableError(f"--completed must be JSON ({exc}).") from exc
                journal.resolve(args.key, completed=result)
            elif args.failed is not None:
                journal.resolve(args.key, failed=args.failed)
            else:
                journal.resolve(args.key, allow_retry=True)
            return {"resolved": args.key}
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
        print(json.dumps(result, default=str))
    elif "approvals" in result:
        for row in result["approvals"]:
            print(
                f"{row['thread_id']}  waiting {row['age']}  "
                f"{json.dumps(row['value'], default=str)[:120]}"
            )
        if not result["approvals"]:
            print("no thread is waiting")
    elif "effects" in result:
        for row in result["effects"]:
            print(
                f"{row['status']:<10} attempt {row['attempt']}  {row['key']}  "
                f"thread={row['thread_id']} node={row['node']} {row['error_type'] or ''}"
            )
        if not result["effects"]:
            print("no open effects")
    else:
        for key, value in result.items():
            shown = ", ".join(value) if isinstance(value, list) else value
            print(f"{key}: {shown if shown != '' else '(none)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
