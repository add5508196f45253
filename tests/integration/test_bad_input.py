"""Bad input never loses committed data (invariant I8), for both saver classes.

Every rejection is a named exception raised before anything is written, which the tests
check by comparing the full contents of the three checkpoint tables before and after.
Values Postgres cannot hold in TEXT/JSONB (NUL characters, NaN and infinities) must
round-trip anyway; ids that look like SQL must be stored as data. Using the wrong class
for the way a graph runs fails with a message that names the fix, and a server restart
costs one reconnect, not the process.

Most tests run once per class through `Flavor`, which awaits the async saver directly and
runs the sync saver's methods in a worker thread, so each class runs its own code path.
"""

from __future__ import annotations

import asyncio
import math
import operator
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import AsyncExitStack, ExitStack
from typing import Annotated, Any

import psycopg
import pytest
from _pg import create_database, drop_database
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    empty_checkpoint,
)
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, ConnectionPool
from typing_extensions import TypedDict

from langgraph_durable import (
    AsyncDurablePostgresSaver,
    DatabaseUnreachableError,
    DurablePostgresSaver,
    InvalidInputError,
    InvalidThreadIdError,
    TargetThreadNotEmptyError,
    UnknownPruneStrategyError,
    UnserializableValueError,
    WrongSaverClassError,
)

TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
INJECTION = "x'); DROP TABLE checkpoints; --"
INJECTION_NS = "ns'\"; DROP TABLE checkpoint_blobs; --"
NUL_ID = "thread\x00id"
UNREACHABLE = "postgresql://postgres@127.0.0.1:1/postgres"


# ---------------------------------------------------------------------------------------
# Database and savers
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dsn(pg_server_dsn: str) -> Iterator[str]:
    """A database with the schema, shared by this module's tests."""
    name, dsn = create_database(pg_server_dsn)
    try:
        with DurablePostgresSaver.from_conn_string(dsn) as saver:
            saver.setup()
        yield dsn
    finally:
        drop_database(pg_server_dsn, name)


Rows = dict[str, list[tuple[Any, ...]]]


def table_rows(dsn: str) -> Rows:
    """Every row of the three checkpoint tables, in a stable order."""
    with psycopg.connect(dsn) as conn:
        return {
            table: sorted(
                conn.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(table))).fetchall(),
                key=repr,
            )
            for table in TABLES
        }


def thread_rows(dsn: str, thread_id: str) -> Rows:
    with psycopg.connect(dsn) as conn:
        return {
            table: sorted(
                conn.execute(
                    sql.SQL("SELECT * FROM {} WHERE thread_id = %s").format(sql.Identifier(table)),
                    [thread_id],
                ).fetchall(),
                key=repr,
            )
            for table in TABLES
        }


class State(TypedDict, total=False):
    value: Any
    log: Annotated[list[str], operator.add]


Graph = CompiledStateGraph[Any, Any, Any, Any]


def one_node_graph(saver: BaseCheckpointSaver[Any], node: Any) -> Graph:
    builder = StateGraph(State)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    builder.add_edge("node", END)
    return builder.compile(checkpointer=saver)


def ran(state: State) -> dict[str, Any]:
    return {"log": ["ran"]}


