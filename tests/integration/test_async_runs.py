"""The async path of runs on a real database: `AsyncRunRegistry` and `AsyncWorker` with
async graphs (`ainvoke`), mirroring cases of `test_runs.py`.

Each test names its graphs itself, so workers of different tests never take each other's
runs. Time-based states are reached by moving times in the database, never by sleeping;
waits between tasks are on events, with a generous hang guard.
"""

from __future__ import annotations

import asyncio
import logging
import operator
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any

import psycopg
import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict
from worker_clock import skew_worker_clock

from langgraph_durable import (
    AsyncDurablePostgresSaver,
    AsyncRunRegistry,
    AsyncWorker,
    ConfigurationError,
    DurablePostgresSaver,
    FencedOutError,
    GraphVersion,
    RunConflictError,
    RunStatus,
    ThreadBusyError,
    adurable_sleep,
    adurable_sleep_until,
    durable_sleep,
    effect,
)

HANG_GUARD_S = 120


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    answer: Any


@asynccontextmanager
async def registry(dsn: str) -> AsyncIterator[tuple[AsyncDurablePostgresSaver, AsyncRunRegistry]]:
    async with AsyncDurablePostgresSaver.from_conn_string(dsn) as saver:
        await saver.setup()
        yield saver, AsyncRunRegistry(saver)


def graph_of(saver: AsyncDurablePostgresSaver, *nodes: tuple[str, Any]) -> GraphVersion:
    builder = StateGraph(State)
    previous = START
    for node, fn in nodes:
        builder.add_node(node, fn)
        builder.add_edge(previous, node)
        previous = node
    builder.add_edge(previous, END)
    return GraphVersion(f"ag-{uuid.uuid4().hex[:8]}", "1", builder.compile(checkpointer=saver))


def step(name: str) -> tuple[str, Any]:
    async def node(state: State) -> State:
        await asyncio.sleep(0)  # a real coroutine node, run under ainvoke
        return {"log": [name]}

    return name, node


async def sql(dsn: str, statement: str, *params: Any) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(statement, params)
        return await cur.fetchall() if cur.description else []


async def test_an_async_run_is_taken_run_and_awaited(db_dsn: str) -> None:
    async with registry(db_dsn) as (saver, runs):
        graph = graph_of(saver, step("a"), step("b"))
        run = await runs.acreate(graph, {"log": []})
        assert run.status is RunStatus.PENDING
        (done,) = await AsyncWorker(saver, [graph]).arun_until_idle()
        assert (done.run_id, done.status, done.attempt) == (run.run_id, RunStatus.SUCCESS, 1)
        assert runs.output_of(done) == {"log": ["a", "b"]}
        assert (await runs.await_for(run.run_id)).status is RunStatus.SUCCESS
        assert [r.run_id for r in await runs.alist(thread_id=run.thread_id)] == [run.run_id]


async def test_a_worker_running_forever_is_woken_by_a_new_run(db_dsn: str) -> None:
    async with registry(db_dsn) as (saver, runs):
        graph = graph_of(saver, step("a"))
        worker = AsyncWorker(saver, [graph], idle_wait=60)  # only a notification wakes it
        task = asyncio.create_task(worker.arun_forever())
        try:
            run = await runs.acreate(graph, {"log": []})
            done = await asyncio.wait_for(runs.await_for(run.run_id), HANG_GUARD_S)
            assert done.status is RunStatus.SUCCESS
            live = [w for w in await runs.aworkers() if w["worker_id"] == worker.worker_id]
            assert live
            assert live[0]["live"]
        finally:
            worker.stop()
            await runs.acreate(graph, {"log": []})  # wakes it to see the stop
            await asyncio.wait_for(task, HANG_GUARD_S)
        assert not [w for w in await runs.aworkers() if w["worker_id"] == worker.worker_id]


