# WARNING: generated from _asource.py by tools/async_to_sync.py. DO NOT EDIT.
# Edit the async source and run `python tools/async_to_sync.py`.
"""Connections: a checked pool from a DSN, or what the caller gave us, lent one call at a time.

Generated from the async source; edit that file, not this one.

A server restart or an idle disconnect must cost one retry, not the process (upstream's
`from_conn_string` holds one bare connection: "the connection is closed" forever after).
Checking every connection on checkout would cost a round trip per call, so instead an
operation that fails because its connection died is retried once on a fresh connection
(`retry_on_disconnect`); the pool drops the dead ones first. Only idempotent operations are
wrapped. A single connection given by the caller is still accepted; calls on it are
serialised because one connection runs one transaction.

The saver, the effect journal and the approvals queries all borrow connections here; each
registers its source (`registry.py`), so nothing reads another object's private state.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

import psycopg
from psycopg import Connection, Pipeline
from psycopg.rows import DictRow
from psycopg_pool import ConnectionPool, PoolTimeout

from langgraph_durable._db.connections import (
    CONNECTION_KWARGS,
    check_dsn,
    check_row_factory,
    describe_dsn,
    is_disconnect,
    single_connection_lost,
)
from langgraph_durable._db.registry import source_of
from langgraph_durable.errors import (
    ConfigurationError,
    DatabaseUnreachableError,
    translate_driver_error,
)

__all__ = [
    "Conn",
    "ConnectionSource",
    "open_pool",
    "retry_on_disconnect",
]

logger = logging.getLogger("langgraph_durable.connection")

P = ParamSpec("P")
T = TypeVar("T")

Conn = Connection[DictRow] | ConnectionPool[Connection[DictRow]]


def open_pool(
    dsn: str, *, max_size: int, connect_timeout: float
) -> ConnectionPool[Connection[DictRow]]:
    """Open a pool and wait for its first connection, failing fast with the host named.

    The DSN is checked first (a malformed one is named without being repeated, as it may
    hold a password). One direct connection is tried next: a refused or misnamed server
    fails at once with the driver's reason, where a pool would keep retrying quietly until
    its timeout.
    """
    check_dsn(dsn)
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
            check_row_factory(conn)
        # Only a single shared connection needs the lock; a pool hands out one per caller.
        self.lock = threading.Lock()

    @contextmanager
    def connection(self) -> Iterator[Connection[DictRow]]:
        """A connection for one call: the caller's own, or one from the pool."""
        try:
            if isinstance(self.conn, ConnectionPool):
                with self.conn.connection() as conn:
                    check_row_factory(conn)
                    yield conn
            else:
                with self.lock:
                    if self.conn.closed or self.conn.broken:
                        raise DatabaseUnreachableError(single_connection_lost(self.conn))
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

    @property
    def pooled(self) -> bool:
        """Whether connections come from a pool (else: the caller's one connection)."""
        return isinstance(self.conn, ConnectionPool)

    def drop_dead_connections(self) -> None:
        """After a lost connection: a restart kills every idle one, so check them all."""
        if isinstance(self.conn, ConnectionPool):
            self.conn.check()


def retry_on_disconnect(
    fn: Callable[P, T],
) -> Callable[P, T]:
    """Run an idempotent method again, once, if its connection died under it.

    The method's object must have registered its connection source (`register_source`).
    """

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        except psycopg.OperationalError as exc:
            if not is_disconnect(exc):
                raise
            logger.warning("connection lost (%s); retrying %s once", exc, fn.__name__)
            source = source_of(args[0]) if args else None
            if source is not None:
                source.drop_dead_connections()
            return fn(*args, **kwargs)

    return wrapper
