"""Drop-in compatibility with langgraph-checkpoint-postgres, both ways, on real graphs.

A thread written by upstream's `PostgresSaver` continues under `DurablePostgresSaver`, and
the other way round, sync and async. Each scenario has an interrupted thread that the other
saver resumes and a finished thread that the other saver takes into a new turn (which it
leaves interrupted for the first saver to resume). At every hand-over the two savers must
show the same state and history, and the final histories must look exactly like those of
the same operations run on one `InMemorySaver` (the oracle). Each side's `setup()` must
leave the other's migration rows alone.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Annotated, Any, Literal, TypedDict

import psycopg
import psycopg_pool
import pytest
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Durability, StateSnapshot, interrupt
from psycopg.rows import tuple_row

from langgraph_durable import AsyncDurablePostgresSaver, ConfigurationError, DurablePostgresSaver
from langgraph_durable._sql import MIGRATIONS

SaverKind = Literal["upstream", "ours"]
Graph = CompiledStateGraph[Any, Any, Any, Any]
Input = dict[str, Any] | Command[Any]

UPSTREAM_VERSIONS = [m.version for m in MIGRATIONS if m.series == "upstream"]
DURABLE_ROWS = [(m.version, m.name) for m in MIGRATIONS if m.series == "durable"]


# --- the graph -----------------------------------------------------------------------------


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    counter: int
    status: str


def greet(state: State) -> State:
    counter = state.get("counter", 0) + 1
    return {"messages": [AIMessage(f"hello #{counter}")], "counter": counter, "status": "greeted"}


def research(state: State) -> State:
    return {"messages": [AIMessage(f"research at {state['counter']}")]}


def draft(state: State) -> State:
    return {"messages": [AIMessage(f"draft at {state['counter']}")]}


def approve(state: State) -> State:
    answer = interrupt({"question": "send it?", "counter": state["counter"]})
    return {
        "messages": [HumanMessage(str(answer))],
        "counter": state["counter"] + 1,
        "status": "approved",
    }


def finish(state: State) -> State:
    return {
        "messages": [AIMessage(f"done at {state['counter']}")],
        "counter": state["counter"] + 1,
        "status": "done",
    }


def build_graph(checkpointer: BaseCheckpointSaver[Any]) -> Graph:
    """greet, then research and draft in parallel, then approve (interrupts), then finish."""
    builder = StateGraph(State)
    builder.add_node("greet", greet)
    builder.add_node("research", research)
    builder.add_node("draft", draft)
    builder.add_node("approve", approve)
    builder.add_node("finish", finish)
    builder.add_edge(START, "greet")
    builder.add_edge("greet", "research")
    builder.add_edge("greet", "draft")
    builder.add_edge(["research", "draft"], "approve")
    builder.add_edge("approve", "finish")
    builder.add_edge("finish", END)
    return builder.compile(checkpointer=checkpointer)


def config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


# --- the scenario --------------------------------------------------------------------------

INTERRUPTED = "t-interrupted"
FINISHED = "t-finished"

# Each thread's operations, in order; the phase (writer / reader / writer) is given below.
OPS: dict[str, list[Input]] = {
    INTERRUPTED: [{"messages": [HumanMessage("hi")]}, Command(resume="yes")],
    FINISHED: [
        {"messages": [HumanMessage("first")]},
        Command(resume="ship it"),
        {"messages": [HumanMessage("second")]},
        Command(resume="again"),
    ],
}
# How many of each thread's operations have run at the end of each phase.
PHASE_1 = {INTERRUPTED: 1, FINISHED: 2}  # writer
PHASE_2 = {INTERRUPTED: 2, FINISHED: 3}  # reader
PHASE_3 = {INTERRUPTED: 2, FINISHED: 4}  # writer again


def normalize_message(message: BaseMessage) -> tuple[str, str]:
    return (message.type, str(message.content))


def normalize(snapshot: StateSnapshot) -> dict[str, Any]:
    """What must match the oracle: everything but ids and timestamps."""
    values = dict(snapshot.values)
    values["messages"] = [normalize_message(m) for m in values.get("messages", [])]
    assert snapshot.metadata is not None
    return {
        "step": snapshot.metadata["step"],
        "source": snapshot.metadata["source"],
        "next": sorted(snapshot.next),
        "values": values,
        "tasks": sorted((t.name, [i.value for i in t.interrupts]) for t in snapshot.tasks),
        "interrupts": [i.value for i in snapshot.interrupts],
        "has_parent": snapshot.parent_config is not None,
    }


def oracle(
    done: dict[str, int], durability: Durability
) -> dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Normalized (state, history) per thread after `done` operations on one InMemorySaver."""
    graph = build_graph(InMemorySaver())
    result = {}
    for thread_id, count in done.items():
        for op in OPS[thread_id][:count]:
            graph.invoke(op, config(thread_id), durability=durability)
        result[thread_id] = (
            normalize(graph.get_state(config(thread_id))),
            [normalize(s) for s in graph.get_state_history(config(thread_id))],
        )
    return result


