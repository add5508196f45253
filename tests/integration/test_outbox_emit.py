"""`emit()` inside nodes and tasks: the event commits with the task's writes (I7).

Checked in every durability mode with both savers: an event lands in the same transaction
as the writes it belongs to (`xmin`), a failed or interrupted task emits nothing, a
retried task keeps only the last attempt's events, and `emit_txn` joins the caller's
transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import operator
import threading
import uuid
from typing import Annotated, Any

import psycopg
import pytest
from _pg import leased_config
from langgraph.channels.untracked_value import UntrackedValue
from langgraph.func import entrypoint, task
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Durability, RetryPolicy, Send, interrupt
from psycopg.rows import dict_row
from typing_extensions import TypedDict

from langgraph_durable import (
    AsyncDurablePostgresSaver,
    DurablePostgresSaver,
    InvalidEventError,
    InvalidInputError,
    OutboxUnavailableError,
    UnserializableValueError,
    emit,
    emit_txn,
)
from langgraph_durable.checkpoint import _events
from langgraph_durable.outbox import aemit_txn, backlog

MODES: list[Durability] = ["sync", "async", "exit"]


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


@pytest.fixture(scope="module")
def dsn(db_dsn: str) -> str:
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
    return db_dsn


def stored(dsn: str, thread: str) -> list[dict[str, Any]]:
    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        return conn.execute(
            "SELECT event_type, key, payload, task_id, xmin::text AS xid"
            " FROM langgraph_durable_outbox WHERE thread_id = %s ORDER BY seq",
            (thread,),
        ).fetchall()


def write_xids(dsn: str, thread: str, task_id: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT xmin::text FROM checkpoint_writes WHERE thread_id = %s AND task_id = %s",
            (thread, task_id),
        ).fetchall()
    return {row[0] for row in rows}


def checkpoint_xids(dsn: str, thread: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT xmin::text FROM checkpoints WHERE thread_id = %s", (thread,)
        ).fetchall()
    return {row[0] for row in rows}


def graph() -> StateGraph[State, None, State, State]:
    def a(state: State) -> State:
        emit("a.done", {"n": 1})
        return {"log": ["a"]}

    def b(state: State) -> State:
        emit("b.done", {"n": 2}, key="orders")
        emit("b.again", {"n": 3}, key="orders")
        return {"log": ["b"]}

    builder = StateGraph(State)
    builder.add_node("a", a)
    builder.add_node("b", b)
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", END)
    return builder


def one_node(name: str, node: Any, schema: Any = State) -> Any:
    """A graph of one node, from START."""
    builder = StateGraph(schema)
    builder.add_node(name, node)
    builder.add_edge(START, name)
    return builder


def holds_a(checkpoint: Any) -> bool:
    return "a" in (checkpoint["channel_values"].get("log") or [])


class LateWriter(DurablePostgresSaver):
    """A saver whose `put_writes` for node a's task starts late, as when the executor
    thread LangGraph submitted it to is not scheduled before the thread of the next `put`:
    it waits (at most 5 s) until the put of a checkpoint holding a's result has started,
    and that put records which events were committed when it had."""

    dsn = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.thread = ""
        self.a_put_started = threading.Event()
        self.events_then: list[str] | None = None

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        if ("log", ["a"]) in [tuple(w) for w in writes]:
            self.a_put_started.wait(5)
        super().put_writes(config, writes, task_id, task_path)

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        first = holds_a(checkpoint) and not self.a_put_started.is_set()
        if first:
            self.a_put_started.set()
        stored_config = super().put(config, checkpoint, metadata, new_versions)
        if first:
            self.events_then = [row["event_type"] for row in stored(self.dsn, self.thread)]
        return stored_config


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_events_commit_no_later_than_the_checkpoint_holding_their_result(
    dsn: str, mode: Durability
) -> None:
    LateWriter.dsn = dsn
    with LateWriter.from_conn_string(dsn) as saver:
        assert isinstance(saver, LateWriter)
        saver.thread = f"emit-late-{uuid.uuid4()}"
        app = graph().compile(checkpointer=saver)
        app.invoke({"log": []}, {"configurable": {"thread_id": saver.thread}}, durability=mode)
        assert saver.events_then is not None
        assert "a.done" in saver.events_then


class AsyncLateWriter(AsyncDurablePostgresSaver):
    """`LateWriter` for the async saver: `aput_writes` for a's task waits (at most 5 s)
    until the put of a checkpoint holding a's result has started, as a task scheduled
    late would."""

    dsn = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.thread = ""
        self.a_put_started = asyncio.Event()
        self.events_then: list[str] | None = None

    async def aput_writes(
        self, config: Any, writes: Any, task_id: str, task_path: str = ""
    ) -> None:
        if ("log", ["a"]) in [tuple(w) for w in writes]:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.a_put_started.wait(), 5)
        await super().aput_writes(config, writes, task_id, task_path)

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        first = holds_a(checkpoint) and not self.a_put_started.is_set()
        if first:
            self.a_put_started.set()
        stored_config = await super().aput(config, checkpoint, metadata, new_versions)
        if first:
            rows = await asyncio.to_thread(stored, self.dsn, self.thread)
            self.events_then = [row["event_type"] for row in rows]
        return stored_config


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_async_saver_commits_events_no_later_than_the_checkpoint_holding_their_result(
    dsn: str, mode: Durability
) -> None:
    AsyncLateWriter.dsn = dsn
    async with AsyncLateWriter.from_conn_string(dsn) as saver:
        assert isinstance(saver, AsyncLateWriter)
        saver.thread = f"emit-late-{uuid.uuid4()}"
        app = graph().compile(checkpointer=saver)
        config: Any = {"configurable": {"thread_id": saver.thread}}
        await app.ainvoke({"log": []}, config, durability=mode)
        assert saver.events_then is not None
        assert "a.done" in saver.events_then
    assert sorted(r["event_type"] for r in stored(dsn, saver.thread)) == [
        "a.done",
        "b.again",
        "b.done",
    ]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_events_of_a_task_cancelled_mid_run_never_commit(
    dsn: str, mode: Durability, caplog: pytest.LogCaptureFixture
) -> None:
    """A run cancelled after its task emitted leaves the event parked; the next run on the
    thread starts from new input: none of its checkpoints carries that event, and its input
    checkpoint does not wait for the cancelled task's writes, which will never come."""
    thread = f"emit-cancelled-{uuid.uuid4()}"
    emitted = asyncio.Event()
    runs: list[int] = []

    async def a(state: State) -> State:
        runs.append(1)
        if len(runs) == 1:
            emit("a.cancelled", {})
            emitted.set()
            await asyncio.Event().wait()  # until cancelled
        emit("a.done", {})
        return {"log": ["a"]}

    builder = one_node("a", a)
    config: Any = {"configurable": {"thread_id": thread}}
    async with AsyncDurablePostgresSaver.from_conn_string(dsn) as saver:
        app = builder.compile(checkpointer=saver)
        first = asyncio.ensure_future(app.ainvoke({"log": []}, config, durability=mode))
        await emitted.wait()
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        with caplog.at_level(logging.WARNING, logger="langgraph_durable.checkpoint"):
            await app.ainvoke({"log": []}, config, durability=mode)
    assert [r["event_type"] for r in stored(dsn, thread)] == ["a.done"]
    assert "outbox events" not in caplog.text