class Flavor:
    """One awaitable interface over both classes.

    The async saver is awaited on the test's loop; the sync saver's methods run in a worker
    thread, as they would under `invoke` in an application.
    """

    def __init__(
        self,
        name: str,
        sync: DurablePostgresSaver | None = None,
        aio: AsyncDurablePostgresSaver | None = None,
    ) -> None:
        self.name = name
        self.sync = sync
        self.aio = aio

    @property
    def saver(self) -> BaseCheckpointSaver[Any]:
        saver = self.sync or self.aio
        assert saver is not None
        return saver

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if self.aio is not None:
            result: Any = await getattr(self.aio, "a" + method)(*args, **kwargs)
            return result
        return await asyncio.to_thread(getattr(self.sync, method), *args, **kwargs)

    async def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        versions: ChannelVersions,
    ) -> RunnableConfig:
        result: RunnableConfig = await self._call("put", config, checkpoint, metadata, versions)
        return result

    async def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str
    ) -> None:
        await self._call("put_writes", config, writes, task_id)

    async def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        result: CheckpointTuple | None = await self._call("get_tuple", config)
        return result

    async def list(self, config: RunnableConfig | None, **kwargs: Any) -> list[CheckpointTuple]:
        if self.aio is not None:
            return [t async for t in self.aio.alist(config, **kwargs)]
        sync = self.sync
        assert sync is not None
        return await asyncio.to_thread(lambda: list(sync.list(config, **kwargs)))

    async def delete_thread(self, thread_id: str) -> None:
        await self._call("delete_thread", thread_id)

    async def copy_thread(self, source: str, target: str) -> None:
        await self._call("copy_thread", source, target)

    async def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self._call("prune", thread_ids, strategy=strategy)

    async def delta_history(self, config: RunnableConfig, channels: Sequence[str]) -> Any:
        return await self._call("get_delta_channel_history", config=config, channels=channels)

    async def invoke(
        self, graph: Graph, value: Any, config: RunnableConfig, **kwargs: Any
    ) -> dict[str, Any]:
        if self.aio is not None:
            result: dict[str, Any] = await graph.ainvoke(value, config, **kwargs)
            return result
        result = await asyncio.to_thread(lambda: graph.invoke(value, config, **kwargs))
        return dict(result)

    async def state(self, graph: Graph, config: RunnableConfig) -> dict[str, Any]:
        if self.aio is not None:
            snapshot = await graph.aget_state(config)
        else:
            snapshot = await asyncio.to_thread(graph.get_state, config)
        return dict(snapshot.values)


@pytest.fixture(params=["sync", "async"])
async def flavor(request: pytest.FixtureRequest, dsn: str) -> AsyncIterator[Flavor]:
    if request.param == "async":
        async with AsyncDurablePostgresSaver.from_conn_string(dsn) as aio:
            yield Flavor("async", aio=aio)
    else:
        with DurablePostgresSaver.from_conn_string(dsn) as sync:
            yield Flavor("sync", sync=sync)


def cfg(thread_id: str, checkpoint_ns: str | None = None, **extra: Any) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id, **extra}
    if checkpoint_ns is not None:
        configurable["checkpoint_ns"] = checkpoint_ns
    return {"configurable": configurable}


def checkpoint_with(
    saver: BaseCheckpointSaver[Any], values: dict[str, Any]
) -> tuple[Checkpoint, ChannelVersions]:
    """A fresh checkpoint holding `values`, and the new versions to store them under."""
    checkpoint = empty_checkpoint()
    checkpoint["v"] = 4
    versions: ChannelVersions = {ch: saver.get_next_version(None, None) for ch in values}
    checkpoint["channel_values"] = dict(values)
    checkpoint["channel_versions"] = dict(versions)
    return checkpoint, versions


