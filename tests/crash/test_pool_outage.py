"""A long outage under a saver's pool: named errors during it, working calls right after.

A private embedded Postgres (its own data directory: stopping it touches no one else) is
stopped under a saver opened with `from_conn_string`. Calls made while it is down fail with
`PoolTimeoutError` (a `DatabaseUnreachableError`) naming the server and never the password,
once the configured `pool_timeout` has passed: not twice that (a lost connection used to be
retried after a pool timeout too), and not a raw psycopg_pool `PoolTimeout`.

The outage is then made long, measured by the pool's own failed attempts rather than by
the clock: left alone, psycopg_pool's pause between attempts doubles (1, 2, 4, 8, 16 s...),
so after half a minute a server that came back went unnoticed for up to as long again, and
calls failed although it answered. Once the pool has failed `LONG_OUTAGE_ATTEMPTS` times
(a pool with psycopg_pool's own settings did not get there within 240 s: its pauses had
grown too long), the server is started again and the very next call must succeed within
its `pool_timeout`.

A run cut by an outage: the error is named, what is committed is the checkpoint before the
step that was running, and `invoke(None)` after the restart finishes the run.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from psycopg.conninfo import make_conninfo

from langgraph_durable import (
    AsyncDurablePostgresSaver,
    DatabaseUnreachableError,
    DurablePostgresSaver,
    PoolTimeoutError,
)
from langgraph_durable._db import describe_dsn, source_of
from langgraph_durable.embedded import EmbeddedPostgres, start_embedded_postgres

pytestmark = pytest.mark.crash

PASSWORD = "not-to-be-shown-4711"
POOL_TIMEOUT = 5.0  # seconds a call waits for a connection: the configured wait
LONG_OUTAGE_ATTEMPTS = 20
HANG_GUARD_S = 240


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # Not pytest's tmp_path: as root, pgserver opens up the parents of its data dir.
    path = Path(tempfile.mkdtemp(prefix="langgraph-durable-pg-pool-outage-"))
    try:
        yield path / "pgdata"
    finally:
        shutil.rmtree(path, ignore_errors=True)


@asynccontextmanager
async def saver_of(flavor: str, dsn: str) -> AsyncIterator[Any]:
    if flavor == "sync":
        with DurablePostgresSaver.from_conn_string(dsn, pool_timeout=POOL_TIMEOUT) as saver:
            saver.setup()
            yield saver
    else:
        async with AsyncDurablePostgresSaver.from_conn_string(
            dsn, pool_timeout=POOL_TIMEOUT
        ) as asaver:
            await asaver.setup()
            yield asaver


async def get_tuple(saver: Any, config: Any) -> Any:
    if isinstance(saver, AsyncDurablePostgresSaver):
        return await saver.aget_tuple(config)
    return saver.get_tuple(config)


async def put(saver: Any, config: Any) -> Any:
    if isinstance(saver, AsyncDurablePostgresSaver):
        return await saver.aput(config, empty_checkpoint(), {}, {})
    return saver.put(config, empty_checkpoint(), {}, {})


async def invoke(graph: Any, flavor: str, inputs: Any, config: Any) -> Any:
    if flavor == "sync":
        return graph.invoke(inputs, config, durability="sync")
    return await graph.ainvoke(inputs, config, durability="sync")


def failed_attempts(saver: Any) -> int:
    return int(source_of(saver).conn.get_stats().get("connections_errors", 0))


@pytest.mark.parametrize("flavor", ["sync", "async"])
async def test_an_outage_fails_calls_by_name_and_the_pool_finds_the_server_again(
    data_dir: Path, flavor: str
) -> None:
    pg: EmbeddedPostgres = start_embedded_postgres(data_dir)
    try:
        dsn = make_conninfo(pg.dsn, password=PASSWORD)  # trust auth: accepted, unused
        config = {"configurable": {"thread_id": f"outage-{flavor}", "checkpoint_ns": ""}}
        async with saver_of(flavor, dsn) as saver:
            stored = await put(saver, config)

            pg.stop()
            for attempt in (get_tuple(saver, stored), put(saver, config)):
                with pytest.raises(PoolTimeoutError) as error:
                    await attempt
                message = str(error.value)
                assert isinstance(error.value, DatabaseUnreachableError)
                assert describe_dsn(dsn) in message
                assert "cannot be reached" in message
                assert PASSWORD not in message
                assert f"within {POOL_TIMEOUT:g} s" in message

            # A long outage, by the pool's count of failed attempts (not a sleep).
            deadline = time.monotonic() + HANG_GUARD_S
            while failed_attempts(saver) < LONG_OUTAGE_ATTEMPTS:
                assert time.monotonic() < deadline, "the pool stopped trying to reconnect"
                await asyncio.sleep(0.1)  # a poll interval, not a synchronisation

            pg = start_embedded_postgres(data_dir)
            back = time.monotonic()
            found = await get_tuple(saver, stored)
            recovered = time.monotonic() - back
            assert found is not None
            assert (
                found.config["configurable"]["checkpoint_id"]
                == (stored["configurable"]["checkpoint_id"])
            )
            await put(saver, config)
            print(
                f"{flavor}: {failed_attempts(saver)} failed attempts during the outage; "
                f"first call after the restart answered in {recovered:.2f} s"
            )
    finally:
        pg.stop()


@pytest.mark.parametrize("flavor", ["sync", "async"])
async def test_a_run_cut_by_an_outage_fails_by_name_and_resumes_where_it_stopped(
    data_dir: Path, flavor: str
) -> None:
    """The server stops while node b runs. The run fails with `PoolTimeoutError`; what is
    committed is the checkpoint after a; b's result was not (it runs again on resume,
    `next == ("b",)`); `invoke(None)` after the restart finishes the run."""
    from graphs import State
    from langgraph.graph import END, START, StateGraph

    pg: EmbeddedPostgres = start_embedded_postgres(data_dir)
    ran: list[str] = []

    def b(state: dict[str, Any]) -> dict[str, Any]:
        ran.append("b")
        if len(ran) == 1:
            pg.stop()
        return {"log": ["b"]}

    builder = StateGraph(State)
    builder.add_node("a", lambda s: {"log": ["a"]})
    builder.add_node("b", b)
    builder.add_node("c", lambda s: {"log": ["c"]})
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    builder.add_edge("c", END)
    config: Any = {"configurable": {"thread_id": f"cut-{flavor}"}}
    try:
        async with saver_of(flavor, pg.dsn) as saver:
            graph = builder.compile(checkpointer=saver)
            with pytest.raises(PoolTimeoutError):
                await invoke(graph, flavor, {"log": []}, config)
            pg = start_embedded_postgres(data_dir)
            if flavor == "sync":
                state = graph.get_state(config)
            else:
                state = await graph.aget_state(config)
            done = await invoke(graph, flavor, None, config)
            assert state.values["log"] == ["a"]
            assert state.next == ("b",)
            assert done["log"] == ["a", "b", "c"]
            assert ran == ["b", "b"]
    finally:
        pg.stop()
