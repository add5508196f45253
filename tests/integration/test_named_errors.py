"""Inputs that used to reach Postgres and fail there with a raw driver error.

Each must fail by name (a `DurableError` that says what to do) before anything is written,
with both savers: ids longer than an index entry, lone surrogates, impossible list limits,
NUL characters in `before`, keys over the journal's limit.
"""

from __future__ import annotations

import gc
import inspect
import random
import string
import uuid
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest
from graphs import linear_graph
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel
from typing_extensions import TypedDict

from langgraph_durable import (
    AsyncDurablePostgresSaver,
    DurablePostgresSaver,
    EffectJournal,
    InvalidInputError,
    InvalidThreadIdError,
    UnserializableValueError,
    effect,
)

FLAVORS = ["sync", "async"]


def incompressible(size: int) -> str:
    """Text Postgres cannot squeeze into an index entry by compressing it."""
    rng = random.Random(size)
    return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(size))


@asynccontextmanager
async def saver_of(flavor: str, dsn: str) -> AsyncIterator[Any]:
    if flavor == "sync":
        with DurablePostgresSaver.from_conn_string(dsn) as saver:
            saver.setup()
            yield saver
    else:
        async with AsyncDurablePostgresSaver.from_conn_string(dsn) as asaver:
            await asaver.setup()
            yield asaver


async def invoke(flavor: str, saver: Any, config: Any) -> Any:
    graph = linear_graph(("a",)).compile(checkpointer=saver)
    if flavor == "sync":
        return graph.invoke({"log": []}, config, durability="sync")
    return await graph.ainvoke({"log": []}, config, durability="sync")


async def listed(flavor: str, saver: Any, config: Any, **options: Any) -> list[Any]:
    if flavor == "sync":
        return list(saver.list(config, **options))
    return [t async for t in saver.alist(config, **options)]


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def rows(dsn: str) -> tuple[int, int, int]:
    with psycopg.connect(dsn) as conn:
        found = conn.execute(
            "SELECT (SELECT count(*) FROM checkpoints), (SELECT count(*) FROM checkpoint_blobs),"
            " (SELECT count(*) FROM checkpoint_writes)"
        ).fetchone()
    assert found is not None
    return int(found[0]), int(found[1]), int(found[2])


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize(
    ("configurable", "message"),
    [
        ({"thread_id": incompressible(3000)}, "thread_id is 3,000 bytes long; at most 1,024"),
        ({"thread_id": "a\ud800b"}, "lone surrogate"),
    ],
    ids=["long-thread", "surrogate"],
)
async def test_ids_postgres_cannot_index_or_store_are_named_before_writing(
    flavor: str, fresh_db_dsn: str, configurable: dict[str, Any], message: str
) -> None:
    async with saver_of(flavor, fresh_db_dsn) as saver:
        with pytest.raises(InvalidThreadIdError, match=message):
            await invoke(flavor, saver, {"configurable": configurable})
    assert rows(fresh_db_dsn) == (0, 0, 0)


@pytest.mark.parametrize("call", ["put", "put_writes"])
def test_a_long_checkpoint_id_in_the_config_is_named_before_writing(
    call: str, fresh_db_dsn: str
) -> None:
    """The config's checkpoint_id is the new checkpoint's parent, or the writes' checkpoint."""
    from langgraph.checkpoint.base import empty_checkpoint

    config = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c" * 300}}
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        saver.setup()
        write = (
            (lambda: saver.put(config, empty_checkpoint(), {"step": 0}, {}))
            if call == "put"
            else (lambda: saver.put_writes(config, [("log", "x")], "task-1"))
        )
        with pytest.raises(InvalidThreadIdError, match="checkpoint_id is 300 bytes"):
            write()
    assert rows(fresh_db_dsn) == (0, 0, 0)