async def test_an_interrupted_async_run_is_resumed_with_a_command(db_dsn: str) -> None:
    async def ask(state: State) -> State:
        return {"answer": interrupt("ok?")}

    async with registry(db_dsn) as (saver, runs):
        graph = graph_of(saver, step("a"), ("ask", ask))
        worker = AsyncWorker(saver, [graph])
        run = await runs.acreate(graph, {"log": []})
        (waiting,) = await worker.arun_until_idle()
        assert waiting.status is RunStatus.INTERRUPTED
        assert (await runs.await_for(run.run_id)).status is RunStatus.INTERRUPTED
        resumed = await runs.aresume(run.run_id, Command(resume="yes"))
        assert isinstance(runs.input_of(resumed), Command)
        (done,) = await worker.arun_until_idle()
        assert done.status is RunStatus.SUCCESS
        assert runs.output_of(done) == {"log": ["a"], "answer": "yes"}
        with pytest.raises(RunConflictError, match="is success"):
            await runs.aresume(run.run_id, Command(resume="again"))


async def test_adurable_sleep_defers_an_async_run_until_due(db_dsn: str) -> None:
    ran: list[str] = []
    due = datetime.now(timezone.utc) + timedelta(days=3)

    async def remind(state: State) -> State:
        # A delay computed from the clock: another value on the resume, which must not
        # fail the run (the first call's wake-up time wins).
        await adurable_sleep(due - datetime.now(timezone.utc))
        ran.append("reminder")
        return {"log": ["reminded"]}

    async with registry(db_dsn) as (saver, runs):
        graph = graph_of(saver, step("order"), ("remind", remind))
        worker = AsyncWorker(saver, [graph])
        run = await runs.acreate(graph, {"log": []})
        (sleeping,) = await worker.arun_until_idle()
        assert sleeping.status is RunStatus.DEFERRED
        assert sleeping.agent_server_status == "pending"
        assert sleeping.retry_at is not None
        assert await worker.arun_until_idle() == []  # not before its time
        # Three days pass: the journaled wake-up time and the run's retry time come due.
        woken = saver.serde.dumps_typed(
            (datetime.now(timezone.utc) - timedelta(seconds=1)).isoformat()
        )
        await sql(
            db_dsn,
            "UPDATE langgraph_durable_effects SET result_type = %s, result = %s "
            "WHERE thread_id = %s AND effect_name = 'langgraph_durable.durable_sleep'",
            *woken,
            run.thread_id,
        )
        await sql(
            db_dsn,
            "UPDATE langgraph_durable_runs SET retry_at = now() WHERE run_id = %s",
            run.run_id,
        )
        (done,) = await worker.arun_until_idle()
        assert done.status is RunStatus.SUCCESS, done.error_message
        assert ran == ["reminder"]
        assert runs.output_of(done) == {"log": ["order", "reminded"]}


@pytest.mark.parametrize("short", ["reminder", "followup"])
async def test_parallel_async_sleeps_park_the_run_until_the_earliest_wake_up(
    db_dsn: str, short: str
) -> None:
    """Two async branches sleep side by side: the run was parked until the time of the
    deferral LangGraph let out, an hour late for the short sleep in one order. LangGraph
    cancels the other branch as the first deferral comes out: one cancelled before it
    journaled its wake-up time computes it when the run wakes (a claim without a result
    here), and the run is parked until the earliest of those journaled."""

    def sleeper(seconds: int) -> Any:
        async def node(state: State) -> State:
            await adurable_sleep(seconds)
            return {"log": [str(seconds)]}

        return node

    async with registry(db_dsn) as (saver, runs):
        builder = StateGraph(State)
        for name in ("reminder", "followup"):
            builder.add_node(name, sleeper(60 if name == short else 3600))
            builder.add_edge(START, name)
            builder.add_edge(name, END)
        compiled = builder.compile(checkpointer=saver)
        graph = GraphVersion(f"ag-{uuid.uuid4().hex[:8]}", "1", compiled)
        run = await runs.acreate(graph, {"log": []})
        (sleeping,) = await AsyncWorker(saver, [graph]).arun_until_idle()
        assert sleeping.status is RunStatus.DEFERRED
        rows = await sql(
            db_dsn,
            "SELECT result_type, result FROM langgraph_durable_effects WHERE thread_id = %s "
            "AND effect_name = 'langgraph_durable.durable_sleep'",
            run.thread_id,
        )
        wakes = [datetime.fromisoformat(saver.serde.loads_typed((t, r))) for t, r in rows if t]
        assert wakes
        assert sleeping.retry_at == min(wakes)


