"""What both connection flavours share: DSN checks, connection settings, disconnects.

Pure: nothing here opens a connection. A DSN is checked before any connection is tried,
so a malformed one fails with a named error, and every description of a DSN (in errors,
logs, CLI output) is made here, never showing a password.
"""

from __future__ import annotations

import select
import time
import weakref
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import ConnStatus
from psycopg.rows import dict_row
from psycopg_pool import PoolClosed, PoolTimeout, TooManyRequests

from langgraph_durable.errors import (
    ConfigurationError,
    ConnectionLostError,
    DatabaseUnreachableError,
    DurableError,
    PoolBusyError,
    PoolClosedError,
    PoolTimeoutError,
)

__all__ = [
    "CHECK_IDLE_AFTER",
    "CONNECTION_KWARGS",
    "IDLE_SINCE",
    "RECONNECT_WINDOW",
    "SESSION_SETTINGS",
    "Timeout",
    "check_dsn",
    "check_row_factory",
    "describe_dsn",
    "from_our_connections",
    "give_back_rows",
    "is_disconnect",
    "lend_dict_rows",
    "mark_from_our_connections",
    "pool_busy_message",
    "pool_closed_message",
    "pool_timeout_message",
    "refused_by_pool",
    "single_connection_lost",
    "timeout_settings",
]

Timeout = float | timedelta | None
"""A `lock_timeout` / `statement_timeout` option: seconds, a timedelta, or None (leave the
session's own setting, from the DSN, the role or the database, as it is)."""

CONNECTION_KWARGS: dict[str, Any] = {
    "autocommit": True,
    # Prepared at first use: planning the tuple query costs more than running it.
    "prepare_threshold": 0,
    "row_factory": dict_row,
}


RECONNECT_WINDOW = 4.0
"""Seconds a pool opened here keeps one reconnection attempt going (pauses 1, 2, then up
to this) before it starts a fresh one: after an outage of any length, a live server is
found within about two seconds."""


def describe_dsn(dsn: str) -> str:
    """host:port/dbname of a DSN, for messages: never the password, never the raw text."""
    try:
        info = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<a DSN that cannot be parsed>"
    host = info.get("host") or "localhost (socket)"
    port = info.get("port") or "5432"
    return f"{host}:{port}/{info.get('dbname') or info.get('user') or ''}"


def cannot_connect(dsn: str, exc: psycopg.OperationalError) -> DatabaseUnreachableError:
    """The named error for a connection the server or the network refused: the host and
    the driver's first line, never the DSN's text (it may hold a password)."""
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return DatabaseUnreachableError(
        f"Could not connect to Postgres at {describe_dsn(dsn)}: {reason}. Check that the "
        "server runs and that the DSN (host, port, user, database) is right."
    )


def check_dsn(dsn: object) -> str:
    """The DSN, if libpq can parse it and its ports are valid; else `ConfigurationError`.

    An empty DSN is valid, as for libpq and upstream: the `PG*` environment variables
    and libpq's defaults fill it in. psycopg's own parse errors quote the DSN, password
    included: they are replaced here by a message that names the problem only.
    """
    if not isinstance(dsn, str):
        raise ConfigurationError(
            f"The database DSN must be a string, got {type(dsn).__name__}: pass a libpq DSN "
            "such as 'postgresql://user@host:5432/dbname' (or set LANGGRAPH_DURABLE_DSN)."
        )
    try:
        info = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        raise ConfigurationError(
            "The database DSN cannot be parsed (the text is not repeated here, as it may "
            "hold a password). Use 'postgresql://user:password@host:5432/dbname' or "
            "'host=... port=... dbname=... user=...'."
        ) from None
    for port in str(info.get("port") or "5432").split(","):
        port = port.strip() or "5432"  # libpq: an empty entry means the default
        if not (port.isdigit() and 1 <= int(port) <= 65535):
            raise ConfigurationError(
                f"The database DSN names port {port!r}; a port is a number from 1 to 65535. "
                f"Fix the DSN ({describe_dsn(dsn)})."
            )
    return dsn