def same(a: Any, b: Any) -> bool:
    """Equality that treats NaN as equal to NaN and checks types, recursively."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return set(a) == set(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


async def rejected_without_writing(
    dsn: str, action: Awaitable[Any], error: type[Exception], *needles: str
) -> str:
    """Await `action`, expect `error` with `needles` in its message, and no row changed."""
    before = table_rows(dsn)
    with pytest.raises(error) as info:
        await action
    message = str(info.value)
    for needle in needles:
        assert needle in message, message
    after = table_rows(dsn)
    changed = {t: {repr(r) for r in after[t]} ^ {repr(r) for r in before[t]} for t in TABLES}
    assert after == before, f"a rejected call changed the checkpoint tables: {changed}"
    return message


# ---------------------------------------------------------------------------------------
# Values the serializer cannot handle
# ---------------------------------------------------------------------------------------


async def test_unserializable_channel_value_names_the_channel(flavor: Flavor, dsn: str) -> None:
    checkpoint, versions = checkpoint_with(
        flavor.saver, {"fine": ["kept?"], "locked": threading.Lock()}
    )
    await rejected_without_writing(
        dsn,
        flavor.put(cfg(f"unser-put-{flavor.name}", ""), checkpoint, {}, versions),
        UnserializableValueError,
        "'locked'",
        "nothing was written",
    )


async def test_unserializable_write_names_the_channel(flavor: Flavor, dsn: str) -> None:
    checkpoint, versions = checkpoint_with(flavor.saver, {})
    stored = await flavor.put(cfg(f"unser-write-{flavor.name}", ""), checkpoint, {}, versions)
    await rejected_without_writing(
        dsn,
        flavor.put_writes(stored, [("fine", 1), ("callback", lambda: None)], "task-1"),
        UnserializableValueError,
        "'callback'",
    )
    # What upstream's serializer raises: handlers written for upstream still catch it.
    assert issubclass(UnserializableValueError, TypeError)


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
async def test_node_returning_a_lock_fails_naming_the_channel(
    flavor: Flavor, dsn: str, durability: str
) -> None:
    thread = f"unser-node-{flavor.name}-{durability}"
    graph = one_node_graph(flavor.saver, lambda _: {"value": threading.Lock()})
    with pytest.raises(UnserializableValueError, match="'value'"):
        await flavor.invoke(graph, {"log": ["in"]}, cfg(thread), durability=durability)
    with psycopg.connect(dsn) as conn:
        stored = conn.execute(
            "SELECT count(*) FROM checkpoint_writes WHERE thread_id = %s AND channel = 'value'",
            [thread],
        ).fetchone()
    assert stored == (0,), "the unserializable write was stored"
    # What was saved before the failing step is intact and readable.
    assert "value" not in await flavor.state(graph, cfg(thread))


# Regression test: under durability='async' the node's put_writes against a checkpoint whose
# put was rejected in the background once left an orphan checkpoint_writes row.
@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
async def test_unserializable_graph_input_writes_nothing(
    flavor: Flavor, dsn: str, durability: str
) -> None:
    graph = one_node_graph(flavor.saver, ran)
    await rejected_without_writing(
        dsn,
        flavor.invoke(
            graph,
            {"value": threading.Lock()},
            cfg(f"unser-input-{flavor.name}-{durability}"),
            durability=durability,
        ),
        UnserializableValueError,
        "nothing was written",
    )


# Regression test: a bad input was once reported against LangGraph's '__start__' channel.
async def test_unserializable_graph_input_names_the_state_key(flavor: Flavor) -> None:
    graph = one_node_graph(flavor.saver, ran)
    with pytest.raises(UnserializableValueError, match="'value'"):
        await flavor.invoke(graph, {"value": threading.Lock()}, cfg(f"unser-key-{flavor.name}"))


# ---------------------------------------------------------------------------------------
# NUL characters, NaN and infinities
# ---------------------------------------------------------------------------------------

AWKWARD_VALUES: dict[str, Any] = {
    "nul_string": "a\x00b",
    "only_nul": "\x00",
    "nul_nested": {"k\x00ey": ["\x00", "x\x00y"], "n": 1},
    "nan": math.nan,
    "inf": math.inf,
    "minus_inf": -math.inf,
    "non_finite_list": [math.nan, math.inf, -math.inf, 1.5],
    "non_finite_dict": {"score": math.nan, "limit": math.inf},
}


async def test_awkward_channel_values_round_trip(flavor: Flavor) -> None:
    checkpoint, versions = checkpoint_with(flavor.saver, AWKWARD_VALUES)
    stored = await flavor.put(cfg(f"awkward-put-{flavor.name}", ""), checkpoint, {}, versions)
    found = await flavor.get_tuple(stored)
    assert found is not None
    assert same(found.checkpoint["channel_values"], AWKWARD_VALUES)


async def test_awkward_writes_round_trip(flavor: Flavor) -> None:
    checkpoint, versions = checkpoint_with(flavor.saver, {})
    stored = await flavor.put(cfg(f"awkward-writes-{flavor.name}", ""), checkpoint, {}, versions)
    writes = list(AWKWARD_VALUES.items())
    await flavor.put_writes(stored, writes, "task-\x01")
    found = await flavor.get_tuple(stored)
    assert found is not None
    assert same(found.pending_writes, [("task-\x01", ch, v) for ch, v in writes])


@pytest.mark.parametrize("key", list(AWKWARD_VALUES))
async def test_awkward_state_round_trips_through_a_graph(flavor: Flavor, key: str) -> None:
    """Input, a node's write of the same value, and the state read back: all exact."""
    value = AWKWARD_VALUES[key]
    config = cfg(f"awkward-graph-{flavor.name}-{key}")
    graph = one_node_graph(flavor.saver, lambda s: {"value": s["value"], "log": ["\x00"]})
    result = await flavor.invoke(graph, {"value": value}, config, durability="sync")
    assert same(result, {"value": value, "log": ["\x00"]})
    assert same(await flavor.state(graph, config), {"value": value, "log": ["\x00"]})


