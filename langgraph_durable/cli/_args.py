"""The CLI's command line: every command, option and help text, parsed by argparse.

`--dsn` and `--json` are accepted before and after the (sub)command. A group such as
`effects` or `approvals` run without an action lists, as it did before the group grew
actions.
"""

from __future__ import annotations

import argparse
import os
import re
from datetime import datetime, timedelta, timezone
from importlib import metadata
from typing import Any

from langgraph_durable.runs import MAX_SECONDS

__all__ = ["DSN_ENV", "MAX_COUNT", "WEB_SECRET_ENV", "parse_age", "parser"]

DSN_ENV = "LANGGRAPH_DURABLE_DSN"
WEB_SECRET_ENV = "LANGGRAPH_DURABLE_WEB_SECRET"
AGE_HELP = "an age: a whole number and a unit, s m h d or w (90m, 12h, 30d, 2w)"
STATUSES = (
    "pending",
    "running",
    "success",
    "error",
    "timeout",
    "interrupted",
    "deferred",
    "blocked",
    "cancelled",
)

_AGE = re.compile(r"^(?P<n>\d+)(?P<unit>[smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_age(text: str) -> timedelta:
    """Parse an age such as `90m`, `12h`, `30d` or `2w`."""
    match = _AGE.match(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"invalid age {text!r}: use {AGE_HELP}")
    try:
        age = timedelta(**{_UNITS[match.group("unit")]: int(match.group("n"))})
        datetime.now(timezone.utc) - age  # an age reaching back before the year 1 is refused
    except OverflowError:
        raise argparse.ArgumentTypeError(
            f"invalid age {text!r}: too large; use {AGE_HELP}"
        ) from None
    return age


def _positive_age(text: str) -> timedelta:
    """An age above zero (`delete-idle`: every thread is idle for at least 0s)."""
    age = parse_age(text)
    if not age:
        raise argparse.ArgumentTypeError(f"invalid age {text!r}: use one above zero, {AGE_HELP}")
    return age


MAX_COUNT = 2**31 - 1
"""The largest count (`--limit`, `--attempt`, `--max-attempts`): it fits every column and
LIMIT it goes to (Postgres' INTEGER; a LIMIT past a bigint was a driver traceback)."""


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_COUNT:
        raise argparse.ArgumentTypeError(
            f"invalid count {text!r}: use a whole number from 1 to {MAX_COUNT}"
        )
    return value


def _seconds(text: str, *, above_zero: bool = False) -> float:
    """Seconds to wait: a finite number >= 0 and at most the registry's longest duration,
    checked here, before a command that sends an answer and then waits has sent it."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= MAX_SECONDS or (above_zero and value == 0):
        raise argparse.ArgumentTypeError(
            f"invalid seconds {text!r}: use a number {'>' if above_zero else '>='} 0 and at "
            "most ten years"
        )
    return value


def _positive_seconds(text: str) -> float:
    return _seconds(text, above_zero=True)


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"invalid port {text!r}: use a number from 1 to 65535")
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


def _limit(parser: argparse.ArgumentParser, *, suppress: bool = False) -> None:
    parser.add_argument(
        "--limit",
        type=_positive,
        default=argparse.SUPPRESS if suppress else 100,
        help="at most this many (default: 100)",
    )


def _thread_filter(parser: argparse.ArgumentParser, *, suppress: bool = False) -> None:
    parser.add_argument(
        "--thread",
        default=argparse.SUPPRESS if suppress else None,
        metavar="THREAD_ID",
        help="only this thread",
    )


def _group(
    commands: Any, name: str, help_text: str, common: list[argparse.ArgumentParser]
) -> tuple[argparse.ArgumentParser, Any]:
    group = commands.add_parser(name, parents=common, help=help_text)
    actions = group.add_subparsers(dest="action", metavar="ACTION")
    return group, actions


def _listing_group(
    commands: Any, name: str, help_text: str, list_help: str, common: list[argparse.ArgumentParser]
) -> Any:
    """A group whose bare name lists (`effects`, `approvals`), as before it had actions:
    `--thread` and `--limit` on the group and on its `list` action."""
    group, actions = _group(commands, name, help_text, common)
    _thread_filter(group)
    _limit(group)
    listing = actions.add_parser("list", parents=common, help=list_help)
    _thread_filter(listing, suppress=True)
    _limit(listing, suppress=True)
    return actions


def parser() -> argparse.ArgumentParser:
    """The whole command line."""
    top = argparse.ArgumentParser(
        prog="langgraph-durable",
        description="LangGraph runs on Postgres that survive crashes: the operator's CLI.",
        parents=[_common(suppress=False)],
        epilog="Exit codes: 0 done, 1 the command failed, 2 the command line is wrong; "
        "`runs wait` and `approvals approve|reject` also 3 (the run ended without success, "
        "or waits at no question anyone can answer) "
        "and 4 (not finished when --timeout passed); `doctor` 1 when a check failed, 5 when "
        "it found only warnings; 141 (quietly) when the output pipe closed early (`| head`); "
        "130 when stopped with Ctrl-C.",
    )
    top.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    common = [_common(suppress=True)]
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    # -- the database --------------------------------------------------------------------
    commands.add_parser(
        "setup", parents=common, help="create or migrate the tables (idempotent, safe at once)"
    )
    commands.add_parser("check", parents=common, help="check that the schema fits this version")
    commands.add_parser("schema", parents=common, help="print the canonical schema SQL")
    commands.add_parser(
        "doctor",
        parents=common,
        help="check the connection, the schema, the role's privileges and the server "
        "settings durability needs; exit 1 on a failed check (fsync or synchronous_commit "
        "off, a missing privilege, ...), 5 on warnings only",
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
    _, db_actions = _group(commands, "db", "an embedded Postgres for development", common)
    for action, text in (
        ("start", "start it (it keeps running after this command) and print its DSN"),
        ("url", "print the DSN of the one running"),
        ("stop", "stop it (its data is kept)"),
    ):
        sub = db_actions.add_parser(action, parents=common, help=text)
        sub.add_argument(
            "--data-dir",
            help="its data directory (default: $LANGGRAPH_DURABLE_PGDATA, else a folder "
            "of yours under the system's temporary directory)",
        )
    db_actions.required = True

    # -- threads -------------------------------------------------------------------------
    prune = commands.add_parser("prune", parents=common, help="prune threads")
    prune.add_argument("threads", nargs="+", metavar="THREAD_ID", help="the threads to prune")
    prune.add_argument(
        "--strategy",
        default="keep_latest",
        choices=["keep_latest", "delete"],
        help="keep_latest: keep each namespace's latest checkpoint (with the parent an old "
        "checkpoint reads its pending sends from, and what a DeltaChannel needs), and a "
        "subgraph call's only while the root checkpoint it started from is kept; delete: "
        "remove the threads with their finished effects' journal rows, refused (nothing "
        "deleted) while one has an unfinished run, an effect whose outcome is open or a live "
        "lease (default: keep_latest)",
    )
    idle = commands.add_parser(
        "delete-idle",
        parents=common,
        help="delete threads idle for longer than an age, as prune --strategy delete does; "
        "skips threads waiting at an interrupt (an approval), with an unfinished run, an "
        "effect whose outcome is open or a live lease",
    )
    idle.add_argument(
        "--older-than", type=_positive_age, required=True, metavar="AGE", help=AGE_HELP
    )
    _, threads = _group(commands, "threads", "threads: list, show, history, diff", common)
    threads.required = True
    listing = threads.add_parser("list", parents=common, help="threads, most recently active first")
    listing.add_argument("--prefix", help="only threads whose id starts with this")
    _limit(listing)
    show = threads.add_parser("show", parents=common, help="a thread's latest state and runs")
    show.add_argument("thread", metavar="THREAD_ID", help="the thread")
    history = threads.add_parser(
        "history",
        parents=common,
        help="step by step: which nodes ran, what they wrote, effects, tokens",
    )
    history.add_argument("thread", metavar="THREAD_ID", help="the thread")
    _limit(history)
    diff = threads.add_parser(
        "diff", parents=common, help="how the state changed between two checkpoints"
    )
    diff.add_argument("thread", metavar="THREAD_ID", help="the thread")
    diff.add_argument(
        "--from", dest="before", metavar="CHECKPOINT_ID", help="default: the parent of --to"
    )
    diff.add_argument("--to", dest="after", metavar="CHECKPOINT_ID", help="default: the latest")

    # -- runs ------------------------------------------------------------------------------
    _, runs = _group(commands, "runs", "runs: list, show, wait, cancel, retry, resume", common)
    runs.required = True
    listing = runs.add_parser("list", parents=common, help="runs, newest first")
    listing.add_argument("--status", choices=STATUSES, help="only runs with this status")
    _thread_filter(listing)
    listing.add_argument("--graph", help="only runs of this graph")
    _limit(listing)
    for action, text in (
        ("show", "one run, with its input, output and last error"),
        ("cancel", "cancel a run that has not finished"),
        ("retry", "queue again a run that ended (error, timeout, cancelled) or is blocked"),
    ):
        sub = runs.add_parser(action, parents=common, help=text)
        sub.add_argument("run_id", metavar="RUN_ID", help="the run")
    wait = runs.add_parser(
        "wait", parents=common, help="wait until a run has finished or waits for a person"
    )
    wait.add_argument("run_id", metavar="RUN_ID", help="the run")
    wait.add_argument(
        "--timeout", type=_seconds, metavar="SECONDS", help="give up after this long (exit 4)"
    )
    resume = runs.add_parser(
        "resume", parents=common, help="answer an interrupted run: Command(resume=VALUE)"
    )
    resume.add_argument("run_id", metavar="RUN_ID", help="the run")
    resume.add_argument("--value", required=True, metavar="JSON", help="the resume value, JSON")
    workers = commands.add_parser(
        "workers", parents=common, help="workers that announced themselves, and what they take"
    )
    workers.add_argument(
        "--live-seconds",
        type=_positive_seconds,
        default=90.0,
        help="a worker heard from within this long counts as live (default: 90)",
    )
    stuck = commands.add_parser(
        "stuck", parents=common, help="runs flagged as stuck (no progress, or waiting too long)"
    )
    _limit(stuck)

    # -- effects -------------------------------------------------------------------------
    effect_actions = _listing_group(
        commands,
        "effects",
        "effects: list (the default), show, resolve",
        "effects that are running, unknown or waiting",
        common,
    )
    show = effect_actions.add_parser("show", parents=common, help="one effect, with its result")
    show.add_argument("key", metavar="KEY", help="the effect's idempotency key")
    for where in (
        effect_actions.add_parser(
            "resolve", parents=common, help="resolve an effect whose outcome is unknown"
        ),
        commands.add_parser(
            "resolve", parents=common, help="resolve an effect (same as `effects resolve`)"
        ),
    ):
        where.add_argument("key", metavar="KEY", help="the effect's idempotency key")
        how = where.add_mutually_exclusive_group(required=True)
        how.add_argument("--allow-retry", action="store_true", help="the receiver never acted")
        how.add_argument(
            "--completed", metavar="JSON", help="the receiver acted; its result, as JSON"
        )
        how.add_argument("--failed", metavar="REASON", help="give up; replays raise this reason")
        where.add_argument(
            "--attempt",
            type=_positive,
            metavar="N",
            help="the attempt you checked the receiver for (as `effects` lists it): refused "
            "if another attempt started since",
        )

    # -- the outbox -----------------------------------------------------------------------
    _, outbox = _group(commands, "outbox", "the transactional outbox", common)
    outbox.required = True
    relay = outbox.add_parser("relay", parents=common, help="publish events until stopped")
    relay.add_argument("url", metavar="URL", help="amqp://..., nats://... or https://...")
    relay.add_argument("--target", help="routing key or subject (default: the event type)")
    relay.add_argument(
        "--max-attempts",
        type=_positive,
        default=10,
        help="publishes before an event is dead (default: 10)",
    )
    outbox.add_parser("backlog", parents=common, help="pending and dead events, oldest age")
    dead = outbox.add_parser("dead", parents=common, help="list dead events, with their error")
    _limit(dead)
    replay = outbox.add_parser("replay", parents=common, help="dead events back to pending")
    replay.add_argument(
        "event_ids", nargs="*", metavar="EVENT_ID", help="the events (default: every dead one)"
    )
    retain = outbox.add_parser("prune", parents=common, help="delete published events")
    retain.add_argument("--older-than", type=parse_age, required=True, metavar="AGE", help=AGE_HELP)

    # -- the web console -------------------------------------------------------------------
    web = commands.add_parser(
        "web",
        parents=common,
        help="serve the web console (needs the web extra)",
        description="Serve the web console until interrupted (needs the web extra).",
        epilog=f"Its forms' CSRF tokens are signed with {WEB_SECRET_ENV}: set the same "
        "value in every process behind a load balancer. Without it each process makes a "
        "random one, and open pages stop working when it restarts.",
    )
    web.add_argument("--host", default="127.0.0.1", help="address (default: 127.0.0.1)")
    web.add_argument("--port", type=_port, default=8080, help="port (default: 8080)")
    web.add_argument(
        "--graph",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="a graph answers may resume: a StateGraph, or a function of the saver that "
        "returns a compiled graph or a GraphVersion (repeat for more); MODULE is found in "
        "the current directory too (searched last), whose code it imports and runs: do "
        "not use it in a directory you do not trust",
    )
    web.add_argument(
        "--user-header",
        metavar="HEADER",
        help="the request header your sign-in proxy puts the user name in, replacing any a "
        "client sends (a request with it twice is refused); without it nobody is signed in "
        "and nothing can be changed",
    )
    web.add_argument("--read-only", action="store_true", help="show, never change")

    # -- approvals -----------------------------------------------------------------------
    approval_actions = _listing_group(
        commands,
        "approvals",
        "approvals: list (the default), approve, reject",
        "threads waiting for an answer at interrupt()",
        common,
    )
    for action, text in (
        ("approve", "approve what a thread waits for"),
        ("reject", "reject what a thread waits for"),
    ):
        sub = approval_actions.add_parser(action, parents=common, help=text)
        sub.add_argument("thread", metavar="THREAD_ID", help="the waiting thread")
        sub.add_argument(
            "--approver", required=True, help="who decides (the graph's authorize hook checks)"
        )
        sub.add_argument("--comment", help="words for the record")
        sub.add_argument(
            "--interrupt",
            metavar="INTERRUPT_ID",
            help="which question, when the thread waits on several (`approvals list` shows "
            "their ids; default: the first listed)",
        )
        if action == "approve":
            sub.add_argument(
                "--amend", metavar="JSON", help="fields the approver changed, a JSON object"
            )
        sub.add_argument(
            "--graph",
            metavar="MODULE:ATTRIBUTE",
            help="run the graph here: a compiled graph, or a function that returns one (or "
            "a GraphVersion) given the CLI's saver, MODULE found in the current directory "
            "too (searched last; its code is imported and run: do not use it in a "
            "directory you do not trust); without it the answer is queued for the "
            "thread's interrupted run and a worker goes on with it",
        )
        sub.add_argument(
            "--timeout",
            type=_seconds,
            default=60.0,
            metavar="SECONDS",
            help="without --graph: how long to wait for the worker to judge the answer "
            "(default: 60; exit 4 when it has not)",
        )
    return top