def check_history(history: Sequence[StateSnapshot]) -> None:
    """Newest first, each checkpoint's parent is the next one, steps go down, one root."""
    assert history
    for newer, older in itertools.pairwise(history):
        assert newer.parent_config is not None
        assert (
            newer.parent_config["configurable"]["checkpoint_id"]
            == (older.config["configurable"]["checkpoint_id"])
        )
        assert newer.metadata is not None
        assert older.metadata is not None
        assert newer.metadata["step"] > older.metadata["step"]
    assert history[-1].parent_config is None


Views = dict[str, tuple[StateSnapshot, list[StateSnapshot]]]


def check_phase(
    views: Views,
    done: dict[str, int],
    expected_next: dict[str, list[str]],
    durability: Durability,
) -> None:
    """The savers' view of every thread matches the oracle, with the expected next steps."""
    want = oracle(done, durability)
    for thread_id, (state, history) in views.items():
        check_history(history)
        assert sorted(state.next) == expected_next[thread_id], thread_id
        assert normalize(state) == want[thread_id][0], thread_id
        assert [normalize(s) for s in history] == want[thread_id][1], thread_id
        # get_state and the head of the history describe the same checkpoint.
        assert (
            state.config["configurable"]["checkpoint_id"]
            == (history[0].config["configurable"]["checkpoint_id"])
        )


def same_views(before: Views, after: Views) -> None:
    """What one saver wrote reads back identically through the other saver."""
    for thread_id, (state, history) in before.items():
        assert after[thread_id][0] == state, thread_id
        assert after[thread_id][1] == history, thread_id


AFTER_PHASE_1: dict[str, list[str]] = {INTERRUPTED: ["approve"], FINISHED: []}
AFTER_PHASE_2: dict[str, list[str]] = {INTERRUPTED: [], FINISHED: ["approve"]}
AFTER_PHASE_3: dict[str, list[str]] = {INTERRUPTED: [], FINISHED: []}


# --- migration rows ------------------------------------------------------------------------


def migration_rows(dsn: str) -> tuple[list[int], list[tuple[int, str]] | None]:
    """The rows of both version tables; None for ours when it does not exist."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        upstream = [r[0] for r in conn.execute("SELECT v FROM checkpoint_migrations ORDER BY v")]
        found = conn.execute("SELECT to_regclass('langgraph_durable_migrations') IS NOT NULL")
        exists = found.fetchone()
        if exists is None or not exists[0]:
            return upstream, None
        durable = [
            (int(r[0]), str(r[1]))
            for r in conn.execute("SELECT v, name FROM langgraph_durable_migrations ORDER BY v")
        ]
    return upstream, durable


def schema_fingerprint(dsn: str) -> list[tuple[str, ...]]:
    """Tables, columns and indexes of the public schema, to show that nothing changed."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        columns = conn.execute(
            "SELECT 'column', table_name, column_name, data_type, is_nullable,"
            " coalesce(column_default, '') FROM information_schema.columns"
            " WHERE table_schema = 'public'"
        ).fetchall()
        indexes = conn.execute(
            "SELECT 'index', tablename, indexname, indexdef FROM pg_indexes"
            " WHERE schemaname = 'public'"
        ).fetchall()
    return sorted(tuple(str(v) for v in row) for row in [*columns, *indexes])


# --- sync ----------------------------------------------------------------------------------


@contextmanager
def open_saver(kind: SaverKind, dsn: str) -> Iterator[BaseCheckpointSaver[Any]]:
    """Upstream with its defaults (one connection from `from_conn_string`), or ours."""
    if kind == "upstream":
        with PostgresSaver.from_conn_string(dsn) as upstream:
            yield upstream
    else:
        with DurablePostgresSaver.from_conn_string(dsn) as ours:
            yield ours


