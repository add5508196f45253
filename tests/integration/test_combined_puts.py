"""Puts that wait for a connection go together, on a real database.

A statement-level trigger records how many checkpoints each INSERT statement stored, so
the tests see the batches the server saw. Every thread's state is then read back whole:
its checkpoints, its channel values stored as blobs, and the writes each put carried.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypedDict

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, AsyncNullConnectionPool, ConnectionPool
from put_params import put_params

from langgraph_durable import AsyncDurablePostgresSaver, DurablePostgresSaver
from langgraph_durable.checkpoint._combining import combined

COUNT_STATEMENTS = """
CREATE TABLE IF NOT EXISTS test_put_statements (rows int NOT NULL);
CREATE OR REPLACE FUNCTION test_count_put_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO test_put_statements SELECT count(*) FROM new_rows;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS test_count_put_rows ON checkpoints;
CREATE TRIGGER test_count_put_rows AFTER INSERT ON checkpoints
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION test_count_put_rows();
"""

REFUSE_POISON = """
CREATE SEQUENCE IF NOT EXISTS test_poison_attempts;
CREATE OR REPLACE FUNCTION test_refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.thread_id LIKE 'poison-%' THEN
        PERFORM nextval('test_poison_attempts');  -- not rolled back with the statement
        RAISE EXCEPTION 'test: thread % refused', NEW.thread_id;
    END IF;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS test_refuse_poison ON checkpoints;
CREATE TRIGGER test_refuse_poison BEFORE INSERT ON checkpoints
    FOR EACH ROW EXECUTE FUNCTION test_refuse_poison();
"""


POOL_KWARGS: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}


HANG_S = 60.0
"""Bounds waits that only guard against a hang; a correct run never waits it out."""


class State(TypedDict):
    text: str
    items: list[str]


def build() -> Any:
    """Three nodes; `items` is stored as a blob, and each task's writes are parked."""
    graph = StateGraph(State)
    graph.add_node("a", lambda s: {"text": s["text"] + "a", "items": [*s["items"], "a"]})
    graph.add_node("b", lambda s: {"text": s["text"] + "b", "items": [*s["items"], "b"]})
    graph.add_node("c", lambda s: {"text": s["text"] + "c", "items": [*s["items"], "c"]})
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("b", "c")
    graph.add_edge("c", END)
    return graph


@asynccontextmanager
async def one_connection(dsn: str, options: str = "") -> AsyncIterator[AsyncDurablePostgresSaver]:
    """An async saver, set up, on a pool of one connection: a second run's put waits."""
    async with AsyncConnectionPool(
        dsn,
        min_size=1,
        max_size=1,
        kwargs=POOL_KWARGS,
        open=False,
    ) as pool:
        saver = AsyncDurablePostgresSaver(pool)
        await saver.setup()
        yield saver