async def test_metadata_that_jsonb_cannot_hold_is_rejected(flavor: Flavor, dsn: str) -> None:
    """Metadata is JSONB (queried by `list(filter=...)`): NUL and NaN are named errors."""
    checkpoint, versions = checkpoint_with(flavor.saver, {})
    config = cfg(f"bad-metadata-{flavor.name}", "")
    nul: Any = {"tags": ["a\x00b"]}
    await rejected_without_writing(
        dsn, flavor.put(config, checkpoint, nul, versions), InvalidInputError, "NUL"
    )
    nan: Any = {"score": math.nan}
    await rejected_without_writing(
        dsn, flavor.put(config, checkpoint, nan, versions), UnserializableValueError
    )


# Regression test: a NUL in a write's channel name was once a bare psycopg DataError.
async def test_nul_in_a_write_channel_name_is_a_named_error(flavor: Flavor, dsn: str) -> None:
    checkpoint, versions = checkpoint_with(flavor.saver, {})
    stored = await flavor.put(cfg(f"nul-channel-{flavor.name}", ""), checkpoint, {}, versions)
    await rejected_without_writing(
        dsn, flavor.put_writes(stored, [("chan\x00nel", 1)], "task-1"), InvalidInputError
    )


# ---------------------------------------------------------------------------------------
# Thread ids and namespaces
# ---------------------------------------------------------------------------------------


def _nul_operations() -> dict[str, Callable[[Flavor], Awaitable[Any]]]:
    def put(ns: str | None, thread: str) -> Callable[[Flavor], Awaitable[Any]]:
        def run(f: Flavor) -> Awaitable[Any]:
            checkpoint, versions = checkpoint_with(f.saver, {"v": "x"})
            return f.put(cfg(thread, ns), checkpoint, {}, versions)

        return run

    return {
        "put": put("", NUL_ID),
        "put_namespace": put("sub\x00graph", "fine-thread"),
        "put_writes": lambda f: f.put_writes(cfg(NUL_ID, "", checkpoint_id="1"), [("c", 1)], "t"),
        "get_tuple": lambda f: f.get_tuple(cfg(NUL_ID)),
        "get_tuple_namespace": lambda f: f.get_tuple(cfg("fine-thread", "a\x00")),
        "list": lambda f: f.list(cfg(NUL_ID)),
        "delete_thread": lambda f: f.delete_thread(NUL_ID),
        "copy_thread_source": lambda f: f.copy_thread(NUL_ID, "fine-target"),
        "copy_thread_target": lambda f: f.copy_thread("fine-thread", NUL_ID),
        "prune": lambda f: f.prune([NUL_ID]),
        "delta_history": lambda f: f.delta_history(cfg(NUL_ID, "", checkpoint_id="1"), ["c"]),
        "graph": lambda f: f.invoke(one_node_graph(f.saver, ran), {"log": []}, cfg(NUL_ID)),
    }


NUL_OPERATIONS = _nul_operations()


@pytest.mark.parametrize("operation", list(NUL_OPERATIONS))
async def test_nul_in_thread_id_is_rejected_before_writing(
    flavor: Flavor, dsn: str, operation: str
) -> None:
    # A real thread the operations could touch if they got through.
    graph = one_node_graph(flavor.saver, ran)
    await flavor.invoke(graph, {"log": []}, cfg("fine-thread"))
    await rejected_without_writing(
        dsn, NUL_OPERATIONS[operation](flavor), InvalidThreadIdError, "NUL"
    )