def single_connection_lost(conn: Any) -> str:
    """The message for a call on a saver whose one connection has died."""
    info = conn.info
    where = f"{info.host}:{info.port}/{info.dbname}"
    return (
        f"The connection to Postgres at {where} that this saver was made with is closed (a "
        "server restart, a network cut or an idle timeout). A single connection cannot be "
        "reopened: make the saver with from_conn_string() or on a psycopg ConnectionPool to "
        "ride out restarts, or make a new saver on a new connection."
    )


EOF_WAIT = 0.05
"""Seconds an idle connection with data waiting is watched for the end of file."""

CHECK_IDLE_AFTER = 0.05
"""Seconds a pooled connection must have been idle before it is checked when lent
(`ended_by_server`). Under load every connection is back in the pool within milliseconds
and is lent unchecked: the check's `select()` on every lend cost a sync step 2.5-4%
(paired A/Bs on the 10-node graph). A restart takes longer than this (0.2 s for the
fastest `pg_ctl restart -m fast` seen), so what is lent dead is a session ended within
50 ms of its connection's last call (a `pg_terminate_backend`, a cut connection): that
call fails by name (`ConnectionLostError`; idempotent calls retry once) and the pool
checks the others."""


class IdleSince:
    """When each connection was last given back into its pool (`time.monotonic()`), for
    every source and pool in the process; weak, so a closed connection leaves it. Not
    written for a connection our pools keep (`warm.py`): its time here is then older than
    its last use, so it is checked when lent from the pool later, never less often."""

    def __init__(self) -> None:
        self._since: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()

    def given_back(self, conn: Any) -> None:
        self._since[conn] = time.monotonic()

    def needs_check(self, conn: Any) -> bool:
        """Whether `conn` was given back long enough ago (or never by us) to be checked."""
        since = self._since.get(conn)
        return since is None or time.monotonic() - since >= CHECK_IDLE_AFTER


IDLE_SINCE = IdleSince()


def ended_by_server(pgconn: Any) -> bool:
    """Whether the server has ended an idle session, seen without a round trip.

    A server that restarts, a `pg_terminate_backend` or a cut connection leaves an idle
    session's socket readable (the server's last message, then end of file). Sources ask
    this when they lend a connection idle for `CHECK_IDLE_AFTER` (50 ms) or longer: one
    `select()`, so a pool whose idle connections all died lends live ones instead of
    failing one call per dead connection.
    Data on an idle connection is rare (a late notification) and waits up to `EOF_WAIT`
    for the end of file that follows a server's last message. A silent network partition
    is not seen here; the call then fails by name (`ConnectionLostError`).
    """
    for wait in (0.0, EOF_WAIT, EOF_WAIT):  # the server's last message, then end of file
        try:
            readable, _, _ = select.select([pgconn.socket], [], [], wait)
        except (OSError, ValueError, psycopg.OperationalError):
            return True
        if not readable:
            return False
        try:
            pgconn.consume_input()
        except psycopg.OperationalError:
            return True
        if pgconn.status != ConnStatus.OK:
            return True
    return False


def connection_lost(exc: psycopg.Error, conn: Any, doing: str) -> ConnectionLostError:
    """The named error for a connection that died during a call (`is_disconnect`)."""
    said = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(conn, (psycopg.Connection, psycopg.AsyncConnection)):
        advice = single_connection_lost(conn)
    else:
        advice = (
            f"The connection to Postgres at {describe_dsn(conn.conninfo)} died while "
            f"{doing or 'running a statement'}: the server restarted or ended the session, "
            "or the network dropped. A write in flight may or may not have committed. Call "
            "again: the pool replaces its dead connections (a graph resumes with "
            "invoke(None, config), a worker retries on its own)."
        )
    return ConnectionLostError(f"{advice} (driver said: {said})")


