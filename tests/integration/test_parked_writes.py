"""A step's writes and the checkpoint after them commit together: one commit per step.

Proof by transaction id: rows inserted by one transaction share `xmin`. With a linger no
put can miss the fold is deterministic; without parking every write row has an `xmin` of
its own.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Sequence
from typing import Annotated, Any

import psycopg
import pytest
from _pg import leased_config
from graphs import State
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import AsyncDurablePostgresSaver, DurablePostgresSaver
from langgraph_durable.errors import ConfigurationError

NODES = ["a", "b", "c", "d"]

HANG_S = 60.0


def outwait_any_load(saver: DurablePostgresSaver | AsyncDurablePostgresSaver) -> None:
    """Parked writes wait up to HANG_S for their put, not the 1 s the setting allows.

    Writes whose put comes after the linger are stored alone, and their thread stops
    parking for its next 64 checkpoints: with any linger a loaded machine could miss, the
    fold would depend on its speed. A correct run never waits this out: the put takes them.
    """
    saver._parking._registry.linger = HANG_S


def linear_graph(state: Any = State) -> StateGraph[Any, Any, Any, Any]:
    builder = StateGraph(state)
    previous = START
    for name in NODES:
        builder.add_node(name, lambda s, name=name: {"log": [name]})
        builder.add_edge(previous, name)
        previous = name
    builder.add_edge(previous, END)
    return builder


def write_rows_sharing_a_checkpoint_transaction(dsn: str, thread: str) -> tuple[int, int]:
    """(write rows, of which committed in the transaction of some checkpoint row)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            """
            SELECT count(*),
                count(*) FILTER (WHERE w.xmin::text IN (
                    SELECT c.xmin::text FROM checkpoints c WHERE c.thread_id = %(t)s))
            FROM checkpoint_writes w WHERE w.thread_id = %(t)s
            """,
            {"t": thread},
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


@pytest.mark.parametrize(("linger", "folded"), [(1.0, True), (0.0, False)])
def test_sync_saver_commits_each_steps_writes_with_the_next_checkpoint(
    db_dsn: str, linger: float, folded: bool
) -> None:
    thread = f"fold-{uuid.uuid4()}"
    with DurablePostgresSaver.from_conn_string(db_dsn, write_linger=linger) as saver:
        saver.setup()
        if folded:
            outwait_any_load(saver)
        graph = linear_graph().compile(checkpointer=saver)
        out = graph.invoke({"log": []}, {"configurable": {"thread_id": thread}}, durability="sync")
    assert out["log"] == NODES
    rows, shared = write_rows_sharing_a_checkpoint_transaction(db_dsn, thread)
    assert rows >= len(NODES)
    assert shared == (rows if folded else 0)


async def test_async_saver_commits_each_steps_writes_with_the_next_checkpoint(
    db_dsn: str,
) -> None:
    thread = f"fold-{uuid.uuid4()}"
    async with AsyncDurablePostgresSaver.from_conn_string(db_dsn, write_linger=1.0) as saver:
        await saver.setup()
        outwait_any_load(saver)
        graph = linear_graph().compile(checkpointer=saver)
        config: Any = {"configurable": {"thread_id": thread}}
        out = await graph.ainvoke({"log": []}, config, durability="sync")
    assert out["log"] == NODES
    rows, shared = write_rows_sharing_a_checkpoint_transaction(db_dsn, thread)
    assert rows >= len(NODES)
    assert shared == rows


def test_a_fenced_run_s_writes_fold_into_its_own_puts(db_dsn: str) -> None:
    """Under a lease every write carries the run's token, and so does its put: the put
    takes them (a put takes only writes parked under its own token)."""
    thread = f"fold-fenced-{uuid.uuid4()}"
    with DurablePostgresSaver.from_conn_string(db_dsn, write_linger=1.0) as saver:
        saver.setup()
        outwait_any_load(saver)
        graph = linear_graph().compile(checkpointer=saver)
        out = graph.invoke({"log": []}, leased_config(db_dsn, thread, 7), durability="sync")
    assert out["log"] == NODES
    rows, shared = write_rows_sharing_a_checkpoint_transaction(db_dsn, thread)
    assert rows >= len(NODES)
    assert shared == rows


