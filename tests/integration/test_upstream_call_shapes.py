"""Programs written for langgraph-checkpoint-postgres run unchanged on ours.

Each test is spelled exactly as upstream's documentation and signatures allow; the
public surface as a whole is compared in `tests/unit/test_dropin_surface.py`.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from graphs import linear_graph
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg.rows import dict_row

from langgraph_durable import AsyncDurablePostgresSaver, DurablePostgresSaver


def build(checkpointer: Any) -> Any:
    return linear_graph(("a", "b")).compile(checkpointer=checkpointer)


async def test_await_setup_on_the_async_saver(fresh_db_dsn: str) -> None:
    """As LangGraph's docs teach: `await checkpointer.setup()`."""
    async with AsyncDurablePostgresSaver.from_conn_string(fresh_db_dsn) as checkpointer:
        await checkpointer.setup()
        graph = build(checkpointer)
        out = await graph.ainvoke({"log": []}, {"configurable": {"thread_id": "t"}})
    assert out["log"] == ["a", "b"]


def test_from_conn_string_with_pipeline(db_dsn: str) -> None:
    with DurablePostgresSaver.from_conn_string(db_dsn, pipeline=True) as checkpointer:
        checkpointer.setup()
        out = build(checkpointer).invoke({"log": []}, {"configurable": {"thread_id": "p1"}})
    assert out["log"] == ["a", "b"]


async def test_async_from_conn_string_with_pipeline_and_serde(db_dsn: str) -> None:
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    async with AsyncDurablePostgresSaver.from_conn_string(
        db_dsn, pipeline=False, serde=JsonPlusSerializer()
    ) as checkpointer:
        await checkpointer.setup()
        out = await build(checkpointer).ainvoke({"log": []}, {"configurable": {"thread_id": "p2"}})
    assert out["log"] == ["a", "b"]


def test_a_connection_and_its_pipeline_passed_positionally(db_dsn: str) -> None:
    """`PostgresSaver(conn, pipe)`: calls on a pipelined connection, errors at their call."""
    with psycopg.connect(db_dsn, autocommit=True, row_factory=dict_row) as conn:
        DurablePostgresSaver(conn).setup()
        with conn.pipeline() as pipe:
            checkpointer = DurablePostgresSaver(conn, pipe)
            assert checkpointer.pipe is pipe
            graph = build(checkpointer)
            config = {"configurable": {"thread_id": "pipe-1"}}
            assert graph.invoke({"log": []}, config)["log"] == ["a", "b"]
            assert graph.get_state(config).values["log"] == ["a", "b"]
            assert len(list(checkpointer.list(config))) == 4


def test_a_pipeline_with_a_pool_is_refused(db_dsn: str) -> None:
    from langgraph_durable import ConfigurationError

    with (
        DurablePostgresSaver.from_conn_string(db_dsn) as pooled,
        psycopg.connect(db_dsn) as conn,
        conn.pipeline() as pipe,
        pytest.raises(ConfigurationError, match="single connection"),
    ):
        DurablePostgresSaver(pooled.conn, pipe)  # type: ignore[arg-type]


@pytest.mark.parametrize("flavor", ["sync", "async"])
async def test_a_checkpoint_stored_without_channel_values_loads_empty(
    fresh_db_dsn: str, flavor: str
) -> None:
    """Rows written by older upstream versions have no `channel_values` key at all."""
    with PostgresSaver.from_conn_string(fresh_db_dsn) as upstream:
        upstream.setup()
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as ours:
        ours.setup()
    checkpoint = {
        "v": 1,
        "id": "1ef4f797-8335-6428-8001-8a1503f9b875",
        "ts": "2024-05-04T06:32:42.235444+00:00",
        "channel_versions": {"log": "00000000000000000000000000000001.0"},
        "versions_seen": {},
        "pending_sends": [],
    }
    with psycopg.connect(fresh_db_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, checkpoint, "
            "metadata) VALUES ('old', '', %s, %s, '{}')",
            (checkpoint["id"], json.dumps(checkpoint)),
        )
    config: Any = {"configurable": {"thread_id": "old"}}
    if flavor == "sync":
        with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
            found = saver.get_tuple(config)
            listed = list(saver.list(config))
            state = build(saver).get_state(config)
    else:
        async with AsyncDurablePostgresSaver.from_conn_string(fresh_db_dsn) as asaver:
            found = await asaver.aget_tuple(config)
            listed = [t async for t in asaver.alist(config)]
            state = await build(asaver).aget_state(config)
    assert found is not None
    assert found.checkpoint["channel_values"] == {}
    assert [t.checkpoint["channel_values"] for t in listed] == [{}]
    with PostgresSaver.from_conn_string(fresh_db_dsn) as upstream:
        theirs = upstream.get_tuple(config)
        their_state = build(upstream).get_state(config)
    assert theirs is not None
    assert theirs.checkpoint["channel_values"] == found.checkpoint["channel_values"]
    assert state.values == their_state.values


def test_a_connection_without_autocommit_is_refused_before_anything_is_written(
    db_dsn: str,
) -> None:
    """On it nothing would ever commit: puts would report success, and an effect's journal
    row would not be committed before the effect runs (I1). Pools may do without
    autocommit: their `connection()` commits (tests/integration/test_pool_transactions.py)."""
    from langgraph_durable import ConfigurationError, EffectJournal

    with psycopg.connect(db_dsn, row_factory=dict_row) as conn:
        for make in (DurablePostgresSaver, EffectJournal):
            with pytest.raises(ConfigurationError, match="autocommit=True"):
                make(conn)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


async def test_an_async_connection_without_autocommit_is_refused(db_dsn: str) -> None:
    from langgraph_durable import AsyncEffectJournal, ConfigurationError

    async with await psycopg.AsyncConnection.connect(db_dsn, row_factory=dict_row) as conn:
        for make in (AsyncDurablePostgresSaver, AsyncEffectJournal):
            with pytest.raises(ConfigurationError, match="autocommit=True"):
                make(conn)