def run_ops(
    saver: BaseCheckpointSaver[Any],
    start: dict[str, int],
    end: dict[str, int],
    durability: Durability = "async",
) -> Views:
    """Run each thread's operations `start[t]:end[t]` on `saver`, then read every thread."""
    graph = build_graph(saver)
    for thread_id in OPS:
        for op in OPS[thread_id][start.get(thread_id, 0) : end[thread_id]]:
            graph.invoke(op, config(thread_id), durability=durability)
    return {
        thread_id: (
            graph.get_state(config(thread_id)),
            list(graph.get_state_history(config(thread_id))),
        )
        for thread_id in OPS
    }


def read_views(saver: BaseCheckpointSaver[Any]) -> Views:
    return run_ops(saver, {}, dict.fromkeys(OPS, 0))


DIRECTIONS = pytest.mark.parametrize(
    ("writer", "reader"), [("upstream", "ours"), ("ours", "upstream")]
)
DURABILITIES = pytest.mark.parametrize("durability", ["sync", "async", "exit"])


@DIRECTIONS
@DURABILITIES
def test_thread_changes_saver_sync(
    writer: SaverKind, reader: SaverKind, durability: Durability, fresh_db_dsn: str
) -> None:
    if writer == "upstream":
        with PostgresSaver.from_conn_string(fresh_db_dsn) as upstream:
            upstream.setup()
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as ours:
        ours.setup()

    with open_saver(writer, fresh_db_dsn) as saver:
        phase_1 = run_ops(saver, {}, PHASE_1, durability)
    check_phase(phase_1, PHASE_1, AFTER_PHASE_1, durability)

    with open_saver(reader, fresh_db_dsn) as saver:
        same_views(phase_1, read_views(saver))
        phase_2 = run_ops(saver, PHASE_1, PHASE_2, durability)
    check_phase(phase_2, PHASE_2, AFTER_PHASE_2, durability)

    with open_saver(writer, fresh_db_dsn) as saver:
        same_views(phase_2, read_views(saver))
        phase_3 = run_ops(saver, PHASE_2, PHASE_3, durability)
    check_phase(phase_3, PHASE_3, AFTER_PHASE_3, durability)

    # The run that the reader resumed carries the answer given to it.
    state, _ = phase_3[INTERRUPTED]
    assert [normalize_message(m) for m in state.values["messages"]][-2:] == [
        ("human", "yes"),
        ("ai", "done at 2"),
    ]
    assert state.values["counter"] == 3
    assert state.values["status"] == "done"


