"""Connections: a checked pool from a DSN, or what the caller gave us, lent one call at a time.

Async source: the sync twin is generated from this file.

A server restart or an idle disconnect must cost one retry, not the process (upstream's
`from_conn_string` holds one bare connection: "the connection is closed" forever after).
Checking every connection on checkout would cost a round trip per call, so instead an
operation that fails because its connection died is retried once on a fresh connection
(`aretry_on_disconnect`); the pool drops the dead ones first. Only idempotent operations are
wrapped. A single connection given by the caller is still accepted; calls on it are
serialised because one connection runs one transaction.

A pool that lends no connection in time (the server is down, or every connection is busy)
raises `PoolTimeoutError` naming the server, at once: it is not retried, since the pool
already waited its whole timeout. A source given `lock_timeout` / `statement_timeout` sets
them on each connection's session when it first lends it (one statement per connection,
not per call); lock and statement timeouts come back as `LockTimeoutError` and
`StatementTimeoutError`, saying what was waiting.

The saver, the effect journal and the approvals queries all borrow connections here; each
registers its source (`registry.py`), so nothing reads another object's private state.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, ParamSpec, TypeVar, cast

import psycopg
from psycopg import AsyncConnection, AsyncPipeline
from psycopg.rows import DictRow
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout, TooManyRequests

from langgraph_durable._db.connections import (
    CONNECTION_KWARGS,
    IDLE_SINCE,
    RECONNECT_WINDOW,
    SESSION_SETTINGS,
    Timeout,
    cannot_connect,
    check_autocommit,
    check_dsn,
    check_row_factory,
    connection_lost,
    describe_dsn,
    ended_by_server,
    give_back_rows,
    is_disconnect,
    lend_dict_rows,
    mark_from_our_connections,
    refused_by_pool,
    single_connection_lost,
    timeout_settings,
)
from langgraph_durable._db.gate import AsyncPoolGate
from langgraph_durable._db.registry import source_of
from langgraph_durable._db.warm import WarmSlot
from langgraph_durable._sql import QUERIES
from langgraph_durable.errors import (
    ConfigurationError,
    ConnectionLostError,
    DatabaseUnreachableError,
    DurableError,
    translate_driver_error,
)

__all__ = [
    "AsyncConn",
    "AsyncConnectionSource",
    "AsyncWarmPool",
    "aopen_pool",
    "aretry_on_disconnect",
]

logger = logging.getLogger("langgraph_durable.connection")

P = ParamSpec("P")
T = TypeVar("T")

AsyncConn = AsyncConnection[DictRow] | AsyncConnectionPool[AsyncConnection[DictRow]]


async def aopen_pool(
    dsn: str, *, max_size: int, connect_timeout: float, pool_timeout: float = 30.0
) -> AsyncConnectionPool[AsyncConnection[DictRow]]:
    """Open a pool and wait for its first connection, failing fast with the host named.

    The DSN is checked first (a malformed one is named without being repeated, as it may
    hold a password). One direct connection is tried next: a refused or misnamed server
    fails at once with the driver's reason, where a pool would keep retrying quietly until
    its timeout.

    A call waits up to `pool_timeout` seconds for a connection. While the server is down
    the pool tries to reconnect with a growing pause (1, 2, 4... s); left alone, that pause
    reaches 16 s and more after half a minute, so calls kept failing long after the server
    was back. Here the pool gives up after `RECONNECT_WINDOW` seconds and starts again at
    once (`_areconnect_again`): it tries at least every two seconds for as long as the
    outage lasts.
    """
    check_dsn(dsn)
    if not pool_timeout > 0:
        raise ConfigurationError(
            f"pool_timeout={pool_timeout!r}: pass a positive number of seconds."
        )
    timeout = max(1, round(connect_timeout))
    try:
        probe = await AsyncConnection.connect(dsn, connect_timeout=timeout)
    except psycopg.OperationalError as exc:
        raise cannot_connect(dsn, exc) from exc
    await probe.close()
    pool = AsyncWarmPool(
        dsn,
        min_size=1,
        max_size=max_size,
        kwargs={**CONNECTION_KWARGS, "connect_timeout": timeout},
        open=False,
        connection_class=AsyncConnection[DictRow],
        timeout=pool_timeout,
        reconnect_timeout=RECONNECT_WINDOW,
        reconnect_failed=_areconnect_again,
    )
    try:
        await pool.open(wait=True, timeout=connect_timeout)
    except PoolTimeout as exc:
        await pool.close()
        raise DatabaseUnreachableError(
            f"Could not connect to Postgres at {describe_dsn(dsn)} within {connect_timeout}s. "
            "Check that the server runs and that the DSN (host, port, user, database) is right."
        ) from exc
    return pool


class AsyncWarmPool(AsyncConnectionPool[AsyncConnection[DictRow]]):
    """The pool `aopen_pool` opens: it keeps the last connection given back and lends it
    to the next borrower without its own bookkeeping, unless someone waits for it
    (`warm.py`). A connection kept at `close()`, `drain()` or `check()` goes back into
    the pool first."""

    def __init__(self, conninfo: str, **kwargs: Any) -> None:
        # Made first: the pool may start making connections in `__init__` (`open`).
        self.warm = WarmSlot(kwargs.get("max_lifetime", 3600.0))
        self._configure_made = kwargs.pop("configure", None)
        super().__init__(conninfo, configure=self._made, **kwargs)

    async def _made(self, conn: AsyncConnection[DictRow]) -> None:
        if self._configure_made is not None:
            await self._configure_made(conn)
        self.warm.born(conn)

    async def getconn(self, timeout: float | None = None) -> AsyncConnection[DictRow]:
        """The kept connection, else one from the pool (counted while it waits)."""
        kept = self.warm.take()
        if kept is not None:
            return cast(AsyncConnection[DictRow], kept)
        try:
            return await super().getconn(timeout)
        finally:
            self.warm.served()

    async def putconn(self, conn: AsyncConnection[DictRow]) -> None:
        """Keep `conn` for the next borrower, or give it back to the pool."""
        await self.give_back(conn, None)

    async def give_back(
        self, conn: AsyncConnection[DictRow], settings: dict[str, int] | None
    ) -> None:
        """`putconn`, for a borrower that knows the timeouts `settings` its session has (a
        source): kept with them, or given back to the pool (noting when, for the check of
        a connection lent after it was idle for `CHECK_IDLE_AFTER`)."""
        if conn is self.warm.kept:
            raise ValueError("this connection was already given back to its pool")
        if not self.warm.keep(conn, settings):
            IDLE_SINCE.given_back(conn)
            await super().putconn(conn)

    async def close(self, timeout: float = 5.0) -> None:
        try:
            kept = self.warm.close()
            if kept is not None:
                await super().putconn(kept)
        finally:
            await super().close(timeout)

    async def drain(self) -> None:
        self.warm.drained()
        await self._give_back_kept()
        await super().drain()

    async def check(self) -> None:
        await self._give_back_kept()
        await super().check()

    async def _give_back_kept(self) -> None:
        kept = self.warm.discard()
        if kept is not None:
            await super().putconn(kept)


async def _areconnect_again(pool: AsyncConnectionPool[Any]) -> None:
    """The pool gave up reconnecting (after `RECONNECT_WINDOW`): start again at once.

    `check()` lets the pool grow back to its minimum, which starts a new attempt whose
    pauses begin at one second again.
    """
    if pool.closed:
        return
    try:
        await pool.check()
    except Exception as exc:  # a pool closing meanwhile; the next call tries again anyway
        logger.debug("pool %s: could not start reconnecting again: %s", pool.name, exc)


class AsyncConnectionSource:
    """Lends connections, translating driver errors into named errors at one boundary.

    Args:
        conn: A pool, or one connection (calls on it are serialised by `lock`).
        pipe: A pipeline the caller opened on that one connection; it is synced when each
            call gives the connection back, so errors surface at the call that caused them.
        lock_timeout: How long a statement may wait for a lock (seconds or a timedelta);
            None keeps the session's own setting.
        statement_timeout: How long a statement may run; None keeps the session's own.
    """

    def __init__(
        self,
        conn: AsyncConn,
        pipe: AsyncPipeline | None = None,
        *,
        lock_timeout: Timeout = None,
        statement_timeout: Timeout = None,
    ) -> None:
        if not isinstance(conn, (AsyncConnection, AsyncConnectionPool)):
            raise ConfigurationError(
                "conn must be a psycopg AsyncConnection or AsyncConnectionPool, "
                f"got {type(conn).__name__}."
            )
        if pipe is not None and not isinstance(conn, AsyncConnection):
            raise ConfigurationError(
                "A pipeline belongs to one connection: pass pipe= only with a single "
                "connection, not with a pool."
            )
        self.conn = conn
        self.pipe = pipe
        if isinstance(conn, AsyncConnection):
            check_row_factory(conn)
            check_autocommit(conn)
        # Only a single shared connection needs the lock; a pool hands out one per caller.
        self.lock = asyncio.Lock()
        self.timeouts = timeout_settings(
            lock_timeout=lock_timeout, statement_timeout=statement_timeout
        )

    def with_timeouts(
        self, *, lock_timeout: Timeout, statement_timeout: Timeout
    ) -> AsyncConnectionSource:
        """A source on the same connections (and the same lock) with the timeouts given
        (None: this source's)."""
        other = AsyncConnectionSource(self.conn, self.pipe)
        other.lock = self.lock
        other.timeouts = {
            **self.timeouts,
            **timeout_settings(lock_timeout=lock_timeout, statement_timeout=statement_timeout),
        }
        return other

    @asynccontextmanager
    async def connection(
        self, doing: str = "", *, timeouts: bool = True
    ) -> AsyncIterator[AsyncConnection[DictRow]]:
        """A connection for one call: the caller's own, or one from the pool.

        Args:
            doing: What the call does ("storing a checkpoint (put)"), for error messages.
            timeouts: False for calls that must run under the session's own timeouts
                (`setup()`: building an index on a large table takes long).
        """
        try:
            if isinstance(self.conn, AsyncConnectionPool):
                wanted = self.timeouts if timeouts else {}
                conn, settled = await self._aborrow(self.conn, wanted)
                settings: dict[str, int] | None = None  # what its session has, once known
                own_rows = lend_dict_rows(conn)
                try:
                    if not settled:
                        await self._aconfigure(conn, wanted)
                    settings = wanted
                    if conn.autocommit:
                        # Nothing to commit: `async with conn` would only ask (a lock and a
                        # generator per call); the pool rolls back whatever is left open.
                        yield conn
                    else:
                        async with conn:  # commits on success, rolls back on an error
                            yield conn
                finally:
                    give_back_rows(conn, own_rows)
                    await self._agive_back(self.conn, conn, settings)
            else:
                async with self.lock:
                    if self.conn.closed or self.conn.broken:
                        raise DatabaseUnreachableError(single_connection_lost(self.conn))
                    try:
                        await self._aconfigure(self.conn, self.timeouts if timeouts else {})
                        yield self.conn
                    finally:
                        if self.pipe is not None:
                            await self.pipe.sync()
        except psycopg.Error as exc:
            if isinstance(exc, DurableError):
                raise  # named already (ours are also psycopg's classes)
            named = translate_driver_error(exc, doing=doing, timeouts=self.timeouts)
            if named is None and is_disconnect(exc):
                named = connection_lost(exc, self.conn, doing)
                await self.drop_dead_connections()  # the next call gets a live one
            if named is None:
                mark_from_our_connections(exc)
                raise
            raise named from exc

    async def _aborrow(
        self, pool: AsyncConnectionPool[AsyncConnection[DictRow]], wanted: dict[str, int]
    ) -> tuple[AsyncConnection[DictRow], bool]:
        """A connection of the pool, as `pool.getconn()` gives it, but never one idle for
        `CHECK_IDLE_AFTER` or longer whose session the server has already ended
        (`ended_by_server`: no round trip). After a restart every idle connection is dead:
        the first one found makes the pool check the others at once, so this call and the
        next ones get live connections. (psycopg_pool's own `check=` would pause 1, 2,
        4... s between dead connections.) Also whether its session is known to have the
        `wanted` timeouts: for the connection our pools kept from a call less than
        `CHECK_IDLE_AFTER` ago (`warm.py`, `lend`), which needs neither check.

        Borrowers pass the pool's gate first (`gate.py`: async ones queue there while
        every connection is lent); the pool's timeout bounds both waits together. Give
        the connection back with `_agive_back`."""
        gate = AsyncPoolGate.of(pool)
        try:
            timeout = await gate.enter(pool)
            try:
                if type(pool) is AsyncWarmPool and (lent := pool.warm.lend(wanted)) is not None:
                    return lent
                conn = await pool.getconn(timeout)
                if IDLE_SINCE.needs_check(conn) and ended_by_server(conn.pgconn):
                    try:
                        await conn.close()
                    finally:  # even if cancelled: the pool must not count it as lent
                        await pool.putconn(conn)  # closed: the pool discards it, opens another
                    await self.drop_dead_connections()
                    conn = await pool.getconn(timeout)
            except BaseException:
                gate.leave(pool)
                raise
        except (PoolTimeout, TooManyRequests, PoolClosed) as exc:
            # Translated here, around the borrowing only: the same errors raised by the
            # caller's own code inside `connection()` are not this pool's refusals.
            raise refused_by_pool(pool, exc) from exc
        return conn, False

    async def _agive_back(
        self,
        pool: AsyncConnectionPool[AsyncConnection[DictRow]],
        conn: AsyncConnection[DictRow],
        settings: dict[str, int] | None,
    ) -> None:
        """Return a connection from `_aborrow` to its pool, and let the next borrower in;
        `settings`: the timeouts its session has, if known."""
        try:
            if type(pool) is AsyncWarmPool:
                await pool.give_back(conn, settings)
            else:
                IDLE_SINCE.given_back(conn)
                await pool.putconn(conn)
        finally:
            AsyncPoolGate.of(pool).leave(pool)

    async def _aconfigure(self, conn: AsyncConnection[DictRow], wanted: dict[str, int]) -> None:
        """Give the session `wanted` timeouts (the session's own for the others), once.

        On a connection outside autocommit the setting is committed at once when no
        transaction was open before it: made inside the call's transaction, a rollback of
        that call would undo it while it is recorded as done. A transaction the caller had
        open on their own connection is left alone."""
        if not SESSION_SETTINGS.needs(conn, wanted):
            return
        SESSION_SETTINGS.forget(conn)  # until it is known to have worked
        was_idle = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        await conn.execute(QUERIES["set_session_timeouts"], SESSION_SETTINGS.params(wanted))
        if not conn.autocommit and was_idle:
            await conn.commit()
        SESSION_SETTINGS.record(conn, wanted)

    @property
    def pooled(self) -> bool:
        """Whether connections come from a pool (else: the caller's one connection)."""
        return isinstance(self.conn, AsyncConnectionPool)

    @property
    def capacity(self) -> int:
        """How many calls can hold a connection at once: the pool's size, or 1; no bound
        for a pool without one (a `NullConnectionPool`'s `max_size=0`)."""
        if not isinstance(self.conn, AsyncConnectionPool):
            return 1
        return self.conn.max_size or sys.maxsize

    @property
    def wait_timeout(self) -> float | None:
        """How long a call may wait for a connection: the pool's timeout; None for one
        connection (its lock has none)."""
        return self.conn.timeout if isinstance(self.conn, AsyncConnectionPool) else None

    def timed_out(self) -> Exception:
        """The error for a call that waited `wait_timeout` in vain (nothing was written)."""
        if isinstance(self.conn, AsyncConnectionPool):
            return refused_by_pool(self.conn, PoolTimeout())
        return DatabaseUnreachableError(single_connection_lost(self.conn))

    async def drop_dead_connections(self) -> None:
        """After a lost connection: a restart kills every idle one, so check them all."""
        if isinstance(self.conn, AsyncConnectionPool):
            try:
                await self.conn.check()
            except Exception as exc:  # a pool closing meanwhile; its next call says so
                logger.debug("could not check the pool's connections: %s", exc)


def aretry_on_disconnect(
    fn: Callable[P, Coroutine[Any, Any, T]],
) -> Callable[P, Coroutine[Any, Any, T]]:
    """Run an idempotent method again, once, if its connection died under it.

    The method's object must have registered its connection source (`register_source`).
    """

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await fn(*args, **kwargs)
        except (psycopg.OperationalError, ConnectionLostError) as exc:
            if not is_disconnect(exc):
                raise
            logger.warning("connection lost (%s); retrying %s once", exc, fn.__name__)
            source = source_of(args[0]) if args else None
            if source is not None:
                await source.drop_dead_connections()
            return await fn(*args, **kwargs)

    return wrapper