async def run_with(flavor: str, saver: Any, config: Any, values: dict[str, Any]) -> Any:
    graph = linear_graph(("a",)).compile(checkpointer=saver)
    if flavor == "sync":
        return graph.invoke(values, config, durability="sync")
    return await graph.ainvoke(values, config, durability="sync")


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize(
    ("config", "values", "error", "message"),
    [
        (
            {"configurable": {"thread_id": "t"}, "metadata": {"run_id": incompressible(3000)}},
            {"log": []},
            InvalidThreadIdError,
            "run_id is 3,000 bytes",
        ),
        (
            {"configurable": {"thread_id": "t"}, "metadata": {"k\ud800": 1}},
            {"log": []},
            InvalidInputError,
            "lone surrogate",
        ),
        (
            {"configurable": {"thread_id": "t"}},
            {"log": [], "approved": "x\udc80y"},
            UnserializableValueError,
            "'approved'.* lone surrogate",
        ),
    ],
    ids=["long-run-id", "surrogate-metadata-key", "surrogate-state-value"],
)
async def test_values_postgres_or_the_serializer_would_refuse_or_mangle_are_named(
    flavor: str,
    fresh_db_dsn: str,
    config: Any,
    values: dict[str, Any],
    error: type[Exception],
    message: str,
) -> None:
    async with saver_of(flavor, fresh_db_dsn) as saver:
        with pytest.raises(error, match=message):
            await run_with(flavor, saver, config, values)
    assert rows(fresh_db_dsn) == (0, 0, 0)


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_a_long_namespace_is_named_before_writing(flavor: str, fresh_db_dsn: str) -> None:
    """A root run always has namespace ""; a subgraph's grows with nesting, or a caller's put."""
    from langgraph.checkpoint.base import empty_checkpoint

    config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": incompressible(1500)}}
    async with saver_of(flavor, fresh_db_dsn) as saver:
        put = saver.put if flavor == "sync" else saver.aput
        with pytest.raises(InvalidThreadIdError, match="checkpoint_ns is 1,500 bytes"):
            await _maybe_await(put(config, empty_checkpoint(), {}, {}))
    assert rows(fresh_db_dsn) == (0, 0, 0)


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize("limit", [-1, 2**63, 2.5, "10", True])
async def test_impossible_list_limits_are_named(flavor: str, db_dsn: str, limit: Any) -> None:
    async with saver_of(flavor, db_dsn) as saver:
        with pytest.raises(InvalidInputError, match=r"2\*\*63 - 1"):
            await listed(flavor, saver, {"configurable": {"thread_id": "t"}}, limit=limit)


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_the_largest_list_limit_works(flavor: str, db_dsn: str) -> None:
    async with saver_of(flavor, db_dsn) as saver:
        await listed(flavor, saver, {"configurable": {"thread_id": "t"}}, limit=2**63 - 1)
        assert await listed(flavor, saver, {"configurable": {"thread_id": "t"}}, limit=0) == []


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize(
    "options",
    [
        {"before": {"configurable": {"checkpoint_id": "a\x00b"}}},
        {"config": {"configurable": {"thread_id": "t", "checkpoint_id": "a\x00b"}}},
    ],
    ids=["before", "checkpoint_id"],
)
async def test_nul_in_list_ids_is_named(flavor: str, db_dsn: str, options: dict[str, Any]) -> None:
    options = dict(options)  # the parameter is shared by both flavors
    config = options.pop("config", {"configurable": {"thread_id": "t"}})
    async with saver_of(flavor, db_dsn) as saver:
        with pytest.raises(InvalidThreadIdError, match="NUL"):
            await listed(flavor, saver, config, **options)


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (incompressible(3000), "3,000 bytes long; at most 2,048"),
        ("a\ud800", "lone surrogate"),
        ("", "non-empty string"),
        ("a\x00", "NUL"),
    ],
    ids=["long", "surrogate", "empty", "nul"],
)
def test_effect_keys_the_journal_cannot_hold_are_named(db_dsn: str, key: str, message: str) -> None:
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
        journal = EffectJournal(saver.conn)  # type: ignore[arg-type]
        calls: list[str] = []

        def keyed(order: str) -> str:
            return key

        @effect(key=keyed, journal=journal, name="named.keys")
        def act(order: str) -> str:
            calls.append(order)
            return order

        with pytest.raises(InvalidInputError, match=message):
            act("o-1")
        with pytest.raises(InvalidInputError, match=message):
            effect(key=key, journal=journal, name="named.keys")(lambda: None)
    assert calls == []


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_a_run_without_a_thread_id_is_named(flavor: str, db_dsn: str) -> None:
    """LangGraph itself refuses a call with no `configurable` at all, before any saver
    call; once anything is configured (or the graph has `with_durability`), ours names it."""
    from langgraph_durable import with_durability

    async with saver_of(flavor, db_dsn) as saver:
        graph = linear_graph(("a",)).compile(checkpointer=saver)
        bound = with_durability(graph, "sync")
        for target, config in ((graph, {"configurable": {"user": "ana"}}), (bound, {})):
            run = target.invoke if flavor == "sync" else target.ainvoke
            with pytest.raises(InvalidThreadIdError, match="no thread_id"):
                await _maybe_await(run({"log": []}, config))


def test_a_saver_on_one_lost_connection_says_a_pool_rides_out_restarts(db_dsn: str) -> None:
    from psycopg.rows import dict_row

    from langgraph_durable import DatabaseUnreachableError

    config = {"configurable": {"thread_id": "lost"}}
    with psycopg.connect(db_dsn, autocommit=True, row_factory=dict_row) as conn:
        saver = DurablePostgresSaver(conn)
        saver.setup()
        with psycopg.connect(db_dsn, autocommit=True) as other:
            other.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        for _ in range(2):  # every call from now on, not only the first
            with pytest.raises(DatabaseUnreachableError, match="ConnectionPool to ride out"):
                saver.get_tuple(config)


class _Document(BaseModel):
    text: str


class _Doc(TypedDict, total=False):
    doc: _Document
    bad: str


def test_a_rejected_checkpoint_does_not_keep_its_run_alive(saver: DurablePostgresSaver) -> None:
    """The saver remembers a rejected put for the writes that follow it; it kept the
    error itself, whose traceback held the run's frames (its state, LangGraph's loop)
    until 1,024 more were rejected: a graph failing on every run held ~1,000 states."""
    made: list[weakref.ref[_Document]] = []

    def load(state: _Doc) -> _Doc:
        document = _Document(text="d" * 10_000)
        made.append(weakref.ref(document))
        return {"doc": document}

    builder = StateGraph(_Doc)
    builder.add_node("load", load)
    builder.add_node("oops", lambda state: {"bad": "text from a browser \ud800"})
    builder.add_edge(START, "load")
    builder.add_edge("load", "oops")
    builder.add_edge("oops", END)
    graph = builder.compile(checkpointer=saver)
    try:
        graph.invoke({}, {"configurable": {"thread_id": f"t-{uuid.uuid4().hex}"}})
    except InvalidInputError:
        pass  # the lone surrogate, named (the name is tested above)
    else:
        raise AssertionError("the checkpoint holding a lone surrogate was stored")
    gc.collect()
    assert len(made) == 1
    assert made[0]() is None, "a rejected checkpoint's run is still alive"