async def test_ids_that_look_like_sql_are_stored_as_data(flavor: Flavor, dsn: str) -> None:
    thread = f"{INJECTION} {flavor.name}"
    graph = one_node_graph(flavor.saver, lambda s: {"value": s["value"] + "!", "log": ["ran"]})
    config = cfg(thread)
    await flavor.invoke(graph, {"value": "q'\"\\;"}, config, durability="sync")
    assert await flavor.state(graph, config) == {"value": "q'\"\\;!", "log": ["ran"]}
    listed = await flavor.list(config)
    assert listed
    assert {t.config["configurable"]["thread_id"] for t in listed} == {thread}

    # A namespace that looks like SQL, in the same thread.
    checkpoint, versions = checkpoint_with(flavor.saver, {"sub": "value"})
    stored = await flavor.put(cfg(thread, INJECTION_NS), checkpoint, {}, versions)
    assert stored["configurable"]["checkpoint_ns"] == INJECTION_NS
    found = await flavor.get_tuple(cfg(thread, INJECTION_NS))
    assert found is not None
    assert found.config["configurable"] == stored["configurable"]
    assert found.checkpoint["channel_values"] == {"sub": "value"}
    in_namespace = await flavor.list(cfg(thread, INJECTION_NS))
    assert [t.config for t in in_namespace] == [found.config]

    # Copy and delete address exactly these rows.
    copy = f"{thread} copy'"
    await flavor.copy_thread(thread, copy)
    assert await flavor.state(graph, cfg(copy)) == {"value": "q'\"\\;!", "log": ["ran"]}
    await flavor.delete_thread(thread)
    assert thread_rows(dsn, thread) == {table: [] for table in TABLES}
    assert await flavor.state(graph, cfg(copy)) == {"value": "q'\"\\;!", "log": ["ran"]}
    with psycopg.connect(dsn) as conn:
        for table in TABLES:
            row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", [table]).fetchone()
            assert row == (True,), f"{table} is gone"


# ---------------------------------------------------------------------------------------
# Operations refused
# ---------------------------------------------------------------------------------------


async def test_unknown_prune_strategy(flavor: Flavor, dsn: str) -> None:
    thread = f"prune-nope-{flavor.name}"
    graph = one_node_graph(flavor.saver, ran)
    await flavor.invoke(graph, {"log": []}, cfg(thread))
    await flavor.invoke(graph, {"log": []}, cfg(thread))
    await rejected_without_writing(
        dsn,
        flavor.prune([thread], strategy="nope"),
        UnknownPruneStrategyError,
        "'nope'",
        "keep_latest",
    )


async def test_copy_into_a_non_empty_thread_changes_nothing(flavor: Flavor, dsn: str) -> None:
    source, target = f"copy-src-{flavor.name}", f"copy-dst-{flavor.name}"
    graph = one_node_graph(flavor.saver, lambda s: {"value": s.get("value"), "log": ["ran"]})
    await flavor.invoke(graph, {"value": "source"}, cfg(source))
    await flavor.invoke(graph, {"value": "target"}, cfg(target))
    await rejected_without_writing(
        dsn, flavor.copy_thread(source, target), TargetThreadNotEmptyError, repr(target)
    )
    assert (await flavor.state(graph, cfg(target)))["value"] == "target"


# ---------------------------------------------------------------------------------------
# The wrong class for the way the graph runs
# ---------------------------------------------------------------------------------------


async def test_sync_saver_under_ainvoke_names_the_async_class(dsn: str) -> None:
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        graph = one_node_graph(saver, ran)
        with pytest.raises(WrongSaverClassError, match="AsyncDurablePostgresSaver"):
            await graph.ainvoke({"log": []}, cfg("wrong-class-sync"))
    assert thread_rows(dsn, "wrong-class-sync") == {table: [] for table in TABLES}


async def test_async_saver_sync_call_on_its_loop_says_to_await(dsn: str) -> None:
    async with AsyncDurablePostgresSaver.from_conn_string(dsn) as saver:
        with pytest.raises(WrongSaverClassError, match=r"await saver\.aget_tuple"):
            saver.get_tuple(cfg("wrong-class-async"))
        graph = one_node_graph(saver, ran)
        with pytest.raises(WrongSaverClassError, match="await"):
            graph.invoke({"log": []}, cfg("wrong-class-async"))
        # The same saver still works the right way.
        await graph.ainvoke({"log": []}, cfg("wrong-class-async"))
        assert await saver.aget_tuple(cfg("wrong-class-async")) is not None


