"""Reads fetch plain tuples and name their columns (`_core.TUPLE_COLUMNS`): the names must
follow the statement, and the rare path that reads a second statement on the same cursor
(pending sends of checkpoints older than format v4) must read tuples too."""

from __future__ import annotations

from typing import Any

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.constants import TASKS
from psycopg.rows import dict_row

from langgraph_durable import AsyncDurablePostgresSaver, DurablePostgresSaver
from langgraph_durable._db import CONNECTION_KWARGS
from langgraph_durable._sql import QUERIES
from langgraph_durable.checkpoint._core import TUPLE_COLUMNS


def test_tuple_columns_name_the_statements_columns_in_order(
    db_dsn: str, saver: DurablePostgresSaver
) -> None:
    """`saver` makes the tables."""
    for name in ("select_tuple_exact", "select_tuple_latest"):
        with psycopg.connect(db_dsn, **CONNECTION_KWARGS) as conn:
            cur = conn.execute(
                QUERIES[name], {"thread_id": "none", "checkpoint_ns": "", "checkpoint_id": "x"}
            )
            assert cur.description is not None
            assert tuple(column.name for column in cur.description) == TUPLE_COLUMNS, name


def _old_thread(dsn: str, thread: str) -> RunnableConfig:
    """A child checkpoint of format v3 whose parent holds two pending sends, written by
    upstream; returns the child's config."""
    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
        upstream = PostgresSaver(conn)
        parent = empty_checkpoint()
        parent["v"] = 3
        config: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        parent_config = upstream.put(config, parent, {"source": "loop", "step": 0}, {})
        upstream.put_writes(parent_config, [(TASKS, "send one"), (TASKS, "send two")], "task-1")
        child = empty_checkpoint()
        child["v"] = 3
        child_config = upstream.put(parent_config, child, {"source": "loop", "step": 1}, {})
    return child_config


def _upstream_view(dsn: str, config: RunnableConfig) -> tuple[Any, Any]:
    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
        found = PostgresSaver(conn).get_tuple(config)
    assert found is not None
    return found.checkpoint["channel_values"].get(TASKS), found.checkpoint["channel_versions"]


async def test_old_pending_sends_read_as_upstream_reads_them(fresh_db_dsn: str) -> None:
    with psycopg.connect(fresh_db_dsn, autocommit=True, row_factory=dict_row) as conn:
        PostgresSaver(conn).setup()
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as ours:
        ours.setup()
        config = _old_thread(fresh_db_dsn, "old-sends")
        sends, versions = _upstream_view(fresh_db_dsn, config)
        assert sends == ["send one", "send two"]
        latest: RunnableConfig = {"configurable": {"thread_id": "old-sends"}}
        for found in (ours.get_tuple(config), ours.get_tuple(latest), next(ours.list(latest))):
            assert found is not None
            assert found.checkpoint["channel_values"].get(TASKS) == sends
            assert set(found.checkpoint["channel_versions"]) == set(versions)
    async with AsyncDurablePostgresSaver.from_conn_string(fresh_db_dsn) as aours:
        found = await aours.aget_tuple(config)
        listed = [item async for item in aours.alist(latest)]
    assert found is not None
    assert found.checkpoint["channel_values"].get(TASKS) == sends
    assert listed[0].checkpoint["channel_values"].get(TASKS) == sends