@pytest.mark.parametrize("mode", MODES)
async def test_a_cancelled_run_s_parked_events_are_dropped_when_it_ends(
    dsn: str, mode: Durability, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run cancelled mid-task (a timeout, a shutdown) never stores that task's writes,
    and LangGraph tells the saver nothing when the step's only task runs in the caller's
    task: its events stayed parked for as long as the process ran, until the parking was
    full and emptied, a live task's events with them. With room for ten events, three
    cancelled runs of three events each filled it; the run after them lost one of its
    two events."""
    monkeypatch.setattr(_events, "MAX_PARKED", 10)
    started = asyncio.Event()

    async def slow(state: State) -> State:
        for n in range(3):
            emit("slow.step", {"n": n})
        started.set()
        await asyncio.Event().wait()  # until cancelled
        return {"log": ["slow"]}

    async def fast(state: State) -> State:
        emit("fast.step", {"n": 0})
        emit("fast.step", {"n": 1})
        return {"log": ["fast"]}

    live = f"emit-after-cancelled-{uuid.uuid4()}"
    async with AsyncDurablePostgresSaver.from_conn_string(dsn) as saver:
        slow_app = one_node("slow", slow).compile(checkpointer=saver)
        for n in range(3):
            started.clear()
            config: Any = {"configurable": {"thread_id": f"emit-cancelled-{uuid.uuid4()}"}}
            run = asyncio.ensure_future(slow_app.ainvoke({"log": []}, config, durability=mode))
            await started.wait()
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run
            assert saver._events._count == 0, f"run {n}: its events are still parked"
        fast_app = one_node("fast", fast).compile(checkpointer=saver)
        await fast_app.ainvoke({"log": []}, {"configurable": {"thread_id": live}}, durability=mode)
    assert [r["payload"] for r in stored(dsn, live)] == [{"n": 0}, {"n": 1}]


@pytest.mark.parametrize("mode", MODES)
async def test_a_cancelled_helper_task_drops_only_its_own_events(
    dsn: str, mode: Durability
) -> None:
    """A node ran a subgraph, then a helper task of its own that emitted and was
    cancelled; the node carried on. The helper's drop took every event parked under the
    node's task and below it: the subgraph's event went missing while the node's writes
    committed."""
    emitted = asyncio.Event()

    async def sub_node(state: State) -> State:
        emit("sub.event", {})
        return {"log": ["sub"]}

    sub = one_node("sub_node", sub_node).compile()

    async def parent(state: State) -> State:
        await sub.ainvoke({"log": []})

        async def helper() -> None:
            emit("helper.event", {})
            emitted.set()
            await asyncio.Event().wait()  # until cancelled

        task = asyncio.create_task(helper())
        await emitted.wait()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return {"log": ["parent"]}

    thread = f"emit-helper-{uuid.uuid4()}"
    async with AsyncDurablePostgresSaver.from_conn_string(dsn) as saver:
        app = one_node("parent", parent).compile(checkpointer=saver)
        await app.ainvoke({"log": []}, {"configurable": {"thread_id": thread}}, durability=mode)
    assert [r["event_type"] for r in stored(dsn, thread)] == ["sub.event"]


async def test_a_full_parking_refuses_emit_by_name_and_drops_no_live_event(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At its limit the parking was emptied, the events of tasks still running included,
    and their writes then committed without them (100,001 events emitted by one node: one
    stored). Now the emit that finds it full is refused by name, and the task that made
    it fails; a task running beside it keeps every event it emitted."""
    monkeypatch.setattr(_events, "MAX_PARKED", 5)
    live_emitted, go_on = asyncio.Event(), asyncio.Event()

    async def live(state: State) -> State:
        for n in range(3):
            emit("live.step", {"n": n})
        live_emitted.set()
        await go_on.wait()
        return {"log": ["live"]}

    async def bulk(state: State) -> State:
        for n in range(3):
            emit("bulk.item", {"n": n})
        return {"log": ["bulk"]}

    live_thread, bulk_thread = (f"emit-full-{name}-{uuid.uuid4()}" for name in ("a", "b"))
    async with AsyncDurablePostgresSaver.from_conn_string(dsn) as saver:
        live_app = one_node("live", live).compile(checkpointer=saver)
        bulk_app = one_node("bulk", bulk).compile(checkpointer=saver)
        running = asyncio.ensure_future(
            live_app.ainvoke({"log": []}, {"configurable": {"thread_id": live_thread}})
        )
        await live_emitted.wait()
        with pytest.raises(OutboxUnavailableError, match="emit\\(\\) refused: 5 outbox events"):
            await bulk_app.ainvoke({"log": []}, {"configurable": {"thread_id": bulk_thread}})
        go_on.set()
        assert await running == {"log": ["live"]}
    assert [r["payload"] for r in stored(dsn, live_thread)] == [{"n": n} for n in range(3)]
    assert stored(dsn, bulk_thread) == []


@pytest.mark.parametrize("mode", MODES)
def test_a_task_that_writes_only_untracked_channels_still_commits_its_events(
    dsn: str, mode: Durability
) -> None:
    """LangGraph stores no write for an `UntrackedValue` channel, so such a task's
    `put_writes` gets none: its events are stored with an empty set of writes."""

    class Scratch(TypedDict, total=False):
        log: list[str]
        scratch: Annotated[str, UntrackedValue(str)]

    def a(state: Scratch) -> Scratch:
        emit("a.untracked", {})
        return {"scratch": "not stored"}

    builder = one_node("a", a, Scratch)
    thread = f"emit-untracked-{uuid.uuid4()}"
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        app = builder.compile(checkpointer=saver)
        app.invoke({"log": []}, {"configurable": {"thread_id": thread}}, durability=mode)
    assert [r["event_type"] for r in stored(dsn, thread)] == ["a.untracked"]


@pytest.mark.parametrize("mode", MODES)
def test_events_commit_with_their_task_in_every_mode(dsn: str, mode: Durability) -> None:
    thread = f"emit-{uuid.uuid4()}"
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        app = graph().compile(checkpointer=saver)
        app.invoke({"log": []}, {"configurable": {"thread_id": thread}}, durability=mode)
    rows = stored(dsn, thread)
    # Order is kept per key; across keys it is the order of the commits.
    assert [(r["event_type"], r["payload"]) for r in rows if r["key"] == thread] == [
        ("a.done", {"n": 1})
    ]
    assert [(r["event_type"], r["payload"]) for r in rows if r["key"] == "orders"] == [
        ("b.done", {"n": 2}),
        ("b.again", {"n": 3}),
    ]
    for row in rows:
        # The event's transaction stored its task's writes or the checkpoint carrying them.
        joined = write_xids(dsn, thread, row["task_id"]) | checkpoint_xids(dsn, thread)
        assert row["xid"] in joined


@pytest.mark.parametrize("mode", MODES)
def test_a_leased_run_s_events_commit_behind_its_fence(dsn: str, mode: Durability) -> None:
    """Under a lease each event carries the run's fencing token, and only statements
    behind that fence take it: the run's own writes and checkpoints do."""
    thread = f"emit-leased-{uuid.uuid4()}"
    config = leased_config(dsn, thread, 7)
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        app = graph().compile(checkpointer=saver)
        app.invoke({"log": []}, config, durability=mode)
    assert sorted(r["event_type"] for r in stored(dsn, thread)) == ["a.done", "b.again", "b.done"]


@pytest.mark.parametrize("mode", MODES)
async def test_async_saver_events_commit_with_their_task(dsn: str, mode: Durability) -> None:
    thread = f"emit-{uuid.uuid4()}"
    async with AsyncDurablePostgresSaver.from_conn_string(dsn) as saver:
        app = graph().compile(checkpointer=saver)
        await app.ainvoke({"log": []}, {"configurable": {"thread_id": thread}}, durability=mode)
    assert sorted(r["event_type"] for r in stored(dsn, thread)) == ["a.done", "b.again", "b.done"]
    assert [r["event_type"] for r in stored(dsn, thread) if r["key"] == "orders"] == [
        "b.done",
        "b.again",
    ]


@pytest.mark.parametrize("mode", MODES)
def test_a_failed_task_emits_nothing_and_a_retry_keeps_the_last_attempt(
    dsn: str, mode: Durability
) -> None:
    thread = f"emit-{uuid.uuid4()}"
    attempts: list[int] = []

    def flaky(state: State) -> State:
        attempts.append(1)
        emit("flaky.attempt", {"attempt": len(attempts)})
        if len(attempts) < 3:
            raise RuntimeError("not yet")
        return {"log": ["flaky"]}

    def fails(state: State) -> State:
        emit("fails.never", {})
        raise ValueError("boom")

    builder = StateGraph(State)
    builder.add_node(
        "flaky",
        flaky,
        retry_policy=RetryPolicy(max_attempts=3, initial_interval=0, retry_on=RuntimeError),
    )
    builder.add_node("fails", fails)
    builder.add_edge(START, "flaky")
    builder.add_edge("flaky", "fails")
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        app = builder.compile(checkpointer=saver)
        with pytest.raises(ValueError, match="boom"):
            app.invoke({"log": []}, {"configurable": {"thread_id": thread}}, durability=mode)
    assert [(r["event_type"], r["payload"]) for r in stored(dsn, thread)] == [
        ("flaky.attempt", {"attempt": 3})
    ]


@pytest.mark.parametrize("mode", MODES)
def test_an_interrupted_node_emits_once_when_it_finishes(dsn: str, mode: Durability) -> None:
    thread = f"emit-{uuid.uuid4()}"

    def ask(state: State) -> State:
        emit("ask.started", {})
        answer = interrupt("ok?")
        emit("ask.answered", {"answer": answer})
        return {"log": [answer]}

    builder = one_node("ask", ask)
    config: Any = {"configurable": {"thread_id": thread}}
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        app = builder.compile(checkpointer=saver)
        app.invoke({"log": []}, config, durability=mode)
        assert stored(dsn, thread) == []
        app.invoke(Command(resume="yes"), config, durability=mode)
    assert [(r["event_type"], r["payload"]) for r in stored(dsn, thread)] == [
        ("ask.started", {}),
        ("ask.answered", {"answer": "yes"}),
    ]


@pytest.mark.parametrize("mode", MODES)
def test_emit_inside_a_functional_task(dsn: str, mode: Durability) -> None:
    thread = f"emit-{uuid.uuid4()}"

    @task
    def ship(order: str) -> str:
        emit("order.shipped", {"order": order}, key=order)
        return order

    with DurablePostgresSaver.from_conn_string(dsn) as saver:

        @entrypoint(checkpointer=saver)
        def flow(orders: list[str]) -> list[str]:
            return [ship(o).result() for o in orders]

        flow.invoke(["o1", "o2"], {"configurable": {"thread_id": thread}}, durability=mode)
    assert sorted((r["event_type"], r["key"]) for r in stored(dsn, thread)) == [
        ("order.shipped", "o1"),
        ("order.shipped", "o2"),
    ]


def test_emit_outside_a_durable_graph_says_what_to_do() -> None:
    with pytest.raises(OutboxUnavailableError, match="emit_txn"):
        emit("x", {})


def test_emit_txn_commits_and_rolls_back_with_the_caller(dsn: str) -> None:
    key = f"k-{uuid.uuid4()}"
    with psycopg.connect(dsn) as conn:
        with conn.transaction(force_rollback=True):
            emit_txn(conn, "t.rolled_back", {}, key=key)
        with conn.transaction():
            event_id = emit_txn(conn, "t.committed", {"a": [1]}, key=key)
            again = emit_txn(conn, "t.committed", {"a": [1]}, key=key, event_id=event_id)
        assert again == event_id
        rows = conn.execute(
            "SELECT event_type FROM langgraph_durable_outbox WHERE key = %s", (key,)
        ).fetchall()
        assert rows == [("t.committed",)]
        assert backlog(conn)["pending"] >= 1
        with pytest.raises(InvalidEventError, match="JSON serializable"):
            emit_txn(conn, "bad", {"x": object()}, key=key)


def nested(depth: int) -> list[Any]:
    """A list holding a list, `depth` levels down."""
    outer: list[Any] = []
    inner = outer
    for _ in range(depth):
        inner.append([])
        inner = inner[0]
    return outer


def test_wrong_inputs_to_the_outbox_functions_raise_named_errors(dsn: str) -> None:
    """A payload nested past Python's recursion limit raised a raw RecursionError, from
    `emit_txn` and from `emit()` in a node; a negative or non-numeric `events(limit=)`
    and an inbox consumer or message id holding a NUL were raw psycopg errors."""
    from langgraph_durable.outbox import events, inbox_record_txn

    with psycopg.connect(dsn) as conn:
        with pytest.raises(InvalidEventError, match="nested too deeply"):
            emit_txn(conn, "deep", nested(5000), key="k")
        for limit in (-1, 0, "x", None, 2.5, True, 2**63):
            with pytest.raises(InvalidInputError, match=r"limit=.*whole number >= 1"):
                events(conn, limit=limit)  # type: ignore[arg-type]
        assert len(events(conn, limit=1)) <= 1
        refused = [("c\x00", "m"), ("c", "m\x00"), ("c", "m\udc80"), ("", "m"), ("c", 123)]
        for consumer, message_id in refused:
            with pytest.raises(InvalidInputError, match=r"inbox: .*non-empty string"):
                inbox_record_txn(conn, consumer, message_id)  # type: ignore[arg-type]
        event_id = uuid.uuid4()  # an event id as a UUID: its text, as before
        assert inbox_record_txn(conn, "c", event_id) is True  # type: ignore[arg-type]
        assert inbox_record_txn(conn, "c", str(event_id)) is False
        conn.rollback()

    def deep(state: State) -> State:
        emit("deep", nested(5000))
        return {}

    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        app = one_node("deep", deep).compile(checkpointer=saver)
        with pytest.raises(InvalidEventError, match="nested too deeply"):
            app.invoke({}, {"configurable": {"thread_id": f"emit-{uuid.uuid4()}"}})


async def test_aemit_txn(dsn: str) -> None:
    key = f"k-{uuid.uuid4()}"
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        async with conn.transaction():
            await aemit_txn(conn, "t.async", {"ok": True}, key=key)
        cur = await conn.execute(
            "SELECT payload FROM langgraph_durable_outbox WHERE key = %s", (key,)
        )
        assert await cur.fetchall() == [({"ok": True},)]


def test_an_effect_completion_event_commits_with_the_journal_row(dsn: str) -> None:
    from langgraph_durable import effect

    thread = f"emit-{uuid.uuid4()}"
    calls: list[str] = []

    @effect(name="refund", event="refund.sent", key=lambda order: f"refund:{thread}:{order}")
    def refund(order: str) -> dict[str, str]:
        calls.append(order)
        return {"refund": order}

    def pay_back(state: State) -> State:
        refund("o1")
        return {"log": ["refunded"]}

    builder = one_node("pay_back", pay_back)
    query = (
        "SELECT o.event_type, o.key, o.payload, o.xmin::text = e.xmin::text AS same_txn"
        " FROM langgraph_durable_outbox o JOIN langgraph_durable_effects e"
        " ON e.key = o.payload->>'key' WHERE e.key = %s"
    )
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        app = builder.compile(checkpointer=saver)
        app.invoke({"log": []}, {"configurable": {"thread_id": thread}})
        with psycopg.connect(dsn, row_factory=dict_row) as conn:
            rows = conn.execute(query, (f"refund:{thread}:o1",)).fetchall()
        assert rows == [
            {
                "event_type": "refund.sent",
                "key": thread,
                "payload": {
                    "key": f"refund:{thread}:o1",
                    "effect": "refund",
                    "result": {"refund": "o1"},
                },
                "same_txn": True,
            }
        ]
        # Another thread with the same business key replays the journal: no new event.
        app.invoke({"log": []}, {"configurable": {"thread_id": f"{thread}-again"}})
    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        assert len(conn.execute(query, (f"refund:{thread}:o1",)).fetchall()) == 1
    assert calls == ["o1"]


def test_an_effect_that_acts_again_after_its_thread_was_deleted_announces_it_again(
    dsn: str,
) -> None:
    """Deleting a thread deletes its default-keyed journal rows, so the thread id used
    again acts again; the completion event of that second act had the first's id and was
    dropped: the receiver acted and nothing announced it (I7)."""
    from langgraph_durable import effect

    thread = f"emit-{uuid.uuid4()}"
    calls: list[str] = []

    @effect(name="refund", event="refund.sent")
    def refund(order: str) -> dict[str, str]:
        calls.append(order)
        return {"refund": order}

    def pay_back(state: State) -> State:
        refund(state["log"][0])
        return {"log": ["refunded"]}

    config: Any = {"configurable": {"thread_id": thread}}
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        app = one_node("pay_back", pay_back).compile(checkpointer=saver)
        app.invoke({"log": ["A-1"]}, config)
        saver.delete_thread(thread)
        app.invoke({"log": ["B-2"]}, config)
    assert calls == ["A-1", "B-2"]
    assert [row["payload"]["result"] for row in stored(dsn, thread)] == [
        {"refund": "A-1"},
        {"refund": "B-2"},
    ]


def test_a_run_after_a_rollback_emits_its_own_events(dsn: str) -> None:
    """A `"rollback"` run goes through the same steps as the run it rolled back: its
    events were derived under that run's ids and dropped, though its effects acted again
    for its own input."""
    from langgraph_durable import GraphVersion, RunRegistry, RunStatus, Worker, durable_sleep

    class Order(TypedDict):
        order: str

    def ship(state: Order) -> Order:
        emit("order.shipped", {"order": state["order"]})
        return state

    def wait(state: Order) -> Order:
        if state["order"] == "A-1":
            durable_sleep(86_400)  # parked: the rollback finds it deferred
        return state

    builder = StateGraph(Order)
    builder.add_node("ship", ship)
    builder.add_node("wait", wait)
    builder.add_edge(START, "ship")
    builder.add_edge("ship", "wait")
    thread = f"emit-{uuid.uuid4()}"
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        graph = GraphVersion(f"orders-{thread}", "1", builder.compile(checkpointer=saver))
        runs = RunRegistry(saver)
        worker = Worker(saver, [graph])
        first = runs.create(graph, {"order": "A-1"}, thread_id=thread)
        assert [r.status for r in worker.run_until_idle()] == [RunStatus.DEFERRED]
        runs.create(graph, {"order": "B-2"}, thread_id=thread, multitask_strategy="rollback")
        assert runs.get(first.run_id).status is RunStatus.CANCELLED
        assert [r.status for r in worker.run_until_idle()] == [RunStatus.SUCCESS]
    assert [row["payload"] for row in stored(dsn, thread)] == [
        {"order": "A-1"},
        {"order": "B-2"},
    ]


def test_a_completion_resolved_by_hand_is_announced_like_any_other(dsn: str) -> None:
    """The receiver timed out (outcome unknown); an operator checked it acted and resolved
    the key as completed. Its `@effect(event=...)` event must be stored with that
    completion (I7), as the runner's own completions store theirs: consumers waiting for
    "refund.sent" would otherwise never hear of this refund."""
    from langgraph_durable import EffectJournal, EffectOutcomeUnknown, effect

    key = f"refund-by-hand:{uuid.uuid4()}"
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        journal = EffectJournal(saver.conn)

        @effect(name="refund", event="refund.sent", key=lambda: key, journal=journal)
        def refund() -> dict[str, str]:
            raise TimeoutError("the bank did not answer in time")

        with pytest.raises(EffectOutcomeUnknown):
            refund()
        journal.resolve(key, completed={"refund": "r-7"})
        assert refund() == {"refund": "r-7"}  # a replay of the resolved result
    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        rows = conn.execute(
            "SELECT event_type, key, payload FROM langgraph_durable_outbox"
            " WHERE payload->>'key' = %s",
            (key,),
        ).fetchall()
    assert rows == [
        {
            "event_type": "refund.sent",
            "key": key,
            "payload": {"key": key, "effect": "refund", "result": {"refund": "r-7"}},
        }
    ]


class Unreadable(dict):  # type: ignore[type-arg]
    """A result whose items cannot be read: JSON fails with an error of its own."""

    def items(self) -> Any:
        raise RuntimeError("not readable")

    def __reduce__(self) -> Any:  # stored as a plain dict by the journal's serializer
        return (dict, (dict(self),))


@pytest.mark.parametrize(
    ("result", "in_payload"),
    [
        ({"note": "a\x00b"}, {"result_type": "dict"}),  # a NUL: jsonb refuses it
        ("\ud800", {"result_type": "str"}),  # a lone surrogate: not valid text
        (float("nan"), {"result_type": "float"}),
        ({"code": "\\u0000"}, {"result": {"code": "\\u0000"}}),  # text that spells one
        (Unreadable({"a": 1}), {"result_type": "Unreadable"}),  # its own code fails
    ],
)
def test_an_effect_result_that_json_cannot_carry_still_completes(
    dsn: str, result: Any, in_payload: dict[str, Any]
) -> None:
    """The receiver has acted: its result is stored and the call returns it, whatever the
    completion event can carry; the event names the result's type instead."""
    from langgraph_durable import EffectJournal, effect

    key = f"odd-result:{uuid.uuid4()}"
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        journal = EffectJournal(saver.conn)

        @effect(name="odd", event="odd.done", key=lambda: key, journal=journal)
        def odd() -> Any:
            return result

        got = odd()
    assert got == result or (got != got and result != result)  # NaN is not NaN
    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        row = conn.execute(
            "SELECT status FROM langgraph_durable_effects WHERE key = %s", (key,)
        ).fetchone()
        events = conn.execute(
            "SELECT payload FROM langgraph_durable_outbox WHERE payload->>'key' = %s", (key,)
        ).fetchall()
    assert row == {"status": "completed"}
    assert [e["payload"] for e in events] == [{"key": key, "effect": "odd", **in_payload}]


def test_an_effect_event_type_must_be_text_postgres_stores() -> None:
    from langgraph_durable import effect

    with pytest.raises(InvalidInputError, match="without NUL or lone surrogates"):
        effect(name="x", event="x\x00done", key=lambda: "k")(lambda: None)


@pytest.mark.parametrize("mode", MODES)
def test_emit_inside_a_subgraph(dsn: str, mode: Durability) -> None:
    thread = f"emit-{uuid.uuid4()}"

    def inner(state: State) -> State:
        emit("inner.done", {})
        return {"log": ["inner"]}

    sub = StateGraph(State)
    sub.add_node("inner", inner)
    sub.add_edge(START, "inner")

    def outer(state: State) -> State:
        emit("outer.done", {})
        return {"log": ["outer"]}

    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        builder = StateGraph(State)
        builder.add_node("sub", sub.compile())
        builder.add_node("outer", outer)
        builder.add_edge(START, "sub")
        builder.add_edge("sub", "outer")
        app = builder.compile(checkpointer=saver)
        app.invoke({"log": []}, {"configurable": {"thread_id": thread}}, durability=mode)
    assert sorted(r["event_type"] for r in stored(dsn, thread)) == ["inner.done", "outer.done"]


@pytest.mark.parametrize("mode", MODES)
def test_two_sends_into_one_subgraph_emit_two_events(dsn: str, mode: Durability) -> None:
    """From inside, both executions of the subgraph look alike (the same inner node, step
    and path): under one id the second's event would be dropped."""
    thread = f"emit-{uuid.uuid4()}"

    def inner(state: State) -> State:
        emit("mail.sent", {"log": state["log"]})
        return {}

    sub = StateGraph(State)
    sub.add_node("inner", inner)
    sub.add_edge(START, "inner")
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        builder = StateGraph(State)
        builder.add_node("mailer", sub.compile())
        builder.add_conditional_edges(
            START, lambda s: [Send("mailer", {"log": [to]}) for to in ("ana", "bob")]
        )
        app = builder.compile(checkpointer=saver)
        app.invoke({"log": []}, {"configurable": {"thread_id": thread}}, durability=mode)
    payloads = sorted(r["payload"]["log"][0] for r in stored(dsn, thread))
    assert payloads == ["ana", "bob"]


@pytest.mark.parametrize("mode", ["sync", "async"])  # "exit" stores nothing to resume
def test_a_run_resumed_after_a_rejected_put_stores_its_writes_and_events(
    dsn: str, mode: Durability
) -> None:
    """A put rejected in one run (a value that cannot be serialized) refuses the writes
    against that checkpoint and later ones, not those of the next run, resumed from an
    older checkpoint: its node's writes and event are stored, and the run succeeds."""
    thread = f"emit-rejected-{uuid.uuid4()}"
    calls: list[int] = []

    class Bad(TypedDict, total=False):
        log: Annotated[list[str], operator.add]
        value: Any

    def a(state: Bad) -> Bad:
        calls.append(1)
        emit("a.done", {"call": len(calls)})
        return {"log": ["a"], "value": threading.Lock() if len(calls) == 1 else "fine"}

    builder = one_node("a", a, Bad)
    config: Any = {"configurable": {"thread_id": thread}}
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        app = builder.compile(checkpointer=saver)
        with pytest.raises(UnserializableValueError):
            app.invoke({"log": []}, config, durability=mode)
        assert app.invoke(None, config, durability=mode) == {"log": ["a"], "value": "fine"}
    assert [(r["event_type"], r["payload"]) for r in stored(dsn, thread)] == [
        ("a.done", {"call": 2})
    ]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_task_run_again_after_an_unfinished_run_commits_only_its_own_events(
    dsn: str, mode: Durability
) -> None:
    """A node emits, then its subgraph stops at a static interrupt: LangGraph stores no
    write for the node, so its events stay parked. Run again on resume, the node emits
    anew under the same event ids; only the finishing execution's events commit."""
    thread = f"emit-again-{uuid.uuid4()}"
    runs: list[int] = []
    sub = StateGraph(State)
    sub.add_node("step", lambda state: {"log": ["step"]})
    sub.add_edge(START, "step")
    subgraph = sub.compile(interrupt_before=["step"])

    def quote(state: State) -> State:
        runs.append(1)
        emit("quote", {"price": 100 * len(runs)})
        if len(runs) == 1:
            emit("quote.first_run_only", {})
        subgraph.invoke({"log": []})
        return {"log": ["quote"]}

    builder = one_node("quote", quote)
    config: Any = {"configurable": {"thread_id": thread}}
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        app = builder.compile(checkpointer=saver)
        app.invoke({"log": []}, config, durability=mode)
        assert stored(dsn, thread) == []
        app.invoke(None, config, durability=mode)
    assert len(runs) == 2
    assert [(r["event_type"], r["payload"]) for r in stored(dsn, thread)] == [
        ("quote", {"price": 200})
    ]


@pytest.mark.parametrize("mode", MODES)
def test_a_subgraph_node_that_hands_its_update_to_the_parent_keeps_its_events(
    dsn: str, mode: Durability
) -> None:
    """`Command(graph=Command.PARENT)` makes the node's update the parent task's write, and
    the subgraph stores no write of that node: its events commit with the parent task's."""
    thread = f"emit-parent-command-{uuid.uuid4()}"

    def pay(state: State) -> Command[str]:
        emit("paid", {"n": 1})
        emit("receipt.sent", {"n": 2})
        return Command(graph=Command.PARENT, update={"log": ["pay"]}, goto="done")

    sub = StateGraph(State)
    sub.add_node("pay", pay)
    sub.add_edge(START, "pay")
    builder = StateGraph(State)
    builder.add_node("checkout", sub.compile(), destinations=("done",))
    builder.add_node("done", lambda state: {"log": ["done"]})
    builder.add_edge(START, "checkout")
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        app = builder.compile(checkpointer=saver)
        result = app.invoke({"log": []}, {"configurable": {"thread_id": thread}}, durability=mode)
    assert result == {"log": ["pay", "done"]}
    assert [(r["event_type"], r["payload"]) for r in stored(dsn, thread)] == [
        ("paid", {"n": 1}),
        ("receipt.sent", {"n": 2}),
    ]
