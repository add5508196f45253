"""A step whose writes were stored but whose checkpoint was not: `next == ()`, not finished.

Seen after a long outage: one thread showed `next == ()` with its last step's writes saved
but not the checkpoint after them, so it looked finished although `invoke(None)` still had
work to do. Reproduced here without an outage and without timing: node b takes a lock on
`checkpoints` from another session, so the `put` after b's step fails (`LockTimeoutError`)
while b's writes, which the failed `put` was to carry, are then stored alone in
`checkpoint_writes`, which is not locked. An outage produces the same rows when the server
comes back between the failed `put` and the store of the writes.

What it is: LangGraph's own reading of such a thread, with any saver. The latest checkpoint
is the one before b's step; b's writes are its pending writes. `get_state()` lists in
`next` only the tasks that have no writes yet, so `next == ()`; the finished tasks are in
`tasks`, with their results. Upstream's saver always stores writes before the checkpoint,
so it shows the same after any failure between the two. Not storing the writes would make
`next == ("b",)` but would run b again on resume (invariant I4 exists to avoid that), so
the saver keeps them, and the reading rule is documented (README, "After an error"): a
thread is finished when `get_state(config).tasks` is empty, not when `next` is.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from graphs import State
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from langgraph_durable import AsyncDurablePostgresSaver, DurablePostgresSaver, LockTimeoutError
from langgraph_durable._langgraph import task_id_of


@pytest.fixture(scope="module")
def ready_dsn(db_dsn: str) -> str:
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
    return db_dsn


def chain(b: Any) -> StateGraph[Any, Any, Any, Any]:
    builder = StateGraph(State)
    builder.add_node("a", lambda s: {"log": ["a"]})
    builder.add_node("b", b)
    builder.add_node("c", lambda s: {"log": ["c"]})
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    builder.add_edge("c", END)
    return builder


def raw_rows(dsn: str, thread_id: str) -> tuple[list[int], list[tuple[str, str]]]:
    """Steps of the stored checkpoints, and (checkpoint step, channel) of stored writes."""
    with psycopg.connect(dsn) as conn:
        steps = [
            int(r[0])
            for r in conn.execute(
                "SELECT (metadata ->> 'step')::int FROM checkpoints WHERE thread_id = %s "
                "ORDER BY checkpoint_id",
                (thread_id,),
            )
        ]
        writes = [
            (str(r[0]), str(r[1]))
            for r in conn.execute(
                "SELECT c.metadata ->> 'step', w.channel FROM checkpoint_writes w "
                "JOIN checkpoints c USING (thread_id, checkpoint_ns, checkpoint_id) "
                "WHERE w.thread_id = %s ORDER BY 1, 2",
                (thread_id,),
            )
        ]
    return steps, writes


@pytest.mark.parametrize("flavor", ["sync", "async"])
async def test_stored_writes_without_their_checkpoint_read_as_unfinished_tasks(
    ready_dsn: str, flavor: str
) -> None:
    thread = f"unfinished-{flavor}"
    config: Any = {"configurable": {"thread_id": thread}}
    holder = psycopg.connect(ready_dsn)
    ran: list[str] = []

    def b(state: dict[str, Any]) -> dict[str, Any]:
        ran.append("b")
        if len(ran) == 1:
            holder.execute("LOCK TABLE checkpoints IN ACCESS EXCLUSIVE MODE")
        return {"log": ["b"]}

    try:
        if flavor == "sync":
            with DurablePostgresSaver.from_conn_string(ready_dsn, lock_timeout=0.1) as saver:
                graph = chain(b).compile(checkpointer=saver)
                with pytest.raises(LockTimeoutError):
                    graph.invoke({"log": []}, config, durability="sync")
                holder.rollback()
                state = graph.get_state(config)
                steps, writes = raw_rows(ready_dsn, thread)
                done = graph.invoke(None, config, durability="sync")
                final = graph.get_state(config)
        else:
            async with AsyncDurablePostgresSaver.from_conn_string(
                ready_dsn, lock_timeout=0.1
            ) as asaver:
                graph = chain(b).compile(checkpointer=asaver)
                with pytest.raises(LockTimeoutError):
                    await graph.ainvoke({"log": []}, config, durability="sync")
                holder.rollback()
                state = await graph.aget_state(config)
                steps, writes = raw_rows(ready_dsn, thread)
                done = await graph.ainvoke(None, config, durability="sync")
                final = await graph.aget_state(config)
    finally:
        holder.close()

    # The rows: the checkpoint after a's step (step 1) is the latest; b's writes are stored
    # against it; the checkpoint after b's step (step 2) was never stored.
    assert steps == [-1, 0, 1]
    assert ("1", "log") in writes
    # LangGraph's reading: no next node, but a task with its result: not finished.
    assert state.next == ()
    assert [(t.name, t.result) for t in state.tasks] == [("b", {"log": ["b"]})]
    assert state.values["log"] == ["a", "b"]
    # Resuming applies b's stored writes (b does not run again) and runs c.
    assert done["log"] == ["a", "b", "c"]
    assert ran == ["b"]
    # Finished: no next node and no task.
    assert final.next == ()
    assert final.tasks == ()


def test_an_interrupted_thread_has_a_next_node(ready_dsn: str) -> None:
    """The other reading that `next` alone does not separate from "finished": an
    interrupted node is in `next` (and in `tasks`, with its interrupt)."""
    builder = chain(lambda s: {"log": [interrupt("ok?")]})
    with DurablePostgresSaver.from_conn_string(ready_dsn) as saver:
        graph = builder.compile(checkpointer=saver)
        config: Any = {"configurable": {"thread_id": "unfinished-interrupted"}}
        graph.invoke({"log": []}, config, durability="sync")
        state = graph.get_state(config)
    assert state.next == ("b",)
    assert [t.name for t in state.tasks] == ["b"]
    assert state.tasks[0].interrupts


@pytest.mark.parametrize("flavor", ["sync", "async"])
async def test_writes_that_fail_alone_never_end_a_committed_run_in_an_error(
    ready_dsn: str, flavor: str
) -> None:
    """Writes stored on their own (`write_linger=0`) meet a row lock and time out while
    the checkpoint after them waits for them. That checkpoint used to commit and the run to
    finish, and only then did LangGraph raise the writes' error: an error after every step
    had committed. Now the waiting checkpoint takes the writes into its own statement, so
    the two commit together or fail together: an error means the run is not finished."""
    thread = f"handover-{flavor}"
    config: Any = {"configurable": {"thread_id": thread}}
    holder = psycopg.connect(ready_dsn)

    def b(state: dict[str, Any]) -> dict[str, Any]:
        # Hold, uncommitted, the row b's first write will go to: its insert waits for us.
        latest = holder.execute(
            "SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = %s", (thread,)
        ).fetchone()
        assert latest is not None
        holder.execute(
            "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id,"
            " task_path, idx, channel, type, blob) VALUES (%s, '', %s, %s, '', 0, 'x', 'x', '')",
            (thread, latest[0], task_id_of(get_config())),
        )
        return {"log": ["b"]}

    options: dict[str, Any] = {"lock_timeout": 0.2, "write_linger": 0}
    try:
        if flavor == "sync":
            with DurablePostgresSaver.from_conn_string(ready_dsn, **options) as saver:
                graph = chain(b).compile(checkpointer=saver)
                with pytest.raises(LockTimeoutError):
                    graph.invoke({"log": []}, config, durability="sync")
                state = graph.get_state(config)
        else:
            async with AsyncDurablePostgresSaver.from_conn_string(ready_dsn, **options) as asaver:
                graph = chain(b).compile(checkpointer=asaver)
                with pytest.raises(LockTimeoutError):
                    await graph.ainvoke({"log": []}, config, durability="sync")
                state = await graph.aget_state(config)
    finally:
        holder.rollback()
        holder.close()
    steps, _ = raw_rows(ready_dsn, thread)
    assert steps == [-1, 0, 1]  # the run stopped before the checkpoint after b
    assert state.next == ("b",)  # b's writes were not stored: b runs again on resume