def timeout_settings(*, lock_timeout: Timeout, statement_timeout: Timeout) -> dict[str, int]:
    """The session settings, in whole milliseconds, for the timeouts that were given.

    Postgres reads 0 as "no limit", so a positive value rounds up to at least 1 ms; zero,
    negative or non-numeric values are refused with `ConfigurationError`.
    """
    settings: dict[str, int] = {}
    for name, value in (("lock_timeout", lock_timeout), ("statement_timeout", statement_timeout)):
        if value is None:
            continue
        seconds = value.total_seconds() if isinstance(value, timedelta) else value
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
            raise ConfigurationError(
                f"{name}={value!r}: pass a positive number of seconds or a timedelta "
                "(or None to keep the session's own setting)."
            )
        if seconds > 2_147_483:  # Postgres stores it as int milliseconds
            raise ConfigurationError(f"{name}={value!r}: at most 2147483 seconds (24 days).")
        settings[name] = max(1, round(seconds * 1000))
    return settings


class _SessionSettings:
    """The timeouts this library last set on each connection's session ({}: none, the
    session's own; None: unknown), so that a connection is configured once, not on every
    call."""

    def __init__(self) -> None:
        self._applied: weakref.WeakKeyDictionary[Any, dict[str, int] | None] = (
            weakref.WeakKeyDictionary()
        )

    def needs(self, conn: Any, wanted: dict[str, int]) -> bool:
        """Whether `conn`'s session must be changed to hold exactly `wanted` (a connection
        never configured holds its own, {})."""
        return self._applied.get(conn, {}) != wanted

    def params(self, wanted: dict[str, int]) -> dict[str, str | None]:
        """The parameters of `set_session_timeouts`: None puts the session's default back."""
        return {name: _text(wanted.get(name)) for name in ("lock_timeout", "statement_timeout")}

    def record(self, conn: Any, wanted: dict[str, int]) -> None:
        self._applied[conn] = dict(wanted)

    def forget(self, conn: Any) -> None:
        """The session's timeouts are unknown (a change under way, which may fail or be
        cancelled after the server made it): the next call sets them, whatever it wants."""
        self._applied[conn] = None


def _text(ms: int | None) -> str | None:
    return None if ms is None else str(ms)


SESSION_SETTINGS = _SessionSettings()


def pool_timeout_message(
    conninfo: object, waited: float, stats: Mapping[str, int], max_size: int
) -> str:
    """The message for a pool that lent no connection within its timeout: the server is
    unreachable, or every connection is busy (from the pool's own counts).

    `conninfo` is the pool's: a DSN, or a function that makes one (then not named).
    """
    where = describe_dsn(conninfo) if isinstance(conninfo, str) else "the pool's server"
    size, idle = stats.get("pool_size", 0), stats.get("pool_available", 0)
    if size >= max_size and idle == 0:
        return (
            f"No connection to Postgres at {where} came free within {waited:g} s: all "
            f"{max_size} connections of the pool were busy. Nothing of this call was "
            "written. Give the pool more connections (max_connections= on from_conn_string, "
            "or max_size on your pool), run fewer calls at once, or look for calls that hold "
            "a connection long (a lock wait: see lock_timeout=)."
        )
    return (
        f"Could not get a connection to Postgres at {where} within {waited:g} s: the "
        "server cannot be reached (down, restarting, or the network), so the pool could not "
        "open one. Nothing of this call was written. Check that the server runs; a graph "
        "resumes from its last committed checkpoint with invoke(None, config) once it is back."
    )


def pool_busy_message(conninfo: object, max_waiting: int) -> str:
    """The message for a pool whose queue of waiting borrowers is full (`max_waiting`)."""
    where = describe_dsn(conninfo) if isinstance(conninfo, str) else "the pool's server"
    return (
        f"No connection to Postgres at {where} was asked for: {max_waiting} calls already "
        "wait for one, the pool's max_waiting. Nothing of this call was written. Give the "
        "pool more connections (max_size) or a larger max_waiting, or run fewer calls at "
        "once."
    )


def pool_closed_message(conninfo: object) -> str:
    """The message for a call on a pool that is closed (or was never opened)."""
    where = describe_dsn(conninfo) if isinstance(conninfo, str) else "the pool's server"
    return (
        f"The connection pool for Postgres at {where} is closed. Nothing of this call was "
        "written. Open the pool before the first call (pool.open(), or use it as a context "
        "manager) and close it only after the last one."
    )


