"""Large values are stored without the server writing a temporary file.

A set-returning function in FROM is materialised: `FROM unnest(...)` over the blob array of
a 50 MB channel value wrote 50 MB to a temporary file and read it back (put took 1.67x
upstream's time). Here the server refuses any temporary file (`temp_file_limit=0`) and
`work_mem` is 64 kB, so each write path must store a value 16x larger than `work_mem`
as it streams: a checkpoint's blob, writes parked for a put, writes stored alone, and
writes that replace earlier ones. The same holds for a large outbox event's payload, in
each statement that stores events.
"""

from __future__ import annotations

import operator
import uuid
from typing import Annotated, Any

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import START, StateGraph
from langgraph.types import Durability
from psycopg.conninfo import make_conninfo
from typing_extensions import TypedDict

from langgraph_durable import (
    AsyncDurablePostgresSaver,
    DurablePostgresSaver,
    effect,
    emit,
    emit_txn,
)
from langgraph_durable.checkpoint import new_event

BIG = {"doc": "".join(f"{n:08d}" for n in range(128_000))}  # 1 MB of text, as a blob

ERROR = "__error__"  # a special write: it replaces what the task wrote before
RESUME = "__resume__"  # another, which keeps the task's events

NO_TEMP_FILES = "-c work_mem=64kB -c temp_file_limit=0"


def _checkpoint(saver: Any, value: Any) -> tuple[Any, dict[str, Any]]:
    checkpoint = empty_checkpoint()
    version = saver.get_next_version(None, None)
    checkpoint["channel_values"] = {"big": value}
    checkpoint["channel_versions"] = {"big": version}
    return checkpoint, {"big": version}


def test_sync_saver_streams_large_values(db_dsn: str) -> None:
    with DurablePostgresSaver.from_conn_string(make_conninfo(db_dsn)) as setup:
        setup.setup()
    dsn = make_conninfo(db_dsn, options=NO_TEMP_FILES)
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        thread = f"large-{uuid.uuid4().hex}"
        first, versions = _checkpoint(saver, BIG)
        config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        stored = saver.put(config, first, {"source": "input", "step": -1}, versions)
        saver.put_writes(stored, [("big", BIG)], "task-regular")  # outside a graph: alone
        saver.put_writes(stored, [(ERROR, BIG["doc"])], "task-failed")  # stored alone
        saver.put_writes(stored, [(ERROR, BIG["doc"] + "!")], "task-failed")  # replaces
        second, versions = _checkpoint(saver, {"doc": BIG["doc"][::-1]})
        saver.put(stored, second, {"source": "loop", "step": 0}, versions)

        found = saver.get_tuple({"configurable": {"thread_id": thread}})
        assert found is not None
        assert found.checkpoint["channel_values"]["big"] == {"doc": BIG["doc"][::-1]}
        earlier = saver.get_tuple(stored)
        assert earlier is not None
        assert earlier.checkpoint["channel_values"]["big"] == BIG
        writes = {(task, channel): value for task, channel, value in earlier.pending_writes}
        assert writes == {("task-regular", "big"): BIG, ("task-failed", ERROR): BIG["doc"] + "!"}


async def test_async_saver_streams_large_values(db_dsn: str) -> None:
    async with AsyncDurablePostgresSaver.from_conn_string(make_conninfo(db_dsn)) as setup:
        await setup.setup()
    dsn = make_conninfo(db_dsn, options=NO_TEMP_FILES)
    async with AsyncDurablePostgresSaver.from_conn_string(dsn) as saver:
        thread = f"large-{uuid.uuid4().hex}"
        first, versions = _checkpoint(saver, BIG)
        config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        stored = await saver.aput(config, first, {"source": "input", "step": -1}, versions)
        await saver.aput_writes(stored, [("big", BIG)], "task-regular")
        await saver.aput_writes(stored, [(ERROR, BIG["doc"])], "task-failed")
        await saver.aput_writes(stored, [(ERROR, BIG["doc"] + "!")], "task-failed")
        second, versions = _checkpoint(saver, {"doc": BIG["doc"][::-1]})
        await saver.aput(stored, second, {"source": "loop", "step": 0}, versions)

        found = await saver.aget_tuple({"configurable": {"thread_id": thread}})
        assert found is not None
        assert found.checkpoint["channel_values"]["big"] == {"doc": BIG["doc"][::-1]}
        earlier = await saver.aget_tuple(stored)
        assert earlier is not None
        assert earlier.checkpoint["channel_values"]["big"] == BIG
        writes = {(task, channel): value for task, channel, value in earlier.pending_writes}
        assert writes == {("task-regular", "big"): BIG, ("task-failed", ERROR): BIG["doc"] + "!"}


