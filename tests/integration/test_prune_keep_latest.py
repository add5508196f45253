"""What `prune(strategy="keep_latest")` keeps, against upstream's `PostgresSaver.prune`.

Upstream keeps, per namespace, the latest checkpoint (plus the parent it reads its pending
sends from when it predates format v4) with its writes and the blobs it names. Each
scenario runs on one thread per saver in one database, each saver prunes its own, and the
rows left must have the same shape (namespaces without their task ids).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.constants import TASKS
from psycopg import sql
from psycopg.rows import dict_row

from langgraph_durable import DurablePostgresSaver

TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


def shape(dsn: str, thread: str) -> dict[str, list[tuple[str, int]]]:
    """Rows per table and namespace, namespaces without task ids ("sub:1f0...|deep:..." is
    "sub|deep"), so threads of two savers compare."""
    found: dict[str, list[tuple[str, int]]] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in TABLES:
            query = sql.SQL(
                "SELECT checkpoint_ns, count(*) FROM {} WHERE thread_id = %s GROUP BY 1"
            ).format(sql.Identifier(table))
            rows = conn.execute(query, (thread,)).fetchall()
            counts: dict[str, int] = {}
            for ns, count in rows:
                bare = "|".join(part.split(":", 1)[0] for part in ns.split("|"))
                counts[bare] = counts.get(bare, 0) + count
            found[table] = sorted(counts.items())
    return found


@contextmanager
def both(dsn: str) -> Iterator[tuple[PostgresSaver, DurablePostgresSaver]]:
    with (
        PostgresSaver.from_conn_string(dsn) as upstream,
        DurablePostgresSaver.from_conn_string(dsn) as ours,
    ):
        ours.setup()
        upstream.setup()
        yield upstream, ours


# -- checkpoints older than format v4 --------------------------------------------------------


def old_thread(dsn: str, thread: str, *, sends: bool) -> RunnableConfig:
    """Three checkpoints of format v3 written by upstream; the middle one holds two pending
    sends as writes (if `sends`), which the latest reads as its own. Returns the latest."""
    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
        upstream = PostgresSaver(conn)
        config: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        for step in range(3):
            checkpoint = empty_checkpoint()
            checkpoint["v"] = 3
            checkpoint["channel_values"] = {"big": [step] * 5}
            checkpoint["channel_versions"] = {"big": str(step + 1)}
            metadata: Any = {"source": "loop", "step": step}
            config = upstream.put(config, checkpoint, metadata, {"big": str(step + 1)})
            if step == 1 and sends:
                upstream.put_writes(config, [(TASKS, "send one"), (TASKS, "send two")], "task")
    return config


@pytest.mark.parametrize("sends", [True, False])
def test_keep_latest_keeps_the_parent_an_old_checkpoint_reads_its_sends_from(
    fresh_db_dsn: str, sends: bool
) -> None:
    """Before format v4 a checkpoint's pending sends were its parent's writes: upstream keeps
    that parent (with its writes and blobs), so the latest still shows the sends. Before,
    ours deleted it and the sends were lost. A parent without sends goes."""
    with both(fresh_db_dsn) as (upstream, ours):
        views = {}
        for saver, thread in ((upstream, "up"), (ours, "ours")):
            latest = old_thread(fresh_db_dsn, thread, sends=sends)
            before = ours.get_tuple(latest)
            saver.prune([thread])
            after = ours.get_tuple(latest)
            assert before is not None
            assert after is not None
            assert after.checkpoint == before.checkpoint
            assert after.parent_config == (before.parent_config if sends else None)
            views[thread] = after
        assert shape(fresh_db_dsn, "ours") == shape(fresh_db_dsn, "up")
        left = {thread: view.checkpoint["channel_values"] for thread, view in views.items()}
        assert left["ours"] == left["up"]
        expected = ["send one", "send two"] if sends else None
        assert views["ours"].checkpoint["channel_values"].get(TASKS) == expected
        assert shape(fresh_db_dsn, "ours")["checkpoints"] == [("", 2 if sends else 1)]
