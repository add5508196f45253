"""The connection the pools the saver opens keep between calls (`_db/warm.py`).

Calls in turn reuse it without the pool's bookkeeping; a borrower waiting for the pool,
through a source or directly, gets it as soon as it is given back; it goes back into the
pool when it is not idle, at `check()` and when the pool closes, and a kept connection
whose session ended is replaced. Real pools on the test database; the only waits are on
the pool's own counts, bounded by `HANG_S` against a hang.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from langgraph_durable import DurablePostgresSaver
from langgraph_durable._db import AsyncConnectionSource, ConnectionSource, aopen_pool, open_pool
from langgraph_durable._db import connections as connections_module
from langgraph_durable._db.warm import WarmSlot
from langgraph_durable.errors import PoolClosedError

HANG_S = 60.0
"""Bounds waits that only guard against a hang; a correct run never waits it out."""


@contextmanager
def pool_of(dsn: str, size: int) -> Iterator[ConnectionPool[Any]]:
    pool = open_pool(dsn, max_size=size, connect_timeout=10, pool_timeout=HANG_S)
    try:
        yield pool
    finally:
        pool.close()


@asynccontextmanager
async def apool_of(dsn: str, size: int) -> AsyncIterator[AsyncConnectionPool[Any]]:
    pool = await aopen_pool(dsn, max_size=size, connect_timeout=10, pool_timeout=HANG_S)
    try:
        yield pool
    finally:
        await pool.close()


def backend_of(source: ConnectionSource) -> int:
    with source.connection("test") as conn:
        return conn.info.backend_pid


def requests(pool: Any) -> int:
    """How many borrowers the pool served with its own bookkeeping (not the kept
    connection)."""
    return int(pool.get_stats().get("requests_num", 0))


def wait_until(condition: Any) -> None:
    deadline = time.monotonic() + HANG_S
    while not condition():
        assert time.monotonic() < deadline, "gave up waiting (a hang)"
        time.sleep(0.001)


def lock_timeout_of(source: ConnectionSource) -> str:
    with source.connection("test") as conn:
        row = conn.execute("SHOW lock_timeout").fetchone()
        assert row is not None
        return str(row["lock_timeout"])


@pytest.fixture
def kept_stays_fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kept connection counts as just given back however long a call takes: the tests
    of `WarmSlot.lend` do not depend on the machine's speed."""
    monkeypatch.setattr(connections_module, "CHECK_IDLE_AFTER", 3600.0)


@pytest.mark.usefixtures("kept_stays_fresh")
def test_sources_with_other_timeouts_in_turn_each_get_their_own(db_dsn: str) -> None:
    """The kept connection is lent with its session's timeouts known (`WarmSlot.lend`):
    a source wanting others still sets them, on the pool's one connection."""
    with pool_of(db_dsn, 1) as pool:
        one_s = ConnectionSource(pool, lock_timeout=1)
        two_s = ConnectionSource(pool, lock_timeout=2)
        own = ConnectionSource(pool)  # the session's own: the server's default, 0
        seen = [lock_timeout_of(s) for s in (one_s, one_s, two_s, one_s, own, two_s, two_s)]
        assert seen == ["1s", "1s", "2s", "1s", "0", "2s", "2s"]
        with one_s.connection("setup", timeouts=False) as conn:  # the session's own
            assert conn.execute("SHOW lock_timeout").fetchone() == {"lock_timeout": "0"}
        assert lock_timeout_of(one_s) == "1s"


