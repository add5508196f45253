"""The operator CLI: a thin layer where each subcommand calls one library function.

    langgraph-durable setup                      # create or migrate the tables
    langgraph-durable check                      # is the schema ready for this version?
    langgraph-durable schema                     # print the canonical schema for a DBA
    langgraph-durable prune THREAD... [--strategy keep_latest|delete]
    langgraph-durable delete-idle --older-than 30d
    langgraph-durable effects [--thread ID]      # effects running, unknown or waiting
    langgraph-durable resolve KEY (--allow-retry | --completed JSON | --failed REASON)
    langgraph-durable approvals [--thread ID]    # threads waiting at an interrupt()
    langgraph-durable grant ROLE [--schema S] [--print]   # least-privilege app role

`--dsn` (else `LANGGRAPH_DURABLE_DSN`) and `--json` go before or after the subcommand.
`--json` prints one JSON object whose shape is stable: numbers as numbers, times as
ISO 8601 strings, ages in seconds, missing values as null.

Exit codes: 0 done; 1 the command failed (one line on stderr says why and what to do; a
password is never shown); 2 the command line is wrong (usage on stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from importlib import metadata
from typing import Any

from langgraph_durable._sql import SCHEMA
from langgraph_durable.approvals import pending_approvals
from langgraph_durable.checkpoint import DurablePostgresSaver
from langgraph_durable.effects import EffectJournal, journal_of
from langgraph_durable.errors import DurableError
from langgraph_durable.roles import app_role_sql, grant_app_role

__all__ = ["main", "parse_age"]

DSN_ENV = "LANGGRAPH_DURABLE_DSN"
AGE_HELP = "an age: a whole number and a unit, s m h d or w (90m, 12h, 30d, 2w)"

_AGE = re.compile(r"^(?P<n>\d+)(?P<unit>[smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_age(text: str) -> timedelta:
    """Parse an age such as `90m`, `12h`, `30d` or `2w`."""
    match = _AGE.match(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"invalid age {text!r}: use {AGE_HELP}")
    return timedelta(**{_UNITS[match.group("unit")]: int(match.group("n"))})


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"invalid count {text!r}: use a whole number >= 1")
    return value


def _version() -> str:
    try:
        return metadata.version("langgraph-durable")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a bare checkout
        return "unknown"


def _common(*, suppress: bool) -> argparse.ArgumentParser:
    """`--dsn` and `--json`, accepted before and after the subcommand.

    After the subcommand their defaults are suppressed, so a value given before it is not
    overwritten by the subcommand's default.
    """
    common = argparse.ArgumentParser(add_help=False)
    default_dsn: Any = argparse.SUPPRESS if suppress else os.environ.get(DSN_ENV)
    default_json: Any = argparse.SUPPRESS if suppress else False
    common.add_argument(
        "--dsn",
        default=default_dsn,
        help=f"the database, as a libpq DSN or URI (default: ${DSN_ENV})",
    )
    common.add_argument(
        "--json",
        action="store_true",
        default=default_json,
        help="print one JSON object with a stable shape instead of text",
    )
    return common


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="langgraph-durable",
        description=__doc__.splitlines()[0],
        parents=[_common(suppress=False)],
        epilog="Exit codes: 0 done, 1 the command failed, 2 the command line is wrong.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    common = [_common(suppress=True)]
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser(
        "setup", parents=common, help="create or migrate the tables (idempotent, safe at once)"
    )
    commands.add_parser("check", parents=common, help="check that the schema fits this version")
    commands.add_parser("schema", parents=common, help="print the canonical schema SQL")
    prune = commands.add_parser("prune", parents=common, help="prune threads")
    prune.add_argument("threads", nargs="+", metavar="THREAD_ID", help="the threads to prune")
    prune.add_argument(
        "--strategy",
        default="keep_latest",
        choices=["keep_latest", "delete"],
        help="keep_latest: keep each namespace's latest checkpoint (and what a DeltaChannel "
        "needs); delete: remove the threads (default: keep_latest)",
    )
    idle = commands.add_parser(
        "delete-idle", parents=common, help="delete threads idle for longer than an age"
    )
    idle.add_argument("--older-than", type=parse_age, required=True, metavar="AGE", help=AGE_HELP)
    effects = commands.add_parser(
        "effects", parents=common, help="list effects that are running, unknown or waiting"
    )
    effects.add_argument("--thread", metavar="THREAD_ID", help="only this thread's effects")
    effects.add_argument(
        "--limit", type=_positive, default=100, help="at most this many (default: 100)"
    )
    approvals = commands.add_parser(
        "approvals", parents=common, help="list threads waiting for an answer at interrupt()"
    )
    approvals.add_argument("--thread", metavar="THREAD_ID", help="only this thread")
    approvals.add_argument(
        "--limit", type=_positive, default=100, help="at most this many (default: 100)"
    )
    grant = commands.add_parser(
        "grant",
        parents=common,
        help="give an existing role what an application needs (rows only, no DDL); run as "
        "the owner after setup",
    )
    grant.add_argument("role", metavar="ROLE", help="the application role (must exist)")
    grant.add_argument(
        "--schema", default="public", help="the schema of the tables (default: public)"
    )
    grant.add_argument(
        "--print",
        action="store_true",
        dest="print_sql",
        help="print the GRANT statements instead of running them",
    )
    resolve = commands.add_parser(
        "resolve", parents=common, help="resolve an effect whose outcome is unknown"
    )
    resolve.add_argument("key", metavar="KEY", help="the effect's idempotency key")
    how = resolve.add_mutually_exclusive_group(required=True)
    how.add_argument("--allow-retry", action="store_true", help="the receiver never acted")
    how.add_argument("--completed", metavar="JSON", help="the receiver acted; its result, as JSON")
    how.add_argument("--failed", metavar="REASON", help="give up; replays raise this reason")
    return parser


def _timestamp(value: Any) -> Any:
    return value.isoformat() if isinstance(value, (datetime, date)) else value


def _effect_row(row: dict[str, Any]) -> dict[str, Any]:
    return {key: _timestamp(value) for key, value in row.items()}


def _has_checkpoints(saver: DurablePostgresSaver, thread_id: str) -> bool:
    return saver.get_tuple({"configurable": {"thread_id": thread_id}}) is not None


def _run(args: argparse.Namespace) -> Any:
    if args.command == "schema":
        return {"schema": SCHEMA}
    if args.command == "grant" and args.print_sql:
        return {"sql": app_role_sql(args.role, args.schema)}
    if not args.dsn:
        raise DurableError(f"No database given: pass --dsn or set {DSN_ENV}.")
    if args.command == "grant":
        grant_app_role(args.dsn, args.role, schema=args.schema)
        return {"granted": args.role, "schema": args.schema}
    with DurablePostgresSaver.from_conn_string(args.dsn) as saver:
        if args.command == "setup":
            return {"applied": saver.setup()}
        if args.command == "check":
            saver.check_schema()
            return {"schema": "ok"}
        if args.command == "prune":
            missing = [
                t
                for t in args.threads
                if saver.get_tuple({"configurable": {"thread_id": t}}) is None
            ]
            if missing:
                raise DurableError(
                    f"No checkpoints for thread(s) {', '.join(map(repr, missing))}; nothing was "
                    "pruned. Check the thread ids (and the database)."
                )
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
                        "checkpoint_id": w.checkpoint_id,
                        "interrupt_id": w.interrupt_id,
                        "is_approval": w.is_approval,
                        "waiting_since": _timestamp(w.waiting_since),
                        "age_seconds": None if w.age is None else w.age.total_seconds(),
                        "value": w.value,
                    }
                    for w in waiting
                ]
            }
        journal = journal_of(saver)
        assert isinstance(journal, EffectJournal)
        if args.command == "effects":
            rows = journal.open_effects(args.thread, args.limit)
            return {"effects": [_effect_row(r) for r in rows]}
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


def _print_text(command: str, result: dict[str, Any]) -> None:
    if command == "schema":
        print(result["schema"])
    elif "sql" in result:
        print(result["sql"])
    elif command == "approvals":
        for row in result["approvals"]:
            age = row["age_seconds"]
            print(
                f"{row['thread_id']}  waiting {timedelta(seconds=round(age or 0))}  "
                f"{json.dumps(row['value'], default=str)[:120]}"
            )
        if not result["approvals"]:
            print("no thread is waiting")
    elif command == "effects":
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


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        result = _run(args)
    except DurableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, default=str))
    else:
        _print_text(args.command, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