def test_our_setup_after_upstream_adds_only_our_rows_sync(fresh_db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(fresh_db_dsn) as upstream:
        upstream.setup()
    assert migration_rows(fresh_db_dsn) == (UPSTREAM_VERSIONS, None)

    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as ours:
        applied = ours.setup()
        ours.check_schema()
    assert applied == [name for _, name in DURABLE_ROWS]
    assert migration_rows(fresh_db_dsn) == (UPSTREAM_VERSIONS, DURABLE_ROWS)


def test_upstream_setup_after_ours_is_a_noop_sync(fresh_db_dsn: str) -> None:
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as ours:
        ours.setup()
    rows = migration_rows(fresh_db_dsn)
    schema = schema_fingerprint(fresh_db_dsn)
    assert rows == (UPSTREAM_VERSIONS, DURABLE_ROWS)

    with PostgresSaver.from_conn_string(fresh_db_dsn) as upstream:
        upstream.setup()
        upstream.setup()
    assert migration_rows(fresh_db_dsn) == rows
    assert schema_fingerprint(fresh_db_dsn) == schema


# --- async ---------------------------------------------------------------------------------


@asynccontextmanager
async def aopen_saver(kind: SaverKind, dsn: str) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    if kind == "upstream":
        async with AsyncPostgresSaver.from_conn_string(dsn) as upstream:
            yield upstream
    else:
        async with AsyncDurablePostgresSaver.from_conn_string(dsn) as ours:
            yield ours


async def arun_ops(
    saver: BaseCheckpointSaver[Any],
    start: dict[str, int],
    end: dict[str, int],
    durability: Durability = "async",
) -> Views:
    graph = build_graph(saver)
    for thread_id in OPS:
        for op in OPS[thread_id][start.get(thread_id, 0) : end[thread_id]]:
            await graph.ainvoke(op, config(thread_id), durability=durability)
    views: Views = {}
    for thread_id in OPS:
        state = await graph.aget_state(config(thread_id))
        history = [s async for s in graph.aget_state_history(config(thread_id))]
        views[thread_id] = (state, history)
    return views


async def aread_views(saver: BaseCheckpointSaver[Any]) -> Views:
    return await arun_ops(saver, {}, dict.fromkeys(OPS, 0))


@DIRECTIONS
@DURABILITIES
async def test_thread_changes_saver_async(
    writer: SaverKind, reader: SaverKind, durability: Durability, fresh_db_dsn: str
) -> None:
    if writer == "upstream":
        async with AsyncPostgresSaver.from_conn_string(fresh_db_dsn) as upstream:
            await upstream.setup()
    async with AsyncDurablePostgresSaver.from_conn_string(fresh_db_dsn) as ours:
        await ours.setup()

    async with aopen_saver(writer, fresh_db_dsn) as saver:
        phase_1 = await arun_ops(saver, {}, PHASE_1, durability)
    check_phase(phase_1, PHASE_1, AFTER_PHASE_1, durability)

    async with aopen_saver(reader, fresh_db_dsn) as saver:
        same_views(phase_1, await aread_views(saver))
        phase_2 = await arun_ops(saver, PHASE_1, PHASE_2, durability)
    check_phase(phase_2, PHASE_2, AFTER_PHASE_2, durability)

    async with aopen_saver(writer, fresh_db_dsn) as saver:
        same_views(phase_2, await aread_views(saver))
        phase_3 = await arun_ops(saver, PHASE_2, PHASE_3, durability)
    check_phase(phase_3, PHASE_3, AFTER_PHASE_3, durability)


async def test_our_setup_after_upstream_adds_only_our_rows_async(fresh_db_dsn: str) -> None:
    async with AsyncPostgresSaver.from_conn_string(fresh_db_dsn) as upstream:
        await upstream.setup()
    assert migration_rows(fresh_db_dsn) == (UPSTREAM_VERSIONS, None)

    async with AsyncDurablePostgresSaver.from_conn_string(fresh_db_dsn) as ours:
        applied = await ours.setup()  # spelled as upstream's
        await ours.acheck_schema()
        assert await ours.asetup() == []  # the alias
    assert applied == [name for _, name in DURABLE_ROWS]
    assert migration_rows(fresh_db_dsn) == (UPSTREAM_VERSIONS, DURABLE_ROWS)


async def test_upstream_setup_after_ours_is_a_noop_async(fresh_db_dsn: str) -> None:
    async with AsyncDurablePostgresSaver.from_conn_string(fresh_db_dsn) as ours:
        await ours.setup()
    rows = migration_rows(fresh_db_dsn)
    schema = schema_fingerprint(fresh_db_dsn)

    async with AsyncPostgresSaver.from_conn_string(fresh_db_dsn) as upstream:
        await upstream.setup()
    assert migration_rows(fresh_db_dsn) == rows
    assert schema_fingerprint(fresh_db_dsn) == schema


def _linear_story(saver: Any, thread: str) -> Any:
    builder: StateGraph[Any] = StateGraph(State)
    builder.add_node("tell", lambda s: {"messages": [AIMessage("once", id="m-once")]})
    builder.add_edge(START, "tell")
    builder.add_edge("tell", END)
    graph = builder.compile(checkpointer=saver)
    config: RunnableConfig = {"configurable": {"thread_id": thread}}
    graph.invoke({"messages": [HumanMessage("go", id="m-go")]}, config)
    return graph.get_state(config).values


def test_pools_and_connections_without_dict_rows_work_as_with_upstream(fresh_db_dsn: str) -> None:
    """Upstream's savers ask each cursor for dict rows, so `ConnectionPool(dsn)` (tuple
    rows, no autocommit) works with them; ours refused it. The connections' own row
    factory is kept for the application's other uses."""
    db_dsn = fresh_db_dsn
    with psycopg_pool.ConnectionPool(db_dsn, min_size=1, max_size=2, open=True) as pool:
        saver = DurablePostgresSaver(pool)  # type: ignore[arg-type]
        saver.setup()  # in autocommit for its index builds, then the connection as it was
        values = _linear_story(saver, f"plain-pool-{uuid.uuid4()}")
        assert [m.content for m in values["messages"]] == ["go", "once"]
        with pool.connection() as conn:
            assert conn.row_factory is tuple_row
            assert not conn.autocommit
    # A single connection is shared with the application: its own queries while a call
    # of ours runs would get dict rows if ours set its factory. Refused, by name, as
    # upstream's README asks for dict rows.
    with (
        psycopg.connect(db_dsn, autocommit=True) as conn,
        pytest.raises(ConfigurationError, match="row_factory=dict_row"),
    ):
        DurablePostgresSaver(conn)  # type: ignore[arg-type]


async def test_async_pools_without_dict_rows_work_as_with_upstream(fresh_db_dsn: str) -> None:
    async with psycopg_pool.AsyncConnectionPool(
        fresh_db_dsn, min_size=1, max_size=2, open=False
    ) as pool:
        saver = AsyncDurablePostgresSaver(pool)  # type: ignore[arg-type]
        await saver.setup()
        thread = f"plain-apool-{uuid.uuid4()}"
        builder: StateGraph[Any] = StateGraph(State)
        builder.add_node("tell", lambda s: {"messages": [AIMessage("once", id="m-once")]})
        builder.add_edge(START, "tell")
        builder.add_edge("tell", END)
        graph = builder.compile(checkpointer=saver)
        config: RunnableConfig = {"configurable": {"thread_id": thread}}
        await graph.ainvoke({"messages": [HumanMessage("go", id="m-go")]}, config)
        state = await graph.aget_state(config)
        assert [m.content for m in state.values["messages"]] == ["go", "once"]
        async with pool.connection() as conn:
            assert conn.row_factory is tuple_row
            assert not conn.autocommit


# --- errors an `except` written for upstream catches ----------------------------------------


def test_an_except_written_for_upstream_catches_our_named_errors(fresh_db_dsn: str) -> None:
    """Upstream lets psycopg's errors through; ours are named, and each is also the psycopg
    class upstream raises in its place, so `except psycopg.OperationalError` (a server it
    cannot reach), `except UndefinedTable` (before `setup()`), `except LockNotAvailable`
    (a lock timeout) and `except psycopg_pool.PoolTimeout` keep working."""
    config: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    unreachable = "postgresql://postgres@127.0.0.1:1/nowhere?connect_timeout=2"
    for saver_class in (PostgresSaver, DurablePostgresSaver):
        with (
            pytest.raises(psycopg.OperationalError),
            saver_class.from_conn_string(unreachable) as saver,
        ):
            saver.get_tuple(config)
        with (
            saver_class.from_conn_string(fresh_db_dsn) as saver,  # no setup() yet
            pytest.raises(psycopg.errors.UndefinedTable),
        ):
            saver.get_tuple(config)
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        saver.setup()
    with (
        psycopg.connect(fresh_db_dsn) as holder,  # holds the table until the block ends
        DurablePostgresSaver.from_conn_string(fresh_db_dsn, lock_timeout=0.05) as saver,
    ):
        holder.execute("LOCK TABLE checkpoints IN ACCESS EXCLUSIVE MODE")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            saver.get_tuple(config)
    with (
        psycopg_pool.ConnectionPool(
            unreachable, min_size=0, max_size=1, timeout=0.5, open=True
        ) as pool,
        pytest.raises(psycopg_pool.PoolTimeout),
    ):
        DurablePostgresSaver(pool).get_tuple(config)


async def test_an_except_written_for_upstream_catches_our_argument_errors(
    fresh_db_dsn: str,
) -> None:
    """Upstream raises `TypeError` for one string where a list of thread ids goes, and
    `asyncio.InvalidStateError` for its async saver's sync call on the saver's own loop:
    ours are named, and are those classes too."""
    config: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    for saver_class in (PostgresSaver, DurablePostgresSaver):
        with saver_class.from_conn_string(fresh_db_dsn) as saver:
            saver.setup()
            with pytest.raises(TypeError, match="thread"):
                saver.prune("t")  # type: ignore[arg-type]
    for async_class in (AsyncPostgresSaver, AsyncDurablePostgresSaver):
        async with async_class.from_conn_string(fresh_db_dsn) as saver:
            with pytest.raises(TypeError, match="thread"):
                await saver.aprune("t")  # type: ignore[arg-type]
            with pytest.raises(asyncio.InvalidStateError, match="aget_tuple"):
                saver.get_tuple(config)
