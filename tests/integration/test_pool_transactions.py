"""A caller's pool whose connections are not in autocommit mode still gets every write
committed: the connection source commits each call (`with conn`) on such connections and
skips that step only for autocommit ones. Checked from another connection, so a write left
in an open transaction (rolled back when the pool takes the connection back) would show
up as missing."""

from __future__ import annotations

from typing import Any

import pytest
from _pg import thread_rows
from graphs import linear_graph
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from langgraph_durable import AsyncDurablePostgresSaver, DurablePostgresSaver

NODES = ("a", "b", "c")
NOT_AUTOCOMMIT: dict[str, Any] = {
    "min_size": 1,
    "max_size": 2,
    "kwargs": {"autocommit": False, "row_factory": dict_row},
}


@pytest.fixture(scope="module")
def ready_dsn(db_dsn: str) -> str:
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
    return db_dsn


def test_a_sync_pool_without_autocommit_commits_every_step(ready_dsn: str) -> None:
    with ConnectionPool(ready_dsn, open=True, **NOT_AUTOCOMMIT) as pool:
        graph = linear_graph(NODES).compile(checkpointer=DurablePostgresSaver(pool))
        config: Any = {"configurable": {"thread_id": "no-autocommit-sync"}}
        assert graph.invoke({"log": []}, config, durability="sync")["log"] == list(NODES)
    rows = thread_rows(ready_dsn, "no-autocommit-sync")
    assert rows["checkpoints"] == len(NODES) + 2  # the input, each node, the end
    assert rows["checkpoint_writes"] >= len(NODES)


async def test_an_async_pool_without_autocommit_commits_every_step(ready_dsn: str) -> None:
    async with AsyncConnectionPool(ready_dsn, open=False, **NOT_AUTOCOMMIT) as pool:
        graph = linear_graph(NODES).compile(checkpointer=AsyncDurablePostgresSaver(pool))
        config: Any = {"configurable": {"thread_id": "no-autocommit-async"}}
        result = await graph.ainvoke({"log": []}, config, durability="sync")
        assert result["log"] == list(NODES)
    rows = thread_rows(ready_dsn, "no-autocommit-async")
    assert rows["checkpoints"] == len(NODES) + 2
    assert rows["checkpoint_writes"] >= len(NODES)
