"""Runs on a pool made as `ConnectionPool(dsn)` makes it: tuple rows, no autocommit."""

from __future__ import annotations

import uuid

from graphs import linear_graph
from psycopg_pool import ConnectionPool

from langgraph_durable import DurablePostgresSaver, GraphVersion, RunRegistry, RunStatus, Worker

GUARD_S = 60  # only a guard against a hang: a notification arrives at once


def test_a_worker_on_a_pool_without_autocommit_hears_new_runs(fresh_db_dsn: str) -> None:
    """LISTEN takes effect at commit: run inside the transaction a pool's connection
    without autocommit opens, it heard nothing, and new runs waited for `idle_wait`."""
    with ConnectionPool(fresh_db_dsn, min_size=1, max_size=3, open=True) as pool:
        saver = DurablePostgresSaver(pool)  # type: ignore[arg-type]
        saver.setup()
        runs = RunRegistry(saver)
        graph = GraphVersion("plain", "1", linear_graph(("a",)).compile(checkpointer=saver))
        with runs.listening() as conn:
            assert conn is not None
            run = runs.create(graph, {"log": []}, thread_id=f"plain-{uuid.uuid4()}")
            heard = list(conn.notifies(timeout=GUARD_S, stop_after=1))
        assert len(heard) == 1
        (done,) = Worker(saver, [graph]).run_until_idle()
        assert (done.run_id, done.status) == (run.run_id, RunStatus.SUCCESS)
