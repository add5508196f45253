"""Timeouts of our own: a lock held on our tables fails a call by name, after the time given.

Another connection holds a lock on one of the tables in an open transaction (`LOCK TABLE
... IN ACCESS EXCLUSIVE MODE`, as a migration or a careless script would). A saver, a
journal or a registry given `lock_timeout=` fails `put`, `get_tuple`, a graph step and an
effect with `LockTimeoutError` once that time has passed, writes nothing, and works again
once the lock is gone; `statement_timeout=` does the same with `StatementTimeoutError`.
Timeouts set in the DSN (`options=-c lock_timeout=...`) are named too. The waits here are
the configured timeouts themselves: the lock is taken before the call, so the call can
only end by timing out.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from graphs import State, linear_graph
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from langgraph_durable import (
    AsyncDurablePostgresSaver,
    ConfigurationError,
    ConnectionLostError,
    DurablePostgresSaver,
    EffectJournal,
    LockTimeoutError,
    PoolBusyError,
    PoolClosedError,
    PoolTimeoutError,
    RunRegistry,
    StatementTimeoutError,
    effect,
)
from langgraph_durable._db import AsyncConnectionSource

FLAVORS = ["sync", "async"]
TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "langgraph_durable_effects")


@pytest.fixture(scope="module")
def ready_dsn(db_dsn: str) -> str:
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
    return db_dsn


@contextmanager
def locked(dsn: str, table: str) -> Iterator[None]:
    """`table` locked against everyone by another session until the block ends."""
    with psycopg.connect(dsn) as holder:
        holder.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            holder.rollback()


def counts(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        return {
            t: int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0])  # type: ignore[index]
            for t in TABLES
        }


@asynccontextmanager
async def saver_of(flavor: str, dsn: str, **options: Any) -> AsyncIterator[Any]:
    if flavor == "sync":
        with DurablePostgresSaver.from_conn_string(dsn, **options) as saver:
            yield saver
    else:
        async with AsyncDurablePostgresSaver.from_conn_string(dsn, **options) as asaver:
            yield asaver


async def call(saver: Any, name: str, *args: Any) -> Any:
    if isinstance(saver, AsyncDurablePostgresSaver):
        return await getattr(saver, "a" + name)(*args)
    result = getattr(saver, name)(*args)
    return await result if inspect.isawaitable(result) else result


async def run(graph: Any, flavor: str, inputs: Any, config: dict[str, Any]) -> Any:
    if flavor == "sync":
        return graph.invoke(inputs, config, durability="sync")
    return await graph.ainvoke(inputs, config, durability="sync")


def config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_put_and_get_tuple_give_up_on_a_held_lock_by_name(
    ready_dsn: str, flavor: str
) -> None:
    thread = f"lock-put-{flavor}"
    async with saver_of(flavor, ready_dsn, lock_timeout=0.1) as saver:
        stored = await call(saver, "put", config(thread), empty_checkpoint(), {}, {})
        before = counts(ready_dsn)
        with locked(ready_dsn, "checkpoints"):
            with pytest.raises(LockTimeoutError) as put_error:
                await call(saver, "put", config(thread), empty_checkpoint(), {}, {})
            with pytest.raises(LockTimeoutError) as get_error:
                await call(saver, "get_tuple", stored)
        assert counts(ready_dsn) == before  # nothing half-written
        assert "storing a checkpoint (put)" in str(put_error.value)
        assert "lock_timeout of 100 ms" in str(put_error.value)
        assert "reading a checkpoint (get_tuple)" in str(get_error.value)
        assert isinstance(put_error.value.__cause__, psycopg.errors.LockNotAvailable)
        # The lock is gone: the same saver works again.
        assert (await call(saver, "get_tuple", stored)) is not None
        await call(saver, "put", config(thread), empty_checkpoint(), {}, {})


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_statement_timeout_cancels_a_call_by_name(ready_dsn: str, flavor: str) -> None:
    """Waiting on a lock counts against statement_timeout too: the call is cancelled."""
    thread = f"statement-{flavor}"
    async with saver_of(flavor, ready_dsn, statement_timeout=timedelta(milliseconds=100)) as saver:
        before = counts(ready_dsn)
        with locked(ready_dsn, "checkpoints"), pytest.raises(StatementTimeoutError) as error:
            await call(saver, "put", config(thread), empty_checkpoint(), {}, {})
        assert counts(ready_dsn) == before
        assert "statement_timeout of 100 ms" in str(error.value)


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_a_graph_step_fails_by_name_and_resumes_once_the_lock_is_gone(
    ready_dsn: str, flavor: str
) -> None:
    """The lock is taken while node b runs, so the put after b's step meets it."""
    thread = f"lock-graph-{flavor}"
    holder = psycopg.connect(ready_dsn)
    runs: list[str] = []

    def b(state: dict[str, Any]) -> dict[str, Any]:
        runs.append("b")
        if len(runs) == 1:
            holder.execute("LOCK TABLE checkpoints IN ACCESS EXCLUSIVE MODE")
        return {"log": ["b"]}

    builder = StateGraph(State)
    builder.add_node("a", lambda s: {"log": ["a"]})
    builder.add_node("b", b)
    builder.add_node("c", lambda s: {"log": ["c"]})
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    builder.add_edge("c", END)
    try:
        async with saver_of(flavor, ready_dsn, lock_timeout=0.1) as saver:
            graph = builder.compile(checkpointer=saver)
            with pytest.raises(LockTimeoutError):
                await run(graph, flavor, {"log": []}, config(thread))
            holder.rollback()
            state = graph.get_state(config(thread)) if flavor == "sync" else None
            if state is None:
                state = await graph.aget_state(config(thread))
            # b's writes were kept, the checkpoint after them not: LangGraph shows b as a
            # task with its result, and no next node (see test_outage_state.py).
            assert state.values["log"] == ["a", "b"]
            assert [t.name for t in state.tasks] == ["b"]
            assert state.next == ()
            done = await run(graph, flavor, None, config(thread))
            assert done["log"] == ["a", "b", "c"]
            assert runs == ["b"]  # b's writes were stored: it did not run again
    finally:
        holder.close()