async def test_a_fenced_async_run_s_writes_fold_into_its_own_puts(db_dsn: str) -> None:
    thread = f"fold-fenced-{uuid.uuid4()}"
    async with AsyncDurablePostgresSaver.from_conn_string(db_dsn, write_linger=1.0) as saver:
        await saver.setup()
        outwait_any_load(saver)
        graph = linear_graph().compile(checkpointer=saver)
        out = await graph.ainvoke({"log": []}, leased_config(db_dsn, thread, 7), durability="sync")
    assert out["log"] == NODES
    rows, shared = write_rows_sharing_a_checkpoint_transaction(db_dsn, thread)
    assert rows >= len(NODES)
    assert shared == rows


def test_writes_without_a_following_checkpoint_are_stored_after_the_linger(db_dsn: str) -> None:
    thread = f"fold-{uuid.uuid4()}"
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    with DurablePostgresSaver.from_conn_string(db_dsn, write_linger=0.05) as saver:
        saver.setup()
        parent = saver.put(config, empty_checkpoint(), {}, {})
        saver.put_writes(parent, [("log", ["x"])], "task-1")
        stored = saver.get_tuple(parent)
    assert stored is not None
    assert [(task, channel) for task, channel, _ in stored.pending_writes or []] == [
        ("task-1", "log")
    ]
    assert write_rows_sharing_a_checkpoint_transaction(db_dsn, thread) == (1, 0)


@pytest.mark.parametrize("linger", [-0.1, 5.0])
def test_write_linger_out_of_range_is_a_configuration_error(db_dsn: str, linger: float) -> None:
    with (
        pytest.raises(ConfigurationError, match="write_linger"),
        DurablePostgresSaver.from_conn_string(db_dsn, write_linger=linger),
    ):
        pass


def _extend(state: list[str], writes: Sequence[list[str]]) -> list[str]:
    return [*state, *(item for batch in writes for item in batch)]


class DeltaState(TypedDict, total=False):
    log: Annotated[list[str], DeltaChannel(_extend)]


def delta_graph() -> StateGraph[Any, Any, Any, Any]:
    return linear_graph(DeltaState)


def failing_graph() -> StateGraph[Any, Any, Any, Any]:
    def fail(state: State) -> dict[str, Any]:
        raise RuntimeError("receiver down")

    builder = StateGraph(State)
    builder.add_node("a", lambda s: {"log": ["a"]})
    builder.add_node("fail", fail, error_handler=lambda s: {"log": ["handled"]})
    builder.add_edge(START, "a")
    builder.add_edge("a", "fail")
    builder.add_edge("fail", END)
    return builder


@pytest.mark.parametrize(
    ("make", "expected", "waited_for"),
    [
        (delta_graph, NODES, {"log"}),
        (failing_graph, ["a", "handled"], {"__error__", "__error_source_node__"}),
    ],
    ids=["delta-channel", "error-handler"],
)
def test_writes_langgraph_waits_for_are_not_held_back(
    db_dsn: str, make: Any, expected: list[str], waited_for: set[str]
) -> None:
    """LangGraph waits for DeltaChannel writes before the next save, and for an error's
    writes before the handler runs. Parked, each would hold its step for the whole linger
    (1 s here), so they are stored at once; the regular writes around them still park."""
    thread = f"fold-{uuid.uuid4()}"
    config: Any = {"configurable": {"thread_id": thread}}
    calls: list[tuple[set[str], bool]] = []
    with DurablePostgresSaver.from_conn_string(db_dsn, write_linger=1.0) as saver:
        saver.setup()
        store = saver._parking.store

        def spy(key: Any, prepare: Any, store_alone: Any, **kwargs: Any) -> bool:
            def recorded() -> tuple[bool, dict[str, Any]]:
                park, params = prepare()
                calls.append((set(params["channels"]), park))
                return park, params

            return store(key, recorded, store_alone, **kwargs)

        saver._parking.store = spy  # type: ignore[method-assign]
        out = make().compile(checkpointer=saver).invoke({"log": []}, config, durability="sync")
    assert out["log"] == expected
    held = [channels for channels, park in calls if park]
    assert any(channels & waited_for for channels, _ in calls)
    assert not any(channels & waited_for for channels in held), calls