def refused_by_pool(pool: Any, exc: psycopg.OperationalError) -> DurableError:
    """The named error for psycopg_pool's refusal to lend a connection of `pool` (or the
    gate's, in its name): `TooManyRequests`, `PoolClosed` or `PoolTimeout`."""
    if isinstance(exc, TooManyRequests):
        return PoolBusyError(pool_busy_message(pool.conninfo, pool.max_waiting))
    if isinstance(exc, PoolClosed):
        return PoolClosedError(pool_closed_message(pool.conninfo))
    return PoolTimeoutError(
        pool_timeout_message(pool.conninfo, pool.timeout, pool.get_stats(), pool.max_size)
    )


def check_row_factory(conn: Any) -> None:
    """A single connection must return rows as dicts, as upstream's README asks.

    A pool's connections need not (`lend_dict_rows`): a pool lends each one to one call.
    A single connection is shared with the application, whose own queries on it while a
    call of ours runs would get dict rows if ours set its factory."""
    if conn.row_factory is not dict_row:
        raise ConfigurationError(
            "A single connection must return rows as dicts: connect with "
            "row_factory=dict_row (and autocommit=True), as for PostgresSaver, or pass a "
            "pool, whose connections may use any row factory."
        )


def lend_dict_rows(conn: Any) -> Any:
    """Make a pool's connection return rows as dicts for one call; the row factory to
    give back after it (`give_back_rows`), or None when it already did.

    Upstream's savers ask each cursor for dict rows, so a pool made without
    `row_factory=dict_row` (`ConnectionPool(dsn)`, as many applications make theirs)
    works with them; ours read rows by name in many places, so the factory of the
    connection lent to the call is set for it and its own put back."""
    own = conn.row_factory
    if own is dict_row:
        return None
    conn.row_factory = dict_row
    return own


def give_back_rows(conn: Any, own: Any) -> None:
    """Put back the row factory `lend_dict_rows` replaced."""
    if own is not None:
        conn.row_factory = own


def check_autocommit(conn: Any) -> None:
    """A single connection must commit each statement on its own (a pool's `connection()`
    commits when a call gives it back, so a pool may do without autocommit)."""
    if not conn.autocommit:
        raise ConfigurationError(
            "The connection must be in autocommit mode: every call stores its rows in a "
            "transaction of its own, and on a connection without autocommit nothing would be "
            "committed (an effect's journal row included, which must be committed before the "
            "effect runs). Connect with autocommit=True (and row_factory=dict_row), as for "
            "PostgresSaver, or pass a pool."
        )


def is_disconnect(exc: BaseException) -> bool:
    """Whether an error means the connection died (server restart, idle kill, network)."""
    if isinstance(exc, DurableError):
        # Ours are named already (and also psycopg's classes): only a lost connection is one.
        return isinstance(exc, ConnectionLostError)
    if not isinstance(exc, psycopg.OperationalError):
        return False
    if isinstance(exc, (PoolTimeout, PoolClosed, TooManyRequests)):
        return False  # the pool's own refusals: no connection was lent, none died
    state = exc.sqlstate
    # No SQLSTATE: the socket failed. 08xxx: connection exceptions. 57P0x: the server
    # terminated the session (shutdown, restart, pg_terminate_backend).
    return state is None or state.startswith(("08", "57P"))


_OURS: weakref.WeakSet[BaseException] = weakref.WeakSet()
"""Driver errors raised while one of our connection sources had a connection lent out."""


def mark_from_our_connections(exc: BaseException) -> None:
    """Record that `exc` came from a connection langgraph-durable lent (`connection()`).

    A worker refunds a run's attempt when the database went away under it: the saver's,
    the journal's or the registry's database. A node's own database connection failing is
    the run's error like any other, and must count, or a run whose node keeps losing its
    own database would be retried forever.
    """
    _OURS.add(exc)


def from_our_connections(exc: BaseException) -> bool:
    """Whether `exc` was raised on a connection langgraph-durable lent."""
    try:
        return exc in _OURS
    except TypeError:  # an exception type that takes no weak references
        return False