def test_an_effect_is_not_attempted_when_its_claim_waits_out_the_lock(ready_dsn: str) -> None:
    sent: list[str] = []
    with DurablePostgresSaver.from_conn_string(ready_dsn, lock_timeout=0.1) as saver:
        journal = EffectJournal(saver.conn, serde=saver.serde, lock_timeout=0.1)

        @effect(key="timeouts:refund-1", journal=journal, name="refund")
        def refund(order: str) -> str:
            sent.append(order)
            return f"refunded {order}"

        before = counts(ready_dsn)
        with (
            locked(ready_dsn, "langgraph_durable_effects"),
            pytest.raises(LockTimeoutError) as error,
        ):
            refund("order-1")
        assert sent == []  # I1: no claim committed, no attempt
        assert counts(ready_dsn) == before
        assert "claiming effect key 'timeouts:refund-1'" in str(error.value)
        assert refund("order-1") == "refunded order-1"
        assert sent == ["order-1"]


def test_an_effect_in_a_graph_inherits_the_savers_timeout(ready_dsn: str) -> None:
    sent: list[str] = []

    @effect(name="timeouts.notify")
    def notify(who: str) -> str:
        sent.append(who)
        return who

    builder = linear_graph(())
    builder.add_node("notify", lambda s: {"log": [notify("ops")]})
    builder.add_edge("__start__", "notify")
    with DurablePostgresSaver.from_conn_string(ready_dsn, lock_timeout=0.1) as saver:
        graph = builder.compile(checkpointer=saver)
        with locked(ready_dsn, "langgraph_durable_effects"), pytest.raises(LockTimeoutError):
            graph.invoke({"log": []}, config("lock-effect-graph"), durability="sync")
        assert sent == []
        done = graph.invoke(None, config("lock-effect-graph"), durability="sync")
        assert done["log"] == ["ops"]
        assert sent == ["ops"]


def test_the_registry_takes_the_savers_timeout_or_its_own(ready_dsn: str) -> None:
    with DurablePostgresSaver.from_conn_string(ready_dsn, lock_timeout=0.1) as saver:
        inherited = RunRegistry(saver)
        with (
            locked(ready_dsn, "langgraph_durable_runs"),
            pytest.raises(LockTimeoutError) as error,
        ):
            inherited.list()
        assert "listing runs" in str(error.value)
        assert "lock_timeout of 100 ms" in str(error.value)
        own = RunRegistry(saver, lock_timeout=0.05)
        with (
            locked(ready_dsn, "langgraph_durable_runs"),
            pytest.raises(LockTimeoutError) as error,
        ):
            own.list()
        assert "lock_timeout of 50 ms" in str(error.value)