def _fan_out_with_an_interrupt(parked: Any, *, is_async: bool) -> StateGraph[Any, Any, Any, Any]:
    """START -> "done" and "asks" side by side; "asks" interrupts once "done"'s writes
    wait for a checkpoint (`parked()`, first run only), which never comes: the step ends
    in the interrupt."""
    from langgraph.types import interrupt

    builder = StateGraph(State)
    builder.add_node("done", lambda s: {"log": ["done"]})
    asked: list[bool] = []
    if is_async:

        async def asks(state: Any) -> dict[str, Any]:
            for _ in range(10_000_000 if not asked else 0):  # first run only
                if parked():
                    break
                await asyncio.sleep(0)
            asked.append(True)
            return {"log": [interrupt("ok?")]}

        builder.add_node("asks", asks)
    else:

        def asks_sync(state: Any) -> dict[str, Any]:
            pause = threading.Event()
            while not asked and not parked():  # first run only
                pause.wait(0.001)
            asked.append(True)
            return {"log": [interrupt("ok?")]}

        builder.add_node("asks", asks_sync)
    builder.add_edge(START, "done")
    builder.add_edge(START, "asks")
    builder.add_edge("done", END)
    builder.add_edge("asks", END)
    return builder


def task_write_channels(dsn: str, thread: str) -> list[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT channel FROM checkpoint_writes WHERE thread_id = %s ORDER BY channel",
            (thread,),
        ).fetchall()
    return [row[0] for row in rows]


@pytest.mark.parametrize("flavor", ["sync", "async"])
async def test_a_step_ending_in_an_interrupt_has_stored_its_siblings_writes_on_return(
    db_dsn: str, flavor: str
) -> None:
    """A sibling's writes waited for a checkpoint that the interrupt ends the step before:
    `put_writes` had returned, yet when the run returns they are in the database (not
    only after a read, nor after the 1 s linger), and the resume does not run it again."""
    from langgraph.types import Command

    thread = f"fold-{uuid.uuid4()}"
    config: Any = {"configurable": {"thread_id": thread}}
    if flavor == "sync":
        with DurablePostgresSaver.from_conn_string(db_dsn, write_linger=1.0) as saver:
            saver.setup()
            outwait_any_load(saver)
            graph = _fan_out_with_an_interrupt(
                lambda: bool(saver._parking._registry.parked), is_async=False
            ).compile(checkpointer=saver)
            graph.invoke({"log": []}, config, durability="sync")
            stored = task_write_channels(db_dsn, thread)
            out = graph.invoke(Command(resume="yes"), config, durability="sync")
    else:
        async with AsyncDurablePostgresSaver.from_conn_string(db_dsn, write_linger=1.0) as asaver:
            await asaver.setup()
            outwait_any_load(asaver)
            agraph = _fan_out_with_an_interrupt(
                lambda: bool(asaver._parking._registry.parked), is_async=True
            ).compile(checkpointer=asaver)
            await agraph.ainvoke({"log": []}, config, durability="sync")
            stored = task_write_channels(db_dsn, thread)
            out = await agraph.ainvoke(Command(resume="yes"), config, durability="sync")
    assert stored.count("log") == 2  # the input's, and "done"'s result
    assert "__interrupt__" in stored
    assert sorted(out["log"]) == ["done", "yes"]  # "done" ran once


@pytest.mark.parametrize("flavor", ["sync", "async"])
async def test_flush_writes_stores_the_writes_still_waiting_for_their_checkpoint(
    db_dsn: str, flavor: str
) -> None:
    """`put_writes` in a running graph returns once its writes are parked; no checkpoint
    follows here, and `flush_writes()` commits them at once (not after the linger)."""
    from langgraph._internal._constants import CONFIG_KEY_RUNTIME

    thread = f"fold-{uuid.uuid4()}"
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    if flavor == "sync":
        with DurablePostgresSaver.from_conn_string(db_dsn, write_linger=1.0) as saver:
            saver.setup()
            outwait_any_load(saver)
            parent: Any = saver.put(config, empty_checkpoint(), {}, {})
            in_loop = {"configurable": {**parent["configurable"], CONFIG_KEY_RUNTIME: object()}}
            saver.put_writes(in_loop, [("log", ["x"])], "task-1")
            waiting = task_write_channels(db_dsn, thread)
            saver.flush_writes()
            stored = task_write_channels(db_dsn, thread)
    else:
        async with AsyncDurablePostgresSaver.from_conn_string(db_dsn, write_linger=1.0) as asaver:
            await asaver.setup()
            outwait_any_load(asaver)
            parent = await asaver.aput(config, empty_checkpoint(), {}, {})
            in_loop = {"configurable": {**parent["configurable"], CONFIG_KEY_RUNTIME: object()}}
            await asaver.aput_writes(in_loop, [("log", ["x"])], "task-1")
            waiting = task_write_channels(db_dsn, thread)
            await asaver.aflush_writes()
            stored = task_write_channels(db_dsn, thread)
    assert waiting == []  # parked: put_writes returned before they were stored
    assert stored == ["log"]