async def test_adurable_sleep_until_defers_an_async_run_until_that_moment(db_dsn: str) -> None:
    due = datetime.now(timezone.utc) + timedelta(days=2)

    async def remind(state: State) -> State:
        await adurable_sleep_until(due)
        return {"log": ["reminded"]}

    async with registry(db_dsn) as (saver, runs):
        graph = graph_of(saver, ("remind", remind))
        await runs.acreate(graph, {"log": []})
        (sleeping,) = await AsyncWorker(saver, [graph]).arun_until_idle()
        assert sleeping.status is RunStatus.DEFERRED
        assert sleeping.retry_at is not None
        assert abs((sleeping.retry_at - due).total_seconds()) < 60


async def test_an_async_worker_whose_clock_runs_ahead_does_not_wake_a_sleep_early(
    db_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`adurable_sleep` compares its wake-up time with the database's clock: on its own
    clock, a worker a day ahead found the hour another worker journaled over at once."""

    async def remind(state: State) -> State:
        await adurable_sleep(3600)
        return {"log": ["woke"]}

    async with registry(db_dsn) as (saver, runs):
        graph = graph_of(saver, ("remind", remind))
        worker = AsyncWorker(saver, [graph])
        run = await runs.acreate(graph, {"log": []})
        (sleeping,) = await worker.arun_until_idle(max_runs=1)
        assert sleeping.status is RunStatus.DEFERRED
        skew_worker_clock(monkeypatch, timedelta(days=1))  # the next worker's clock is ahead
        await sql(  # and takes the run before its time
            db_dsn,
            "UPDATE langgraph_durable_runs SET retry_at = now() WHERE run_id = %s",
            run.run_id,
        )
        (again,) = await worker.arun_until_idle(max_runs=1)
        assert again.status is RunStatus.DEFERRED, runs.output_of(again)  # still asleep
        assert again.retry_at == sleeping.retry_at  # its wake-up time, not due at once


async def test_adurable_sleep_until_sleeps_until_that_moment_whatever_the_workers_clock(
    db_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The time left is counted on the database's clock: a worker a day ahead took a
    moment two hours away for a past one and did not wait."""
    ((due,),) = await sql(db_dsn, "SELECT clock_timestamp() + interval '2 hours'")

    async def remind(state: State) -> State:
        await adurable_sleep_until(due)
        return {"log": ["woke"]}

    async with registry(db_dsn) as (saver, runs):
        graph = graph_of(saver, ("remind", remind))
        run = await runs.acreate(graph, {"log": []})
        skew_worker_clock(monkeypatch, timedelta(days=1))
        (sleeping,) = await AsyncWorker(saver, [graph]).arun_until_idle(max_runs=1)
        assert sleeping.status is RunStatus.DEFERRED
        assert await journaled_wake(saver, db_dsn, run.thread_id) == due
        assert sleeping.retry_at == due


async def test_a_sync_node_under_an_async_worker_sleeps_by_the_database_clock(
    db_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`durable_sleep` in a sync node of an async graph reads the database's clock through
    the async saver's loop, as its journaled effect does."""

    def remind(state: State) -> State:
        durable_sleep(3600)
        return {"log": ["woke"]}

    async with registry(db_dsn) as (saver, runs):
        graph = graph_of(saver, ("remind", remind))
        run = await runs.acreate(graph, {"log": []})
        skew_worker_clock(monkeypatch, timedelta(days=1))
        ((before,),) = await sql(db_dsn, "SELECT clock_timestamp()")
        (sleeping,) = await AsyncWorker(saver, [graph]).arun_until_idle(max_runs=1)
        ((after,),) = await sql(db_dsn, "SELECT clock_timestamp()")
        assert sleeping.status is RunStatus.DEFERRED, sleeping.error_message
        wake = await journaled_wake(saver, db_dsn, run.thread_id)
        assert before <= wake - timedelta(hours=1) <= after
        assert sleeping.retry_at == wake


async def journaled_wake(saver: AsyncDurablePostgresSaver, dsn: str, thread_id: str) -> Any:
    """The wake-up time the thread's `adurable_sleep` journaled."""
    ((result_type, result),) = await sql(
        dsn,
        "SELECT result_type, result FROM langgraph_durable_effects "
        "WHERE thread_id = %s AND effect_name = 'langgraph_durable.durable_sleep'",
        thread_id,
    )
    return datetime.fromisoformat(saver.serde.loads_typed((result_type, result)))


async def test_an_async_worker_that_lost_its_run_cannot_advance_the_thread(db_dsn: str) -> None:
    inside, release = asyncio.Event(), asyncio.Event()

    async def slow(state: State) -> State:
        inside.set()
        await release.wait()
        return {"log": ["slow"]}

    async with registry(db_dsn) as (saver, runs):
        graph = graph_of(saver, step("a"), ("slow", slow), step("after"))
        run = await runs.acreate(graph, {"log": []})
        task = asyncio.create_task(AsyncWorker(saver, [graph]).arun_until_idle())
        await asyncio.wait_for(inside.wait(), HANG_GUARD_S)
        count = "SELECT count(*) FROM checkpoints WHERE thread_id = %s"
        before = await sql(db_dsn, count, run.thread_id)
        assert (await runs.acancel(run.run_id)).status is RunStatus.CANCELLED
        release.set()
        (finished,) = await asyncio.wait_for(task, HANG_GUARD_S)
        assert finished.status is RunStatus.CANCELLED  # the worker did not overwrite it
        assert await sql(db_dsn, count, run.thread_id) == before  # its next step was refused


@pytest.mark.parametrize("durability", ["async", "exit"])
async def test_a_cancelled_async_runs_later_effects_do_not_act(
    db_dsn: str, durability: str
) -> None:
    """See the sync test: under "async" and "exit" the next steps ran before the fenced
    checkpoint write failed, and their effects acted."""
    inside, release = asyncio.Event(), asyncio.Event()
    sent: list[str] = []

    async def slow(state: State) -> State:
        inside.set()
        await release.wait()
        return {"log": ["slow"]}

    @effect(key=lambda what: f"mail-{what}-{uuid.uuid4()}")
    async def mail(what: str) -> str:
        sent.append(what)
        return what

    async def notify(state: State) -> State:
        return {"log": [await mail("notify")]}

    async with registry(db_dsn) as (saver, runs):
        graph = graph_of(saver, ("slow", slow), ("notify", notify), step("after"))
        run = await runs.acreate(graph, {"log": []}, durability=durability)  # type: ignore[arg-type]
        task = asyncio.create_task(AsyncWorker(saver, [graph]).arun_until_idle())
        await asyncio.wait_for(inside.wait(), HANG_GUARD_S)
        assert (await runs.acancel(run.run_id)).status is RunStatus.CANCELLED
        release.set()
        (finished,) = await asyncio.wait_for(task, HANG_GUARD_S)
        assert finished.status is RunStatus.CANCELLED
    assert sent == []


@pytest.mark.parametrize("durability", ["async", "exit"])
async def test_an_async_run_that_lost_its_lease_stops_after_the_step_under_way(
    db_dsn: str, durability: str
) -> None:
    """See the sync test: the worker drains a run whose heartbeat finds the lease gone."""
    inside, release, noticed = asyncio.Event(), asyncio.Event(), asyncio.Event()
    ran: list[str] = []

    class Notice(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "lease was taken over" in record.getMessage():
                noticed.set()  # logged on this loop's thread, by the worker's heartbeat

    async def slow(state: State) -> State:
        inside.set()
        await release.wait()
        return {"log": ["slow"]}

    async def after(state: State) -> State:
        ran.append("after")
        return {"log": ["after"]}

    notice = Notice()
    logging.getLogger("langgraph_durable.runs").addHandler(notice)
    try:
        async with registry(db_dsn) as (saver, runs):
            graph = graph_of(saver, ("slow", slow), ("after", after), step("last"))
            run = await runs.acreate(graph, {"log": []}, durability=durability)  # type: ignore[arg-type]
            worker = AsyncWorker(saver, [graph], lease_seconds=0.6)  # a heartbeat every 0.2 s
            task = asyncio.create_task(worker.arun_until_idle())
            try:
                await asyncio.wait_for(inside.wait(), HANG_GUARD_S)
                assert (await runs.acancel(run.run_id)).status is RunStatus.CANCELLED
                await asyncio.wait_for(noticed.wait(), HANG_GUARD_S)
            finally:
                release.set()
            (finished,) = await asyncio.wait_for(task, HANG_GUARD_S)
            assert finished.status is RunStatus.CANCELLED
    finally:
        logging.getLogger("langgraph_durable.runs").removeHandler(notice)
    assert ran == []


async def test_a_busy_async_worker_still_sweeps_and_times_its_own_run_out(db_dsn: str) -> None:
    """One async worker, busy in a node of its only run, times the run out itself (its
    sweep goes on while the run runs) and fences it out: the run ends as `timeout`."""
    inside, release = asyncio.Event(), asyncio.Event()

    async def slow(state: State) -> State:
        inside.set()
        await release.wait()
        return {"log": ["slow"]}

    async with registry(db_dsn) as (saver, runs):
        graph = graph_of(saver, step("a"), ("slow", slow), step("after"))
        run = await runs.acreate(graph, {"log": []}, timeout=3600)
        worker = AsyncWorker(saver, [graph], lease_seconds=0.6)  # sweeps every 0.2 s
        task = asyncio.create_task(worker.arun_until_idle())
        try:
            await asyncio.wait_for(inside.wait(), HANG_GUARD_S)
            count = "SELECT count(*) FROM checkpoints WHERE thread_id = %s"
            before = await sql(db_dsn, count, run.thread_id)
            await sql(
                db_dsn,
                "UPDATE langgraph_durable_runs SET deadline_at = now() - interval '1 second'"
                " WHERE run_id = %s",
                run.run_id,
            )
            ended = await runs.await_for(run.run_id, timeout=HANG_GUARD_S)
            assert ended.status is RunStatus.TIMEOUT  # while the node still runs
        finally:
            release.set()
            done = await asyncio.wait_for(task, HANG_GUARD_S)
        (finished,) = done
        assert finished.status is RunStatus.TIMEOUT
        assert await sql(db_dsn, count, run.thread_id) == before  # its next step was refused


async def test_aexclusive_lets_one_plain_ainvoke_run_a_thread(db_dsn: str) -> None:
    async with registry(db_dsn) as (saver, runs):
        graph = graph_of(saver, step("a")).graph
        thread = f"t-{uuid.uuid4()}"
        async with runs.aexclusive(thread) as config:
            with pytest.raises(ThreadBusyError, match="held by another process"):
                async with runs.aexclusive(thread):
                    pass
            assert await graph.ainvoke({"log": []}, config) == {"log": ["a"]}
        async with runs.aexclusive(thread) as stale:
            await sql(
                db_dsn,
                "UPDATE langgraph_durable_threads SET lease_expires_at = now() - interval '1s' "
                "WHERE thread_id = %s",
                thread,
            )
            async with runs.aexclusive(thread) as fresh:
                await graph.ainvoke({"log": []}, fresh)
            with pytest.raises(FencedOutError, match="no longer holds the thread"):
                await graph.ainvoke({"log": []}, stale)


async def test_the_flavours_are_not_mixed(db_dsn: str) -> None:
    with (
        DurablePostgresSaver.from_conn_string(db_dsn) as sync_saver,
        pytest.raises(ConfigurationError, match="AsyncDurablePostgresSaver"),
    ):
        AsyncRunRegistry(sync_saver)  # type: ignore[arg-type]