def test_a_timeout_from_the_dsn_is_named_too(ready_dsn: str) -> None:
    dsn = ready_dsn + " options='-c lock_timeout=100'"
    with (
        DurablePostgresSaver.from_conn_string(dsn) as saver,
        locked(ready_dsn, "checkpoints"),
        pytest.raises(LockTimeoutError) as error,
    ):
        saver.get_tuple(config("dsn-timeout"))
    assert "lock_timeout of this session" in str(error.value)


def test_timeouts_are_set_once_per_connection_and_setup_runs_without_them(
    ready_dsn: str,
) -> None:
    with ConnectionPool(
        ready_dsn,
        min_size=1,
        max_size=1,
        kwargs={"autocommit": True, "row_factory": dict_row},
        open=True,
    ) as pool:
        saver = DurablePostgresSaver(pool, lock_timeout=0.25, statement_timeout=5)
        saver.get_tuple(config("settings"))
        with pool.connection() as conn:
            shown = conn.execute("SHOW lock_timeout").fetchone()
            assert shown is not None
            assert shown["lock_timeout"] == "250ms"
        saver.setup()  # under the session's own settings
        with pool.connection() as conn:
            shown = conn.execute("SHOW statement_timeout").fetchone()
            assert shown is not None
            assert shown["statement_timeout"] == "0"
        # A saver without timeouts on the same pool puts the session's own back.
        DurablePostgresSaver(pool).get_tuple(config("settings"))
        with pool.connection() as conn:
            shown = conn.execute("SHOW lock_timeout").fetchone()
            assert shown is not None
            assert shown["lock_timeout"] == "0"


@pytest.mark.parametrize("bad", [0, -1, "1s", True, timedelta(0)])
def test_a_bad_timeout_is_refused_before_connecting(bad: Any) -> None:
    pool: ConnectionPool[Any] = ConnectionPool("postgresql://nowhere.invalid/x", open=False)
    with pytest.raises(ConfigurationError, match="lock_timeout="):
        DurablePostgresSaver(pool, lock_timeout=bad)
    with (
        pytest.raises(ConfigurationError, match="statement_timeout=") as error,
        DurablePostgresSaver.from_conn_string(
            "postgresql://nowhere.invalid/x", statement_timeout=bad
        ),
    ):
        pass
    assert type(error.value) is ConfigurationError  # not a failed connection


ONE_CONNECTION: dict[str, Any] = {
    "min_size": 1,
    "max_size": 1,
    "timeout": 0.2,
    "kwargs": {"autocommit": True, "row_factory": dict_row},
}
"""A pool whose one connection, once lent, leaves the next borrower to time out fast."""


def test_a_busy_pool_times_out_by_name(ready_dsn: str) -> None:
    with ConnectionPool(ready_dsn, open=True, **ONE_CONNECTION) as pool:
        saver = DurablePostgresSaver(pool)
        with pool.connection(), pytest.raises(PoolTimeoutError) as error:
            saver.get_tuple(config("busy-pool"))
        assert "all 1 connections of the pool were busy" in str(error.value)
        assert saver.get_tuple(config("busy-pool")) is None


async def test_a_busy_async_pool_times_out_by_name_at_its_gate_and_in_the_pool(
    ready_dsn: str,
) -> None:
    """Async borrowers queue at the pool's gate (`_db/gate.py`) while every connection is
    lent through it, and wait in the pool itself for connections lent by other code: both
    waits end within the pool's timeout with `PoolTimeoutError`."""
    async with AsyncConnectionPool(ready_dsn, open=False, **ONE_CONNECTION) as pool:
        saver = AsyncDurablePostgresSaver(pool)
        async with AsyncConnectionSource(pool).connection():  # lent through the gate
            with pytest.raises(PoolTimeoutError) as at_gate:
                await saver.aget_tuple(config("busy-pool"))
        async with pool.connection():  # lent by other code, past the gate
            with pytest.raises(PoolTimeoutError) as in_pool:
                await saver.aget_tuple(config("busy-pool"))
        for error in (at_gate, in_pool):
            assert "all 1 connections of the pool were busy" in str(error.value)
        assert await saver.aget_tuple(config("busy-pool")) is None


HANG_S = 60.0
"""Bounds waits that only guard against a hang; a correct run never waits it out."""


def one_waits_in(pool: ConnectionPool[Any] | AsyncConnectionPool[Any]) -> bool:
    """Whether one borrower waits inside the pool itself (its own count)."""
    return pool.get_stats().get("requests_waiting", 0) == 1