# ---------------------------------------------------------------------------------------
# An unreachable server, a restarted server
# ---------------------------------------------------------------------------------------


# A refused connection fails at the first attempt with the driver's reason, not after a
# pool has retried quietly until connect_timeout (its PoolTimeout says only "within 2s").
# What proves it is where the error came from, not how long it took.
REFUSED = r"127\.0\.0\.1:1/postgres: .*Connection refused"


def assert_failed_at_first_attempt(error: DatabaseUnreachableError) -> None:
    assert isinstance(error.__cause__, psycopg.OperationalError), repr(error.__cause__)
    assert "within" not in str(error)


def test_unreachable_server_sync() -> None:
    with (
        pytest.raises(DatabaseUnreachableError, match=REFUSED) as caught,
        DurablePostgresSaver.from_conn_string(UNREACHABLE, connect_timeout=2),
    ):
        pass
    assert_failed_at_first_attempt(caught.value)


async def test_unreachable_server_async() -> None:
    with pytest.raises(DatabaseUnreachableError, match=REFUSED) as caught:
        async with AsyncDurablePostgresSaver.from_conn_string(UNREACHABLE, connect_timeout=2):
            pass
    assert_failed_at_first_attempt(caught.value)


def terminate_backends(server_dsn: str, dsn: str) -> int:
    """What a server restart does to a database's sessions; waits until they are gone."""
    name = conninfo_to_dict(dsn)["dbname"]
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            [name],
        ).fetchone()
        deadline = time.monotonic() + 60  # guards against a hang only
        while True:
            left = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [name]
            ).fetchone()
            if left == (0,):
                break
            if time.monotonic() > deadline:
                raise AssertionError("backends survived pg_terminate_backend")
            time.sleep(0.05)
    assert row is not None
    return int(row[0])


# Regression test (idle_connections=4): a restart kills every idle pooled connection, and
# the single retry once drew the next dead one and failed with AdminShutdown.
@pytest.mark.parametrize("idle_connections", [1, 4])
def test_server_restart_costs_one_reconnect_sync(
    pg_server_dsn: str, dsn: str, idle_connections: int
) -> None:
    config = cfg("restart-sync", "")
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        checkpoint, versions = checkpoint_with(saver, {"v": "before"})
        stored = saver.put(config, checkpoint, {}, versions)
        # Several calls at once leave several idle connections in the pool.
        pool = saver.conn
        assert isinstance(pool, ConnectionPool)
        with ExitStack() as stack:
            for _ in range(idle_connections):
                stack.enter_context(pool.connection())
        assert terminate_backends(pg_server_dsn, dsn) >= idle_connections
        found = saver.get_tuple(stored)
        assert found is not None
        assert found.checkpoint["channel_values"] == {"v": "before"}
        checkpoint, versions = checkpoint_with(saver, {"v": "after"})
        saver.put(config, checkpoint, {}, versions)
        latest = saver.get_tuple(config)
    assert latest is not None
    assert latest.checkpoint["channel_values"] == {"v": "after"}


@pytest.mark.parametrize("idle_connections", [1, 4])
async def test_server_restart_costs_one_reconnect_async(
    pg_server_dsn: str, dsn: str, idle_connections: int
) -> None:
    config = cfg("restart-async", "")
    async with AsyncDurablePostgresSaver.from_conn_string(dsn) as saver:
        checkpoint, versions = checkpoint_with(saver, {"v": "before"})
        stored = await saver.aput(config, checkpoint, {}, versions)
        pool = saver.conn
        assert isinstance(pool, AsyncConnectionPool)
        async with AsyncExitStack() as stack:
            for _ in range(idle_connections):
                await stack.enter_async_context(pool.connection())
        killed = await asyncio.to_thread(terminate_backends, pg_server_dsn, dsn)
        assert killed >= idle_connections
        found = await saver.aget_tuple(stored)
        assert found is not None
        assert found.checkpoint["channel_values"] == {"v": "before"}
        checkpoint, versions = checkpoint_with(saver, {"v": "after"})
        await saver.aput(config, checkpoint, {}, versions)
        latest = await saver.aget_tuple(config)
    assert latest is not None
    assert latest.checkpoint["channel_values"] == {"v": "after"}