# Outbox events: a 1 MB payload through every statement that stores events.

BIG_PAYLOAD = {"doc": BIG["doc"]}


class _State(TypedDict, total=False):
    done: Annotated[list[str], operator.add]
    doc: str


def _emitting_graph() -> StateGraph[_State, None, _State, _State]:
    def announce(state: _State) -> _State:
        emit("doc.ready", BIG_PAYLOAD)
        return {"done": ["announce"], "doc": BIG["doc"]}

    builder = StateGraph(_State)
    builder.add_node("announce", announce)
    builder.add_edge(START, "announce")
    return builder


def _payloads(dsn: str, where: str, value: str) -> list[Any]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            f"SELECT payload FROM langgraph_durable_outbox WHERE {where} = %s ORDER BY seq",
            (value,),
        ).fetchall()
    return [row[0] for row in rows]


@pytest.mark.parametrize("mode", ["sync", "exit"])
def test_an_emitted_event_with_a_large_payload_streams(db_dsn: str, mode: Durability) -> None:
    """Under "sync" the task's writes (a large value too) carry the event, parked for the
    next put or, when no put takes them in time, stored alone; under "exit" the final put
    carries it."""
    with DurablePostgresSaver.from_conn_string(make_conninfo(db_dsn)) as setup:
        setup.setup()
    thread = f"large-event-{uuid.uuid4().hex}"
    dsn = make_conninfo(db_dsn, options=NO_TEMP_FILES)
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        app = _emitting_graph().compile(checkpointer=saver)
        config: Any = {"configurable": {"thread_id": thread}}
        app.invoke({"done": []}, config, durability=mode)
        assert app.get_state(config).values["doc"] == BIG["doc"]
    assert _payloads(db_dsn, "thread_id", thread) == [BIG_PAYLOAD]


async def test_events_stored_with_writes_alone_stream(db_dsn: str) -> None:
    """A task's writes stored by themselves carry its events, whether they are kept as
    first stored (regular writes) or replace earlier ones (a resume)."""
    async with AsyncDurablePostgresSaver.from_conn_string(make_conninfo(db_dsn)) as setup:
        await setup.setup()
    thread = f"large-event-{uuid.uuid4().hex}"
    dsn = make_conninfo(db_dsn, options=NO_TEMP_FILES)
    async with AsyncDurablePostgresSaver.from_conn_string(dsn) as saver:
        checkpoint, versions = _checkpoint(saver, {"small": 1})
        config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        stored = await saver.aput(config, checkpoint, {"source": "input", "step": -1}, versions)
        checkpoint_id = stored["configurable"]["checkpoint_id"]
        for task_id, channel in (("task-regular", "out"), ("task-resumed", RESUME)):
            saver.park_event(
                new_event(
                    "doc.ready",
                    BIG_PAYLOAD,
                    thread,
                    thread_id=thread,
                    checkpoint_id=checkpoint_id,
                    task_id=task_id,
                )
            )
            await saver.aput_writes(stored, [(channel, "value")], task_id)
    assert _payloads(db_dsn, "thread_id", thread) == [BIG_PAYLOAD, BIG_PAYLOAD]


def test_an_event_in_the_callers_transaction_streams(db_dsn: str) -> None:
    with DurablePostgresSaver.from_conn_string(make_conninfo(db_dsn)) as setup:
        setup.setup()
    key = f"large-event-{uuid.uuid4().hex}"
    dsn = make_conninfo(db_dsn, options=NO_TEMP_FILES)
    with psycopg.connect(dsn) as conn, conn.transaction():
        emit_txn(conn, "doc.ready", BIG_PAYLOAD, key=key)
    assert _payloads(db_dsn, "key", key) == [BIG_PAYLOAD]


def test_an_effects_completion_event_streams(db_dsn: str) -> None:
    with DurablePostgresSaver.from_conn_string(make_conninfo(db_dsn)) as setup:
        setup.setup()
    thread = f"large-event-{uuid.uuid4().hex}"

    @effect(name="publish_doc", event="doc.published", key=lambda: f"publish:{thread}")
    def publish_doc() -> dict[str, str]:
        return BIG_PAYLOAD

    def publish(state: _State) -> _State:
        publish_doc()
        return {"done": ["publish"]}

    builder = StateGraph(_State)
    builder.add_node("publish", publish)
    builder.add_edge(START, "publish")
    with DurablePostgresSaver.from_conn_string(
        make_conninfo(db_dsn, options=NO_TEMP_FILES)
    ) as saver:
        builder.compile(checkpointer=saver).invoke(
            {"done": []}, {"configurable": {"thread_id": thread}}
        )
    [payload] = _payloads(db_dsn, "key", thread)
    assert payload["result"] == BIG_PAYLOAD
