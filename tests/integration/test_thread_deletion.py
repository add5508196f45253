"""Pruning and deleting threads while they may be running, waiting or acting."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from psycopg.rows import dict_row

from langgraph_durable import DurablePostgresSaver
from langgraph_durable._sql import QUERIES
from langgraph_durable.checkpoint._saver import _prune_namespace


def put_version(saver: DurablePostgresSaver, config: RunnableConfig, version: int) -> Any:
    """A checkpoint after `config` whose channel `big` (a blob) is at `version`."""
    checkpoint = empty_checkpoint()
    checkpoint["ts"] = datetime.now(timezone.utc).isoformat()
    checkpoint["channel_values"] = {"big": {"payload": [version] * 5}}
    checkpoint["channel_versions"] = {"big": str(version)}
    return saver.put(config, checkpoint, {}, {"big": str(version)})


def test_keep_latest_keeps_a_checkpoint_committed_after_it_read_the_heads(db_dsn: str) -> None:
    """A running thread commits its next checkpoint between the prune's reading of the heads
    and its delete: that checkpoint, its writes and the blob only it names must stay."""
    thread = f"prune-race-{uuid.uuid4()}"
    root: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
        first = put_version(saver, root, 1)
        head = put_version(saver, first, 2)
        with psycopg.connect(db_dsn, row_factory=dict_row) as conn, conn.transaction():
            conn.execute(QUERIES["lock_thread"], {"thread_id": thread})
            heads = conn.execute(QUERIES["thread_heads"], {"thread_id": thread}).fetchall()
            assert [h["checkpoint_id"] for h in heads] == [head["configurable"]["checkpoint_id"]]
            # The thread goes on between the two statements of the prune.
            newest = put_version(saver, head, 3)
            saver.put_writes(newest, [("ch", "v")], "task")
            for found in heads:
                _prune_namespace(conn, thread, found)
        latest = saver.get_tuple({"configurable": {"thread_id": thread}})
        assert latest is not None
        assert (
            latest.config["configurable"]["checkpoint_id"]
            == (newest["configurable"]["checkpoint_id"])
        )
        assert latest.checkpoint["channel_values"]["big"] == {"payload": [3] * 5}
        assert latest.pending_writes == [("task", "ch", "v")]
        left = [c.config["configurable"]["checkpoint_id"] for c in saver.list(root)]
        assert left == [
            newest["configurable"]["checkpoint_id"],
            head["configurable"]["checkpoint_id"],
        ]
        kept = saver.get_tuple(head)
        assert kept is not None
        assert kept.parent_config is None  # its parent was pruned
