"""Writes that join the caller's transaction: `*_txn(conn, ...)`.

A row of the caller's own (here `announcements`, standing for an outbox event or a run's
status) and our write commit together or not at all, and our write keeps its synchronous
commit even in a session that turned it off.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from psycopg.rows import dict_row

from langgraph_durable import (
    AsyncDurablePostgresSaver,
    AsyncEffectJournal,
    DurablePostgresSaver,
    EffectJournal,
)
from langgraph_durable.checkpoint import aput_txn, aput_writes_txn, put_txn, put_writes_txn
from langgraph_durable.effects import aclaim_txn, acomplete_txn, complete_txn, journal_of
from langgraph_durable.effects._protocol import EffectStatus

SERDE = JsonPlusSerializer()


class Rollback(Exception):
    pass


@pytest.fixture(scope="module")
def dsn(db_dsn: str) -> str:
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS announcements (id TEXT PRIMARY KEY)")
    return db_dsn


def announced(dsn: str, tag: str) -> bool:
    with psycopg.connect(dsn) as conn:
        found = conn.execute("SELECT 1 FROM announcements WHERE id = %s", (tag,)).fetchone()
    return found is not None


def checkpoint_config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


@pytest.mark.parametrize("commit", [True, False])
def test_a_checkpoint_and_its_writes_commit_with_the_callers_row(dsn: str, commit: bool) -> None:
    thread = f"txn-{uuid.uuid4()}"
    checkpoint = empty_checkpoint()
    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
        conn.execute("SET synchronous_commit = off")
        try:
            with conn.transaction():
                stored = put_txn(
                    conn, checkpoint_config(thread), checkpoint, {"step": 1}, {}, serde=SERDE
                )
                put_writes_txn(conn, stored, [("log", "hello")], "task-1", serde=SERDE)
                conn.execute("INSERT INTO announcements VALUES (%s)", (thread,))
                mode = conn.execute("SHOW synchronous_commit").fetchone()
                assert mode is not None
                assert mode["synchronous_commit"] == "on"  # ours stays durable
                if not commit:
                    raise Rollback
        except Rollback:
            pass
    assert announced(dsn, thread) is commit
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        found = saver.get_tuple({"configurable": {"thread_id": thread}})
    if commit:
        assert found is not None
        assert found.checkpoint["id"] == checkpoint["id"]
        assert found.pending_writes == [("task-1", "log", "hello")]
    else:
        assert found is None


@pytest.mark.parametrize("commit", [True, False])
async def test_async_forms_join_the_callers_transaction(dsn: str, commit: bool) -> None:
    thread = f"atxn-{uuid.uuid4()}"
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True, row_factory=dict_row)
    try:
        async with conn.transaction(force_rollback=not commit):
            stored = await aput_txn(
                conn, checkpoint_config(thread), empty_checkpoint(), {}, {}, serde=SERDE
            )
            await aput_writes_txn(conn, stored, [("log", 1)], "task-1", serde=SERDE)
            claimed = await aclaim_txn(
                conn, f"key-{thread}", "announce", "h", owner="me", lease_seconds=30
            )
            assert claimed == 1
            assert await acomplete_txn(conn, f"key-{thread}", 1, SERDE.dumps_typed("sent"))
            await conn.execute("INSERT INTO announcements VALUES (%s)", (thread,))
    finally:
        await conn.close()
    assert announced(dsn, thread) is commit
    async with AsyncDurablePostgresSaver.from_conn_string(dsn) as saver:
        found = await saver.aget_tuple({"configurable": {"thread_id": thread}})
    assert (found is not None) is commit


@pytest.mark.parametrize("commit", [True, False])
def test_an_effects_completion_commits_with_the_callers_row(dsn: str, commit: bool) -> None:
    key = f"joined-{uuid.uuid4()}"
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        journal = EffectJournal(saver.conn)  # type: ignore[arg-type]
        assert journal.claim(key, "announce", "h", 30, None) == 1
        with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
            try:
                with conn.transaction():
                    done = complete_txn(conn, key, 1, journal.dump_result(key, "ok"))
                    assert done
                    conn.execute("INSERT INTO announcements VALUES (%s)", (key,))
                    if not commit:
                        raise Rollback
            except Rollback:
                pass
        row = journal.get(key)
    assert row is not None
    assert row.status is (EffectStatus.COMPLETED if commit else EffectStatus.RUNNING)
    assert announced(dsn, key) is commit


def test_claims_and_completions_count_right_on_a_connection_in_pipeline_mode(dsn: str) -> None:
    """A saver made with `pipe=` lends its journal a connection in pipeline mode, where a
    statement's row count arrives only at the next sync: a claim of a key taken already
    must still say None, a completion True."""
    key = f"piped-{uuid.uuid4()}"
    with (
        psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn,
        conn.pipeline() as pipe,
    ):
        journal = journal_of(DurablePostgresSaver(conn, pipe))
        assert isinstance(journal, EffectJournal)
        assert journal.claim(key, "send", "h", 30, None) == 1
        assert journal.claim(key, "send", "h", 30, None) is None
        assert journal.complete(key, 1, "sent")
        assert not journal.complete(key, 1, "again")  # completed already: not running
        row = journal.get(key)
    assert row is not None
    assert row.status is EffectStatus.COMPLETED


async def test_async_claims_and_completions_count_right_on_a_connection_in_pipeline_mode(
    dsn: str,
) -> None:
    key = f"piped-{uuid.uuid4()}"
    async with (
        await psycopg.AsyncConnection.connect(dsn, autocommit=True, row_factory=dict_row) as conn,
        conn.pipeline() as pipe,
    ):
        journal = journal_of(AsyncDurablePostgresSaver(conn, pipe))
        assert isinstance(journal, AsyncEffectJournal)
        assert await journal.aclaim(key, "send", "h", 30, None) == 1
        assert await journal.aclaim(key, "send", "h", 30, None) is None
        assert await journal.acomplete(key, 1, "sent")
        assert not await journal.acomplete(key, 1, "again")
        row = await journal.aget(key)
    assert row is not None
    assert row.status is EffectStatus.COMPLETED