def test_a_full_pool_queue_and_a_closed_pool_are_named_not_taken_for_a_lost_connection(
    ready_dsn: str,
) -> None:
    """psycopg_pool's refusals carry no SQLSTATE, like a dead socket: they must not become
    `ConnectionLostError` (and a retry)."""
    settings = {**ONE_CONNECTION, "timeout": HANG_S, "max_waiting": 1}
    with ConnectionPool(ready_dsn, open=True, **settings) as pool:
        saver = DurablePostgresSaver(pool)
        with ThreadPoolExecutor(1) as waiter:
            with pool.connection():
                waiting = waiter.submit(saver.get_tuple, config("full-queue"))
                until(lambda: one_waits_in(pool))
                with pytest.raises(PoolBusyError) as busy:
                    saver.get_tuple(config("full-queue"))
            assert waiting.result(timeout=HANG_S) is None
        assert "1 calls already wait for one, the pool's max_waiting" in str(busy.value)
        assert not isinstance(busy.value, ConnectionLostError)
        pool.close()
        with pytest.raises(PoolClosedError, match="is closed"):
            saver.get_tuple(config("closed-pool"))


async def test_an_async_full_pool_queue_and_a_closed_pool_are_named(ready_dsn: str) -> None:
    settings = {**ONE_CONNECTION, "timeout": HANG_S, "max_waiting": 1}
    async with AsyncConnectionPool(ready_dsn, open=False, **settings) as pool:
        saver = AsyncDurablePostgresSaver(pool)
        held = await pool.getconn()  # lent by other code, past the gate
        waiting = asyncio.create_task(pool.getconn())  # fills the pool's queue
        for _ in range(3):  # no I/O before it queues: a few turns of the loop
            await asyncio.sleep(0)
        assert one_waits_in(pool)
        with pytest.raises(PoolBusyError):
            await saver.aget_tuple(config("full-queue"))
        await pool.putconn(held)
        await pool.putconn(await asyncio.wait_for(waiting, HANG_S))
        assert await saver.aget_tuple(config("full-queue")) is None
        await pool.close()
        with pytest.raises(PoolClosedError, match="is closed"):
            await saver.aget_tuple(config("closed-pool"))


async def test_a_full_queue_at_the_async_gate_is_named_too(ready_dsn: str) -> None:
    settings = {**ONE_CONNECTION, "timeout": HANG_S, "max_waiting": 1}
    async with AsyncConnectionPool(ready_dsn, open=False, **settings) as pool:
        saver = AsyncDurablePostgresSaver(pool)
        async with AsyncConnectionSource(pool).connection():  # lent through the gate
            queued = asyncio.create_task(saver.aget_tuple(config("gate-queue")))
            for _ in range(3):  # no I/O before it queues at the gate
                await asyncio.sleep(0)
            assert not queued.done()
            with pytest.raises(PoolBusyError):
                await saver.aget_tuple(config("gate-queue"))
        assert await asyncio.wait_for(queued, HANG_S) is None


async def test_a_pool_error_raised_by_the_callers_own_code_keeps_its_type(
    ready_dsn: str,
) -> None:
    """Only the borrowing is translated: the same error from code run while the connection
    is lent (another pool of the caller's, say) is not this pool's refusal."""
    async with AsyncConnectionPool(ready_dsn, open=False, **ONE_CONNECTION) as pool:
        with pytest.raises(PoolTimeout) as raised:
            async with AsyncConnectionSource(pool).connection():
                raise PoolTimeout("another pool's timeout")
        assert type(raised.value) is PoolTimeout


def until(condition: Callable[[], bool]) -> None:
    """Waits for `condition` (state another thread changes), at most `HANG_S`."""
    deadline = time.monotonic() + HANG_S
    while not condition():
        assert time.monotonic() < deadline, "the condition never came true"
        time.sleep(0.001)


def test_session_timeouts_outlive_a_rolled_back_call_on_a_pool_without_autocommit(
    ready_dsn: str,
) -> None:
    """The first call on a connection sets its session's timeouts; on a connection outside
    autocommit that setting is committed before the call runs, so the call's rollback does
    not undo it (the source would think it set and never set it again)."""
    settings = {**ONE_CONNECTION, "kwargs": {"autocommit": False, "row_factory": dict_row}}
    with ConnectionPool(ready_dsn, open=True, **settings) as pool:
        saver = DurablePostgresSaver(pool, lock_timeout=0.2)
        with locked(ready_dsn, "checkpoints"), pytest.raises(LockTimeoutError):
            saver.put(config("rolled-back"), empty_checkpoint(), {}, {})
        with pool.connection() as conn:
            shown = conn.execute("SHOW lock_timeout").fetchone()
        assert shown == {"lock_timeout": "200ms"}
