"""Runs on a pool made as `ConnectionPool(dsn)` makes it: tuple rows, no autocommit."""

from __future__ import annotations

import uuid

import pytest
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


def test_listening_ended_by_an_error_gives_the_connection_back_not_listening(
    fresh_db_dsn: str,
) -> None:
    """Without autocommit, the UNLISTEN was rolled back with the error that ended the
    listening, and the pool's connection went on hearing every run's NOTIFY."""
    # Two connections (a pool of one does not listen: it would hold the only one), both
    # looked at afterwards: whichever listened is back in the pool, not listening.
    with ConnectionPool(fresh_db_dsn, min_size=2, max_size=2, open=True) as pool:
        saver = DurablePostgresSaver(pool)  # type: ignore[arg-type]
        saver.setup()
        runs = RunRegistry(saver)

        def listen_then_fail() -> None:
            with runs.listening() as conn:
                assert conn is not None
                raise RuntimeError("the worker stopped listening on an error")

        with pytest.raises(RuntimeError):
            listen_then_fail()
        with pool.connection() as first, pool.connection() as second:
            listening = [
                conn.execute("SELECT count(*) FROM pg_listening_channels()").fetchone()
                for conn in (first, second)
            ]
        assert listening == [(0,), (0,)]