def statement_sizes(dsn: str) -> list[int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return [row[0] for row in conn.execute("SELECT rows FROM test_put_statements")]


def install(dsn: str, sql: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql)


async def test_async_runs_waiting_for_the_one_connection_share_statements(
    fresh_db_dsn: str,
) -> None:
    threads = [f"async-{i}-{uuid.uuid4().hex[:6]}" for i in range(24)]
    async with one_connection(fresh_db_dsn) as saver:
        install(fresh_db_dsn, COUNT_STATEMENTS)
        graph = build().compile(checkpointer=saver)
        await asyncio.gather(
            *(
                graph.ainvoke(
                    {"text": f"{t}:", "items": []},
                    {"configurable": {"thread_id": t}},
                    durability="sync",
                )
                for t in threads
            )
        )
        sizes = statement_sizes(fresh_db_dsn)
        assert sum(sizes) == 5 * len(threads)  # the input's, the first step's, one per node
        assert max(sizes) > 1  # runs waiting for the connection went together
        for thread in threads:
            config = {"configurable": {"thread_id": thread}}
            latest = await saver.aget_tuple(config)
            assert latest is not None
            assert latest.checkpoint["channel_values"]["items"] == ["a", "b", "c"]
            assert latest.checkpoint["channel_values"]["text"] == f"{thread}:abc"
            history = [c async for c in saver.alist(config)]
            assert len(history) == 5
            for earlier in history[1:]:
                assert earlier.pending_writes, (thread, earlier.metadata)


def test_threads_waiting_for_the_one_connection_store_whole_runs(fresh_db_dsn: str) -> None:
    threads = [f"sync-{i}-{uuid.uuid4().hex[:6]}" for i in range(12)]
    with ConnectionPool(
        fresh_db_dsn,
        min_size=1,
        max_size=1,
        kwargs=POOL_KWARGS,
        open=False,
    ) as pool:
        saver = DurablePostgresSaver(pool)
        saver.setup()
        install(fresh_db_dsn, COUNT_STATEMENTS)
        graph = build().compile(checkpointer=saver)
        errors: list[BaseException] = []

        def run(thread: str) -> None:
            try:
                graph.invoke(
                    {"text": f"{thread}:", "items": []},
                    {"configurable": {"thread_id": thread}},
                    durability="sync",
                )
            except BaseException as exc:
                errors.append(exc)

        workers = [threading.Thread(target=run, args=(t,)) for t in threads]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert errors == []
        # Whether two threads met at the connection depends on timing; what was stored
        # does not.
        assert sum(statement_sizes(fresh_db_dsn)) == 5 * len(threads)
        for thread in threads:
            config = {"configurable": {"thread_id": thread}}
            latest = saver.get_tuple(config)
            assert latest is not None
            assert latest.checkpoint["channel_values"]["items"] == ["a", "b", "c"]
            assert len(list(saver.list(config))) == 5


async def test_a_refused_put_fails_alone_and_the_others_of_its_batch_are_stored(
    fresh_db_dsn: str,
) -> None:
    async with one_connection(fresh_db_dsn) as saver:
        install(fresh_db_dsn, COUNT_STATEMENTS + REFUSE_POISON)
        graph = build().compile(checkpointer=saver)
        threads = ["good-0", "good-1", "poison-2", "good-3", "good-4"]
        results = await asyncio.gather(
            *(
                graph.ainvoke(
                    {"text": f"{t}:", "items": []},
                    {"configurable": {"thread_id": t}},
                    durability="sync",
                )
                for t in threads
            ),
            return_exceptions=True,
        )
        for thread, result in zip(threads, results, strict=True):
            if thread.startswith("poison"):
                assert isinstance(result, Exception)
                assert "poison-2 refused" in str(result)
            else:
                assert result == {"text": f"{thread}:abc", "items": ["a", "b", "c"]}
                latest = await saver.aget_tuple({"configurable": {"thread_id": thread}})
                assert latest is not None
                assert latest.checkpoint["channel_values"]["items"] == ["a", "b", "c"]
        assert await saver.aget_tuple({"configurable": {"thread_id": "poison-2"}}) is None
        # Tried twice: in its batch (the first run held the connection, the other four
        # waited for it together), then alone.
        with psycopg.connect(fresh_db_dsn, autocommit=True) as conn:
            row = conn.execute("SELECT last_value FROM test_poison_attempts").fetchone()
        assert row is not None
        assert row[0] == 2


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
async def test_every_durability_mode_stores_whole_runs_under_load(
    fresh_db_dsn: str, durability: str
) -> None:
    threads = [f"{durability}-{i}" for i in range(16)]
    async with AsyncDurablePostgresSaver.from_conn_string(fresh_db_dsn, max_connections=2) as saver:
        await saver.setup()
        graph = build().compile(checkpointer=saver)
        results = await asyncio.gather(
            *(
                graph.ainvoke(
                    {"text": f"{t}:", "items": []},
                    {"configurable": {"thread_id": t}},
                    durability=durability,
                )
                for t in threads
            )
        )
        assert all(r["items"] == ["a", "b", "c"] for r in results)
        for thread in threads:
            state = await graph.aget_state({"configurable": {"thread_id": thread}})
            assert state.values == {"text": f"{thread}:abc", "items": ["a", "b", "c"]}
            assert state.next == ()


def test_a_batch_larger_than_work_mem_does_not_spill_to_a_temporary_file(
    fresh_db_dsn: str,
) -> None:
    """Arrays unnested in FROM are materialised: this batch of 25 KB checkpoints would
    spill past a 64 kB work_mem, and with temp_file_limit=0 the statement would fail."""
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        saver.setup()
    batch = [
        put_params(
            1,
            1,
            thread_id=f"large-{i}",
            checkpoint_id=f"c{i}",
            checkpoint=json.dumps({"text": "x" * 25_000}),
        )
        for i in range(12)
    ]
    with psycopg.connect(fresh_db_dsn, autocommit=True) as conn:
        conn.execute("SET work_mem = '64kB'")
        conn.execute("SET temp_file_limit = 0")
        conn.execute(*combined(batch))
        stored = conn.execute(
            "SELECT count(*), count(DISTINCT xmin::text) FROM checkpoints"
            " WHERE thread_id LIKE 'large-%%'"
        ).fetchone()
    assert stored == (12, 1)


async def test_a_pool_without_a_size_bound_never_makes_a_put_wait(fresh_db_dsn: str) -> None:
    """A `NullConnectionPool` (max_size=0: no bound) gives every put a connection of its
    own; none waits to go together, and none waits for ever."""
    threads = [f"null-pool-{i}" for i in range(8)]
    async with AsyncNullConnectionPool(fresh_db_dsn, kwargs=POOL_KWARGS, open=False) as pool:
        saver = AsyncDurablePostgresSaver(pool)
        await saver.setup()
        graph = build().compile(checkpointer=saver)
        runs = asyncio.gather(
            *(
                graph.ainvoke(
                    {"text": f"{t}:", "items": []},
                    {"configurable": {"thread_id": t}},
                    durability="sync",
                )
                for t in threads
            )
        )
        results = await asyncio.wait_for(runs, HANG_S)
    assert [r["text"] for r in results] == [f"{t}:abc" for t in threads]


async def test_a_row_lock_held_elsewhere_holds_up_only_its_own_put(fresh_db_dsn: str) -> None:
    """A batch meets a checkpoint row another transaction has locked: the combined
    statement gives up after its short lock_timeout, and each put is stored alone, so the
    others commit while the locked one still waits for its lock."""

    def config(thread: str) -> Any:
        return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}

    checkpoints = {name: empty_checkpoint() for name in ("held-1", "held-2", "locked", "a", "b")}
    async with AsyncDurablePostgresSaver.from_conn_string(fresh_db_dsn, max_connections=2) as saver:
        await saver.setup()
        for name in ("held-1", "held-2", "locked"):
            await saver.aput(config(name), checkpoints[name], {}, {})
        first = await psycopg.AsyncConnection.connect(fresh_db_dsn)
        second = await psycopg.AsyncConnection.connect(fresh_db_dsn)
        async with first, second:
            await first.execute(
                "SELECT 1 FROM checkpoints WHERE thread_id IN ('held-1', 'held-2') FOR UPDATE"
            )
            await second.execute("SELECT 1 FROM checkpoints WHERE thread_id = 'locked' FOR UPDATE")

            def put(name: str) -> asyncio.Task[Any]:
                return asyncio.create_task(saver.aput(config(name), checkpoints[name], {}, {}))

            held = [put("held-1"), put("held-2")]  # both connections wait on a lock
            await asyncio.to_thread(wait_until_waiting_on_locks, fresh_db_dsn, 2)
            waiting = [put("locked"), put("a"), put("b")]  # no connection free: they queue
            for _ in range(3):
                await asyncio.sleep(0)
            await first.rollback()  # the two connections come free: the three go together
            await asyncio.wait_for(asyncio.gather(*held, *waiting[1:]), HANG_S)
            assert not waiting[0].done()  # stored alone now, waiting for its lock
            await second.rollback()
        await asyncio.wait_for(waiting[0], HANG_S)
        for name in ("a", "b", "locked"):
            assert await saver.aget_tuple(config(name)) is not None


def wait_until_waiting_on_locks(dsn: str, sessions: int) -> None:
    """Return once `sessions` sessions of the database wait on a lock."""
    deadline = time.monotonic() + HANG_S
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchone()
            if row is not None and row[0] >= sessions:
                return
            time.sleep(0.01)
    raise AssertionError(f"{sessions} sessions never waited on a lock")
