# WARNING: generated from _aconnection.py by tools/async_to_sync.py. DO NOT EDIT.
# Edit the async source and run `python tools/async_to_sync.py`.
"""Connections for the async saver: a pool from a DSN, or what the caller gave us.

A server restart or an idle disconnect must cost one retry, not the process (upstream's
`from_conn_string` holds one bare connection: "the connection is closed" forever after).
Checking every connection on checkout would cost a round trip per call, so instead an
operation that fails because its connection died is retried once on a fresh connection
(`retry_on_disconnect`); the pool drops the dead one. Only idempotent operations are
wrapped. A single connection given by the caller is still accepted; calls on it are
serialised because one connection runs one transaction.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

import psycopg
from psycopg import Connection, Pipeline
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from langgraph_durable.errors import (
    ConfigurationError,
    DatabaseUnreachableError,
    translate_driver_error,
)

__all__ = [
    "Conn",
    "ConnectionSource",
    "describe_dsn",
    "is_disconnect",
    "open_pool",
    "retry_on_disconnect",
]

logger = logging.getLogger("langgraph_durable.connection")

P = ParamSpec("P")
T = TypeVar("T")

Conn = Connection[DictRow] | ConnectionPool[Connection[DictRow]]

CONNECTION_KWARGS: dict[str, Any] = {
    "autocommit": True,
    # Prepared at first use: planning the tuple query costs more than running it.
    "prepare_threshold": 0,
    "row_factory": dict_row,
}


def describe_dsn(dsn: str) -> str:
    """host:port/dbname of a DSN, for error messages (never the password)."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<unparseable DSN>"
    host = info.get("host") or "localhost (socket)"
    port = info.get("port") or "5432"
    return f"{host}:{port}/{info.get('dbname') or info.get('user') or ''}"


def open_pool(
    dsn: str, *, max_size: int, connect_timeout: float
) -> ConnectionPool[Connection[DictRow]]:
    """Open a pool and wait for its first connection, failing fast with the host named.

    One direct connection is tried first: a refused or misnamed server fails at once with
    the driver's reason, where a pool would keep retrying quietly until its timeout.
    """
    timeout = max(1, round(connect_timeout))
    try:
        probe = Connection.connect(dsn, connect_timeout=timeout)
    except psycopg.OperationalError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DatabaseUnreachableError(
            f"Could not connect to Postgres at {describe_dsn(dsn)}: {reason}. Check that the "
            "server runs and that the DSN (host, port, user, database) is right."
        ) from exc
    probe.close()
    pool: ConnectionPool[Connection[DictRow]] = ConnectionPool(
        dsn,
        min_size=1,
        max_size=max_size,
        kwargs={**CONNECTION_KWARGS, "connect_timeout": timeout},
        open=False,
        connection_class=Connection[DictRow],
    )
    try:
        pool.open(wait=True, timeout=connect_timeout)
    except PoolTimeout as exc:
        pool.close()
        raise DatabaseUnreachableError(
            f"Could not connect to Postgres at {describe_dsn(dsn)} within {connect_timeout}s. "
            "Check that the server runs and that the DSN (host, port, user, database) is right."
        ) from exc
    return pool


class ConnectionSource:
    """Lends connections, translating driver errors into named errors at one boundary.

    Args:
        conn: A pool, or one connection (calls on it are serialised by `lock`).
        pipe: A pipeline the caller opened on that one connection; it is synced when each
            call gives the connection back, so errors surface at the call that caused them.
    """

    def __init__(self, conn: Conn, pipe: Pipeline | None = None) -> None:
        if not isinstance(conn, (Connection, ConnectionPool)):
            raise ConfigurationError(
                f"conn must be a psycopg Connection or ConnectionPool, got {type(conn).__name__}."
            )
        if pipe is not None and not isinstance(conn, Connection):
            raise ConfigurationError(
                "A pipeline belongs to one connection: pass pipe= only with a single "
                "connection, not with a pool."
            )
        self.conn = conn
        self.pipe = pipe
        if isinstance(conn, Connection):
            _check_row_factory(conn)
        # Only a single shared connection needs the lock; a pool hands out one per caller.
        self.lock = threading.Lock()

    @contextmanager
    def connection(self) -> Iterator[Connection[DictRow]]:
        try:
            if isinstance(self.conn, ConnectionPool):
                with self.conn.connection() as conn:
                    _check_row_factory(conn)
                    yield conn
            else:
                with self.lock:
                    try:
                        yield self.conn
                    finally:
                        if self.pipe is not None:
                            self.pipe.sync()
        except psycopg.Error as exc:
            named = translate_driver_error(exc)
            if named is None:
                raise
            raise named from exc


def _check_row_factory(conn: Connection[Any]) -> None:
    if conn.row_factory is not dict_row:
        raise ConfigurationError(
            "The connection (or the pool's connections) must return rows as dicts: create "
            "it with row_factory=dict_row (and autocommit=True), as for PostgresSaver."
        )


def is_disconnect(exc: BaseException) -> bool:
    """Whether an error means the connection died (server restart, idle kill, network)."""
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    # No SQLSTATE: the socket failed. 08xxx: connection exceptions. 57P0x: the server
    # terminated the session (shutdown, restart, pg_terminate_backend).
    return state is None or state.startswith(("08", "57P"))


def retry_on_disconnect(
    fn: Callable[P, T],
) -> Callable[P, T]:
    """Run an idempotent operation again, once, if its connection died under it."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        except psycopg.OperationalError as exc:
            if not is_disconnect(exc):
                raise
            logger.warning("connection lost (%s); retrying %s once", exc, fn.__name__)
            # A restart kills every idle connection in the pool, not just this one: drop
            # them all first, or the retry draws the next dead one and fails the same way.
            source = getattr(args[0], "_source", None) if args else None
            if source is not None and isinstance(source.conn, ConnectionPool):
                source.conn.check()
            return fn(*args, **kwargs)

    return wrapper