@pytest.mark.usefixtures("kept_stays_fresh")
def test_the_kept_connection_is_lent_without_its_checks(
    db_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Calls in turn neither look at when the connection was given back nor at its
    session's timeouts: the slot knows both (`lend`)."""
    looked: list[str] = []
    idle_since, settings = connections_module.IDLE_SINCE, connections_module.SESSION_SETTINGS
    for target, name in ((idle_since, "needs_check"), (settings, "needs")):
        real = getattr(target, name)
        monkeypatch.setattr(
            target, name, lambda *a, _real=real, _name=name: looked.append(_name) or _real(*a)
        )
    with pool_of(db_dsn, 1) as pool:
        source = ConnectionSource(pool, lock_timeout=1)
        pid = backend_of(source)  # the first call: from the pool, checked and configured
        assert looked
        looked.clear()
        assert {backend_of(source) for _ in range(5)} == {pid}
        assert looked == []


@pytest.mark.usefixtures("kept_stays_fresh")
async def test_async_sources_with_other_timeouts_in_turn_each_get_their_own(
    db_dsn: str,
) -> None:
    async with apool_of(db_dsn, 1) as pool:

        async def lock_timeout(source: AsyncConnectionSource) -> str:
            async with source.connection("test") as conn:
                row = await (await conn.execute("SHOW lock_timeout")).fetchone()
                assert row is not None
                return str(row["lock_timeout"])

        one_s = AsyncConnectionSource(pool, lock_timeout=1)
        two_s = AsyncConnectionSource(pool, lock_timeout=2)
        own = AsyncConnectionSource(pool)
        seen = [await lock_timeout(s) for s in (one_s, one_s, two_s, two_s, own, one_s)]
        assert seen == ["1s", "1s", "2s", "2s", "0", "1s"]


def test_calls_in_turn_reuse_the_kept_connection_without_asking_the_pool(db_dsn: str) -> None:
    with pool_of(db_dsn, 2) as pool:
        source = ConnectionSource(pool)
        first = backend_of(source)
        asked = requests(pool)
        assert {backend_of(source) for _ in range(20)} == {first}
        assert requests(pool) == asked


def test_the_saver_from_a_dsn_keeps_its_connection(db_dsn: str) -> None:
    config = {"configurable": {"thread_id": "warm-saver", "checkpoint_ns": ""}}
    with DurablePostgresSaver.from_conn_string(db_dsn, max_connections=2) as saver:
        saver.setup()
        saver.get_tuple(config)
        asked = requests(saver.conn)
        for _ in range(5):
            saver.get_tuple(config)
        assert requests(saver.conn) == asked


def test_a_pool_the_caller_passed_keeps_nothing(db_dsn: str) -> None:
    """Other code may borrow from the caller's pool directly: nothing is held back."""
    kwargs = {"autocommit": True, "row_factory": dict_row}
    with ConnectionPool(db_dsn, min_size=1, max_size=1, kwargs=kwargs) as pool:
        source = ConnectionSource(pool)
        backend_of(source)
        asked = requests(pool)
        backend_of(source)
        assert requests(pool) == asked + 1
        with pool.connection(timeout=HANG_S):  # the pool's one connection is in it
            pass


def test_a_thread_waiting_for_the_pool_gets_the_kept_connection(db_dsn: str) -> None:
    """A pool of one: the connection in use would be kept, but a borrower waits for it."""
    with pool_of(db_dsn, 1) as pool:
        source = ConnectionSource(pool)
        pid = backend_of(source)  # kept now
        got: list[int] = []
        with source.connection("test") as conn:  # taken from the slot
            assert conn.info.backend_pid == pid
            waiter = threading.Thread(target=lambda: got.append(backend_of(source)))
            waiter.start()
            wait_until(lambda: pool.get_stats().get("requests_waiting", 0) == 1)
        waiter.join(HANG_S)
        assert got == [pid]
        asked = requests(pool)
        assert backend_of(source) == pid  # given back to the slot once nobody waited
        assert requests(pool) == asked


async def test_a_task_waiting_for_the_pool_gets_the_kept_connection(db_dsn: str) -> None:
    async with apool_of(db_dsn, 1) as pool:
        source = AsyncConnectionSource(pool)

        async def backend() -> int:
            async with source.connection("test") as conn:
                return conn.info.backend_pid

        pid = await backend()
        async with source.connection("test") as conn:
            assert conn.info.backend_pid == pid
            waiter = asyncio.create_task(backend())
            for _ in range(3):  # up to its wait: at the pool's gate, which counts ours
                await asyncio.sleep(0)
            assert not waiter.done()
        assert await asyncio.wait_for(waiter, HANG_S) == pid
        asked = requests(pool)
        assert await backend() == pid
        assert requests(pool) == asked


def test_closing_the_pool_closes_the_kept_connection_and_refuses_calls(db_dsn: str) -> None:
    pool = open_pool(db_dsn, max_size=2, connect_timeout=10)
    source = ConnectionSource(pool)
    with source.connection("test") as conn:
        kept = conn
    pool.close()
    assert kept.closed
    with pytest.raises(PoolClosedError):
        backend_of(source)


def test_closing_the_pool_while_a_call_runs_closes_its_connection_after_it(
    db_dsn: str,
) -> None:
    pool = open_pool(db_dsn, max_size=2, connect_timeout=10)
    source = ConnectionSource(pool)
    with source.connection("test") as conn:
        pool.close()
        assert not conn.closed
    assert conn.closed


def test_code_borrowing_from_the_pool_directly_gets_the_kept_connection(db_dsn: str) -> None:
    """`saver.conn` is the pool, as upstream's is: a pool of one must still lend to it."""
    with pool_of(db_dsn, 1) as pool:
        source = ConnectionSource(pool)
        pid = backend_of(source)  # kept now
        with pool.connection(timeout=HANG_S) as conn:
            assert conn.info.backend_pid == pid
        got: list[int] = []

        def borrow_directly() -> None:
            with pool.connection(timeout=HANG_S) as conn:
                got.append(conn.info.backend_pid)

        with source.connection("test"):
            waiter = threading.Thread(target=borrow_directly)
            waiter.start()
            wait_until(lambda: pool.get_stats().get("requests_waiting", 0) == 1)
        waiter.join(HANG_S)
        assert got == [pid]


def test_check_takes_the_kept_connection_back_into_the_pool(db_dsn: str) -> None:
    with pool_of(db_dsn, 1) as pool:
        source = ConnectionSource(pool)
        backend_of(source)
        pool.check()
        assert pool.get_stats().get("pool_available") == 1
        asked = requests(pool)
        backend_of(source)
        assert requests(pool) == asked + 1


def test_a_connection_in_use_at_drain_is_not_kept_after_it(db_dsn: str) -> None:
    with pool_of(db_dsn, 1) as pool:
        source = ConnectionSource(pool)
        with source.connection("test") as conn:
            drained = conn.info.backend_pid
            pool.drain()
        assert backend_of(source) != drained  # the pool closed it and made another


def test_giving_a_kept_connection_back_twice_is_refused(db_dsn: str) -> None:
    """Upstream's pool refuses it too; kept, it would be lent to two borrowers."""
    with pool_of(db_dsn, 2) as pool:
        conn = pool.getconn()
        pool.putconn(conn)
        with pytest.raises(ValueError, match="already given back"):
            pool.putconn(conn)


def test_a_connection_left_in_a_transaction_goes_back_to_the_pool(db_dsn: str) -> None:
    with pool_of(db_dsn, 1) as pool:
        source = ConnectionSource(pool)
        with source.connection("test") as conn:
            conn.execute("BEGIN")
            conn.execute("CREATE TEMP TABLE left_open (x int)")
            assert conn.info.transaction_status == TransactionStatus.INTRANS
        asked = requests(pool)
        with source.connection("test") as conn:  # from the pool, which rolled it back
            assert conn.info.transaction_status == TransactionStatus.IDLE
            assert conn.execute("SELECT to_regclass('pg_temp.left_open')").fetchone() == {
                "to_regclass": None
            }
        assert requests(pool) == asked + 1


def test_a_kept_connection_whose_session_ended_is_replaced(
    db_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kept connection idle for `CHECK_IDLE_AFTER` is checked when taken, like one the
    pool lends (0 here, so that no test waits for it)."""
    monkeypatch.setattr(connections_module, "CHECK_IDLE_AFTER", 0.0)
    with pool_of(db_dsn, 1) as pool:
        source = ConnectionSource(pool)
        pid = backend_of(source)
        with psycopg.connect(db_dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            wait_until(
                lambda: (
                    admin.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)
                    ).fetchone()
                    == (0,)
                )
            )
        assert backend_of(source) != pid  # a live connection, no error


@dataclass
class _PgConn:
    transaction_status: TransactionStatus = TransactionStatus.IDLE


@dataclass(eq=False)
class _Conn:
    pgconn: _PgConn


def _made(slot: WarmSlot, status: TransactionStatus = TransactionStatus.IDLE) -> _Conn:
    conn = _Conn(_PgConn(status))
    slot.born(conn)
    return conn


def test_the_slot_keeps_one_idle_connection_and_none_while_a_borrower_waits() -> None:
    slot = WarmSlot(max_lifetime=3600.0)
    first, second = _made(slot), _made(slot)
    assert slot.take() is None  # counted: waiting for the pool
    assert not slot.keep(first)  # a borrower still waits for the pool
    slot.served()
    assert slot.keep(first)
    assert not slot.keep(second)  # one at most
    assert slot.take() is first
    assert not slot.keep(_made(slot, TransactionStatus.INTRANS))
    assert not slot.keep(_made(slot, TransactionStatus.UNKNOWN))
    assert not slot.keep(_Conn(_PgConn()))  # made before the slot knew: its age is unknown
    assert slot.keep(second)
    assert slot.discard() is second
    assert slot.discard() is None
    assert slot.keep(first)
    assert slot.close() is first
    assert not slot.keep(first)  # closed: nothing kept from now on


def test_the_slot_gives_back_a_connection_as_old_as_the_pools_max_lifetime() -> None:
    slot = WarmSlot(max_lifetime=0.0)
    assert not slot.keep(_made(slot))
    slot = WarmSlot(max_lifetime=3600.0)
    assert slot.keep(_made(slot))


def test_the_slot_lends_a_connection_kept_moments_ago_with_its_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`lend`: only a connection kept less than `CHECK_IDLE_AFTER` ago, saying whether its
    session has the settings wanted; otherwise nothing, and the borrower is not counted
    (it borrows the usual way, `take`)."""
    monkeypatch.setattr(connections_module, "CHECK_IDLE_AFTER", 3600.0)
    slot = WarmSlot(max_lifetime=3600.0)
    conn = _made(slot)
    assert slot.lend({}) is None  # nothing kept, and not counted as waiting:
    assert slot.keep(conn, {"lock_timeout": 1000})  # kept, as nobody waits
    assert slot.lend({"lock_timeout": 2000}) == (conn, False)
    assert slot.kept is None
    settings = {"lock_timeout": 1000}
    assert slot.keep(conn, settings)
    settings["lock_timeout"] = 2000  # the slot keeps what the session had, not the dict
    assert slot.lend({"lock_timeout": 1000}) == (conn, True)
    assert slot.keep(conn)  # given back through the pool's putconn: settings unknown
    assert slot.lend({}) == (conn, False)
    assert slot.keep(conn, {})
    monkeypatch.setattr(connections_module, "CHECK_IDLE_AFTER", 0.0)
    assert slot.lend({}) is None  # idle too long: it must be checked, through `take`
    assert slot.take() is conn
