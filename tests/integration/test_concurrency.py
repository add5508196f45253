"""No global lock: while one thread's save is blocked, other threads' saves go through.

A second connection holds the row lock of thread A's checkpoint, so A's `put` waits in the
database. With upstream's one lock per saver every other call would queue behind it; here a
save for thread B finishes while A is still blocked, and A completes once the lock goes.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

import psycopg
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import AsyncDurablePostgresSaver, DurablePostgresSaver

WAITING_ON_LOCK = """
SELECT count(*) AS n FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE %s
"""


PUT_CHECKPOINT = "%WITH commit_mode AS%"  # pg_stat_activity keeps the first 1 KiB of a query
PUT_WRITES = "%INSERT INTO checkpoint_writes%"

HANG_S = 60.0
"""Bounds waits that only guard against a hang; a correct run never waits it out."""


def wait_until_blocked(dsn: str, statement: str = PUT_CHECKPOINT) -> None:
    """Return once a session is waiting on a row lock: the save really is in the database."""
    deadline = time.monotonic() + HANG_S
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(WAITING_ON_LOCK, (statement,)).fetchone()
            if row is not None and row[0] > 0:
                return
            time.sleep(0.01)
    raise AssertionError("the blocked save never reached the database")


def root(thread: str) -> Any:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def test_sync_saver_other_threads_proceed_while_one_is_blocked(db_dsn: str) -> None:
    thread_a, thread_b = f"a-{uuid.uuid4()}", f"b-{uuid.uuid4()}"
    checkpoint = empty_checkpoint()
    with DurablePostgresSaver.from_conn_string(db_dsn, max_connections=4) as saver:
        saver.setup()
        saver.put(root(thread_a), checkpoint, {}, {})
        with psycopg.connect(db_dsn) as locker:
            locker.execute("SELECT 1 FROM checkpoints WHERE thread_id = %s FOR UPDATE", (thread_a,))
            done = threading.Event()
            blocked = threading.Thread(
                target=lambda: (saver.put(root(thread_a), checkpoint, {}, {}), done.set())
            )
            blocked.start()
            wait_until_blocked(db_dsn)
            saver.put(root(thread_b), empty_checkpoint(), {}, {})  # does not queue behind A
            assert saver.get_tuple(root(thread_b)) is not None
            assert not done.is_set()
            locker.rollback()
        blocked.join(timeout=HANG_S)
        assert done.is_set()


async def test_async_saver_other_threads_proceed_while_one_is_blocked(db_dsn: str) -> None:
    thread_a, thread_b = f"a-{uuid.uuid4()}", f"b-{uuid.uuid4()}"
    checkpoint = empty_checkpoint()
    async with AsyncDurablePostgresSaver.from_conn_string(db_dsn, max_connections=4) as saver:
        await saver.setup()
        await saver.aput(root(thread_a), checkpoint, {}, {})
        async with await psycopg.AsyncConnection.connect(db_dsn) as locker:
            await locker.execute(
                "SELECT 1 FROM checkpoints WHERE thread_id = %s FOR UPDATE", (thread_a,)
            )
            blocked = asyncio.create_task(saver.aput(root(thread_a), checkpoint, {}, {}))
            await asyncio.to_thread(wait_until_blocked, db_dsn)
            await saver.aput(root(thread_b), empty_checkpoint(), {}, {})
            assert await saver.aget_tuple(root(thread_b)) is not None
            assert not blocked.done()
            await locker.rollback()
        await asyncio.wait_for(blocked, timeout=HANG_S)


def test_checkpoint_waits_for_the_writes_of_the_checkpoint_it_moves_past(db_dsn: str) -> None:
    """Invariant I4: while a task's writes are still being stored, the next checkpoint is
    not committed before them. A second session holds the same write row uncommitted, so
    the writes block in the database; the child checkpoint must finish after they do."""
    thread = f"i4-{uuid.uuid4()}"
    done: list[str] = []
    with DurablePostgresSaver.from_conn_string(db_dsn, max_connections=4) as saver:
        saver.setup()
        parent = saver.put(root(thread), empty_checkpoint(), {}, {})
        with psycopg.connect(db_dsn) as locker:
            locker.execute(
                "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, "
                "task_id, task_path, idx, channel, type, blob) "
                "VALUES (%s, '', %s, 'task-1', '', 0, 'ch', 'json', '\\x00')",
                (thread, parent["configurable"]["checkpoint_id"]),
            )
            writes = threading.Thread(
                target=lambda: (
                    saver.put_writes(parent, [("ch", "value")], "task-1"),
                    done.append("writes"),
                )
            )
            writes.start()
            wait_until_blocked(db_dsn, PUT_WRITES)
            child = threading.Thread(
                target=lambda: (
                    saver.put(parent, empty_checkpoint(), {}, {}),
                    done.append("checkpoint"),
                )
            )
            child.start()
            # The checkpoint waits for the blocked writes. A bounded look: a slow machine can
            # only make it miss a checkpoint that did not wait, never fail a correct run;
            # the order of the two at the end decides.
            child.join(timeout=0.5)
            assert done == []
            locker.rollback()
        writes.join(timeout=HANG_S)
        child.join(timeout=HANG_S)
    assert done == ["writes", "checkpoint"]
