# WARNING: generated from _aconnection.py by tools/async_to_sync.py. DO NOT EDIT.
# Edit the async source and run `python tools/async_to_sync.py`.
"""Connections for the async saver: a checked pool from a DSN, or what the caller gave us.

A pool that checks each connection before lending it turns a server restart or an idle
disconnect into one reconnect instead of "the connection is closed" forever (upstream's
`from_conn_string` holds one bare connection). A single connection given by the caller is
still accepted; calls on it are serialised because one connection runs one transaction.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import Connection
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from langgraph_durable.errors import DatabaseUnreachableError, translate_driver_error

__all__ = ["Conn", "ConnectionSource", "describe_dsn", "open_pool"]

Conn = Connection[DictRow] | ConnectionPool[Connection[DictRow]]

CONNECTION_KWARGS: dict[str, Any] = {
    "autocommit": True,
    "prepare_threshold": None,
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
    """Open a pool and wait for its first connection, failing fast with the host named."""
    pool: ConnectionPool[Connection[DictRow]] = ConnectionPool(
        dsn,
        min_size=1,
        max_size=max_size,
        kwargs={**CONNECTION_KWARGS, "connect_timeout": max(1, round(connect_timeout))},
        check=ConnectionPool.check_connection,
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
    """Lends connections, translating driver errors into named errors at one boundary."""

    def __init__(self, conn: Conn) -> None:
        if not isinstance(conn, (Connection, ConnectionPool)):
            raise TypeError(
                f"conn must be a psycopg Connection or ConnectionPool, got {type(conn).__name__}."
            )
        self.conn = conn
        # Only a single shared connection needs a lock; a pool hands out one per caller.
        self._lock = threading.Lock() if isinstance(conn, Connection) else None

    @contextmanager
    def connection(self) -> Iterator[Connection[DictRow]]:
        try:
            if isinstance(self.conn, ConnectionPool):
                with self.conn.connection() as conn:
                    yield conn
            else:
                assert self._lock is not None
                with self._lock:
                    yield self.conn
        except psycopg.Error as exc:
            named = translate_driver_error(exc)
            if named is None:
                raise
            raise named from exc
