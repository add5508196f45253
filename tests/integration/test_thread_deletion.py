"""Pruning and deleting threads while they may be running, waiting or acting."""

from __future__ import annotations

import threading
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any, TypedDict

import psycopg
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from psycopg import sql
from psycopg.rows import dict_row

from langgraph_durable import (
    DurablePostgresSaver,
    RunConflictError,
    RunRegistry,
    ThreadBusyError,
    effect,
)
from langgraph_durable._sql import QUERIES
from langgraph_durable.checkpoint._retention import keep_latest_plan
from langgraph_durable.checkpoint._saver import _prune_namespace


def put_version(saver: DurablePostgresSaver, config: RunnableConfig, version: int) -> Any:
    """A checkpoint after `config` whose channel `big` (a blob) is at `version`."""
    checkpoint = empty_checkpoint()
    checkpoint["ts"] = datetime.now(timezone.utc).isoformat()
    checkpoint["channel_values"] = {"big": {"payload": [version] * 5}}
    checkpoint["channel_versions"] = {"big": str(version)}
    return saver.put(config, checkpoint, {}, {"big": str(version)})


def test_keep_latest_keeps_a_checkpoint_committed_after_it_read_the_heads(db_dsn: str) -> None:
    """A running thread commits its next checkpoint between the prune's reading of the heads
    and its delete: that checkpoint, its writes and the blob only it names must stay."""
    thread = f"prune-race-{uuid.uuid4()}"
    root: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
        first = put_version(saver, root, 1)
        head = put_version(saver, first, 2)
        with psycopg.connect(db_dsn, row_factory=dict_row) as conn, conn.transaction():
            conn.execute(QUERIES["lock_thread"], {"thread_id": thread})
            heads = conn.execute(QUERIES["thread_heads"], {"thread_id": thread}).fetchall()
            assert [h["checkpoint_id"] for h in heads] == [head["configurable"]["checkpoint_id"]]
            # The thread goes on between the two statements of the prune.
            newest = put_version(saver, head, 3)
            saver.put_writes(newest, [("ch", "v")], "task")
            for plan in keep_latest_plan(heads):
                _prune_namespace(conn, thread, plan)
        latest = saver.get_tuple({"configurable": {"thread_id": thread}})
        assert latest is not None
        assert (
            latest.config["configurable"]["checkpoint_id"]
            == (newest["configurable"]["checkpoint_id"])
        )
        assert latest.checkpoint["channel_values"]["big"] == {"payload": [3] * 5}
        assert latest.pending_writes == [("task", "ch", "v")]
        left = [c.config["configurable"]["checkpoint_id"] for c in saver.list(root)]
        assert left == [
            newest["configurable"]["checkpoint_id"],
            head["configurable"]["checkpoint_id"],
        ]
        kept = saver.get_tuple(head)
        assert kept is not None
        assert kept.parent_config is None  # its parent was pruned


# -- deleting whole threads ------------------------------------------------------------------

OLD = "2000-01-01T00:00:00+00:00"


def make_old(dsn: str, thread: str) -> None:
    """Date every checkpoint of `thread` back to the year 2000 (idle for retention)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, '{ts}', to_jsonb(%s::text))"
            " WHERE thread_id = %s",
            (OLD, thread),
        )


def old_thread(saver: DurablePostgresSaver, dsn: str, thread: str) -> RunnableConfig:
    root: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    config = put_version(saver, root, 1)
    saver.put_writes(config, [("ch", "v")], "task")
    make_old(dsn, thread)
    return config


def add_run(dsn: str, thread: str, status: str) -> str:
    """A run of `thread` in the registry, as `RunRegistry.create` leaves its rows."""
    run_id = f"run-{uuid.uuid4()}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO langgraph_durable_threads (thread_id) VALUES (%s) ON CONFLICT DO NOTHING",
            (thread,),
        )
        conn.execute(
            "INSERT INTO langgraph_durable_runs (run_id, thread_id, graph_name, graph_version,"
            " status) VALUES (%s, %s, 'g', '1', %s)",
            (run_id, thread, status),
        )
    return run_id


def add_effect(dsn: str, thread: str, status: str, *, default_key: bool = True) -> str:
    key = f"{status}-{uuid.uuid4()}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO langgraph_durable_effects (key, effect_name, input_hash, status,"
            " thread_id, default_key) VALUES (%s, 'charge', 'h', %s, %s, %s)",
            (key, status, thread, default_key),
        )
    return key


def rows_of(dsn: str, thread: str) -> dict[str, int]:
    """How many rows each table holds for `thread`."""
    with psycopg.connect(dsn) as conn:
        return {
            table: conn.execute(
                sql.SQL("SELECT count(*) FROM {} WHERE thread_id = %s").format(
                    sql.Identifier(table)
                ),
                (thread,),
            ).fetchone()[0]  # type: ignore[index]
            for table in (
                "checkpoints",
                "checkpoint_writes",
                "checkpoint_blobs",
                "langgraph_durable_effects",
                "langgraph_durable_threads",
                "langgraph_durable_runs",
            )
        }


class State(TypedDict, total=False):
    amount: int
    receipt: str
    refund: str
    answer: str


def waiting_graph(saver: DurablePostgresSaver) -> Any:
    """A graph that charges, then waits for an answer at interrupt()."""
    builder = StateGraph(State)
    builder.add_node("charge", lambda s: {"receipt": "r"})
    builder.add_node("ask", lambda s: {"answer": interrupt("refund?")})
    builder.add_edge(START, "charge")
    builder.add_edge("charge", "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=saver)


def test_delete_idle_skips_threads_that_wait_or_have_work_in_flight(fresh_db_dsn: str) -> None:
    dsn = fresh_db_dsn
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
        waiting = "waiting"
        waiting_graph(saver).invoke({"amount": 1}, {"configurable": {"thread_id": waiting}})
        make_old(dsn, waiting)
        pending, interrupted, effect_open = "pending-run", "interrupted-run", "open-effect"
        idle, finished = "idle", "finished-run"
        for thread in (pending, interrupted, effect_open, idle, finished):
            old_thread(saver, dsn, thread)
        add_run(dsn, pending, "pending")
        add_run(dsn, interrupted, "interrupted")
        add_effect(dsn, effect_open, "unknown")
        add_effect(dsn, effect_open, "completed")
        add_effect(dsn, idle, "completed")
        add_effect(dsn, idle, "failed")
        with psycopg.connect(dsn, autocommit=True) as conn:  # an exclusive() lease let go
            conn.execute("INSERT INTO langgraph_durable_threads (thread_id) VALUES (%s)", (idle,))
        add_run(dsn, finished, "success")
        add_effect(dsn, finished, "completed")

        deleted = saver.delete_idle_threads(timedelta(days=1), batch_size=2)

        assert sorted(deleted) == [finished, idle]
        for thread in (waiting, pending, interrupted, effect_open):
            assert rows_of(dsn, thread)["checkpoints"] > 0, thread
        assert rows_of(dsn, effect_open)["langgraph_durable_effects"] == 2
        # The finished effects' journal rows went too; the registry row only where no run
        # names it (every run needs its thread's row).
        assert rows_of(dsn, idle) == dict.fromkeys(rows_of(dsn, idle), 0)
        assert rows_of(dsn, finished) == {
            **dict.fromkeys(rows_of(dsn, finished), 0),
            "langgraph_durable_threads": 1,
            "langgraph_durable_runs": 1,
        }


def test_delete_idle_keeps_a_thread_that_gets_a_run_while_it_is_judged(
    fresh_db_dsn: str,
) -> None:
    """The thread is listed as idle; before its delete runs, a run is created on it (held
    back by the test's lock on its registry row until the delete waits for that row)."""
    dsn = fresh_db_dsn
    thread = "becomes-busy"
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
        old_thread(saver, dsn, thread)
        add_run(dsn, thread, "success")
        result: list[list[str]] = []
        with psycopg.connect(dsn) as creator, psycopg.connect(dsn, autocommit=True) as watch:
            creator.execute(
                "SELECT 1 FROM langgraph_durable_threads WHERE thread_id = %s FOR UPDATE",
                (thread,),
            )
            holder = creator.info.backend_pid
            worker = threading.Thread(
                target=lambda: result.append(saver.delete_idle_threads(timedelta(days=1)))
            )
            worker.start()
            # Until the delete waits for the row (or, without its lock, has finished).
            while (
                worker.is_alive()
                and not watch.execute(
                    "SELECT EXISTS (SELECT 1 FROM pg_stat_activity"
                    " WHERE %s = ANY(pg_blocking_pids(pid)))",
                    (holder,),
                ).fetchone()[0]
            ):  # type: ignore[index]
                worker.join(0.01)
            creator.execute(
                "INSERT INTO langgraph_durable_runs (run_id, thread_id, graph_name,"
                " graph_version, status) VALUES ('new-run', %s, 'g', '1', 'pending')",
                (thread,),
            )
            creator.commit()
            worker.join()
        assert result == [[]]
        assert rows_of(dsn, thread)["checkpoints"] == 1


def test_a_deleted_threads_default_keyed_effects_act_again_when_its_id_is_used_again(
    fresh_db_dsn: str,
) -> None:
    """Default keys are derived from the thread: deleted with it. A business key may be
    another thread's too: its row stays, and the key replays."""
    calls: list[str] = []

    @effect(name="send")
    def send(amount: int) -> str:
        calls.append(f"send {amount}")
        return f"sent {amount}"

    @effect(name="refund", key=lambda amount: f"refund:{amount}")
    def refund(amount: int) -> str:
        calls.append(f"refund {amount}")
        return f"refunded {amount}"

    builder = StateGraph(State)
    builder.add_node("send", lambda s: {"receipt": send(s["amount"])})
    builder.add_node("refund", lambda s: {"refund": refund(s["amount"])})
    builder.add_edge(START, "send")
    builder.add_edge("send", "refund")
    builder.add_edge("refund", END)
    config: RunnableConfig = {"configurable": {"thread_id": "reused"}}
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        saver.setup()
        graph = builder.compile(checkpointer=saver)
        graph.invoke({"amount": 5}, config)
        assert rows_of(fresh_db_dsn, "reused")["langgraph_durable_effects"] == 2
        saver.delete_thread("reused")
        assert rows_of(fresh_db_dsn, "reused") == {
            **dict.fromkeys(rows_of(fresh_db_dsn, "x"), 0),
            "langgraph_durable_effects": 1,  # refund:5
        }
        graph.invoke({"amount": 5}, config)
    assert calls == ["send 5", "refund 5", "send 5"]


def test_deleting_a_thread_keeps_a_business_key_another_thread_replayed(
    fresh_db_dsn: str,
) -> None:
    """Thread B replayed A's refund and waits at an interrupt; deleting A must not make B's
    resume (which runs its node again) refund a second time (I2)."""
    calls: list[int] = []

    # The node acts, then asks (the shape the guard warns about, as in the report).
    @effect(name="refund", key=lambda amount: f"refund:{amount}", interrupt_guard=False)
    def refund(amount: int) -> str:
        calls.append(amount)
        return f"refunded {amount}"

    def node(s: State) -> State:
        done = refund(s["amount"])
        return {"refund": done, "answer": interrupt({"confirm": done})}

    builder = StateGraph(State)
    builder.add_node("refund", node)
    builder.add_edge(START, "refund")
    builder.add_edge("refund", END)
    a: RunnableConfig = {"configurable": {"thread_id": "A"}}
    b: RunnableConfig = {"configurable": {"thread_id": "B"}}
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        saver.setup()
        graph = builder.compile(checkpointer=saver)
        graph.invoke({"amount": 7}, a)
        graph.invoke(Command(resume="yes"), a)
        graph.invoke({"amount": 7}, b)  # replays A's refund, waits
        saver.delete_thread("A")
        out = graph.invoke(Command(resume="yes"), b)
    assert calls == [7]
    assert out["refund"] == "refunded 7"
    assert out["answer"] == "yes"


def test_deleting_a_thread_with_work_in_flight_is_refused_whole(fresh_db_dsn: str) -> None:
    dsn = fresh_db_dsn
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
        for thread in ("open-effect", "open-run", "free"):
            old_thread(saver, dsn, thread)
        key = add_effect(dsn, "open-effect", "unknown")
        run_id = add_run(dsn, "open-run", "pending")
        before = {t: rows_of(dsn, t) for t in ("open-effect", "open-run", "free")}
        with pytest.raises(ThreadBusyError, match=key) as refused:
            saver.delete_thread("open-effect")
        assert "Nothing was deleted" in str(refused.value)
        # Steps that work on what keeps it: resolve (not `effects list`, which cannot).
        assert "langgraph-durable resolve KEY" in str(refused.value)
        with pytest.raises(ThreadBusyError, match=run_id):
            saver.prune(["free", "open-run"], strategy="delete")
        assert {t: rows_of(dsn, t) for t in before} == before  # all or none
        with RunRegistry(saver).exclusive("free"), pytest.raises(ThreadBusyError, match="lease"):
            saver.delete_thread("free")
        saver.delete_thread("free")  # the lease let go
        assert rows_of(dsn, "free") == dict.fromkeys(before["free"], 0)


def test_a_run_superseded_at_an_interrupt_does_not_keep_its_thread_forever(
    fresh_db_dsn: str,
) -> None:
    """A run a newer one superseded (`multitask_strategy="interrupt"`) stays interrupted:
    it can be neither cancelled nor resumed, so it must not keep its thread from an
    explicit delete. Retention still skips a thread with an interrupted run."""
    dsn = fresh_db_dsn
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
        registry = RunRegistry(saver)
        old_thread(saver, dsn, "stuck")
        first = registry.create("g", {"x": 1}, version="v1", thread_id="stuck")
        newer = registry.create(
            "g", {"x": 2}, version="v1", thread_id="stuck", multitask_strategy="interrupt"
        )
        registry.cancel(newer.run_id)
        assert registry.get(first.run_id).status.value == "interrupted"
        with pytest.raises(RunConflictError):
            registry.cancel(first.run_id)
        assert saver.delete_idle_threads(timedelta(days=1)) == []
        assert rows_of(dsn, "stuck")["checkpoints"] == 1

        saver.delete_thread("stuck")

        assert rows_of(dsn, "stuck")["checkpoints"] == 0
        assert registry.get(first.run_id).status.value == "interrupted"  # history


def test_an_effect_that_sent_nothing_does_not_keep_an_abandoned_thread(
    fresh_db_dsn: str,
) -> None:
    """Deferred and retry_wait rows sent nothing (`resolve` has nothing to resolve): the
    thread is deleted, and its default-keyed rows go with it; business-keyed ones stay."""
    dsn = fresh_db_dsn
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
        old_thread(saver, dsn, "abandoned")
        add_effect(dsn, "abandoned", "deferred")
        add_effect(dsn, "abandoned", "retry_wait")
        shared = add_effect(dsn, "abandoned", "retry_wait", default_key=False)

        saver.prune(["abandoned"], strategy="delete")

        assert rows_of(dsn, "abandoned") == {
            **dict.fromkeys(rows_of(dsn, "abandoned"), 0),
            "langgraph_durable_effects": 1,
        }
        with psycopg.connect(dsn) as conn:
            assert conn.execute(
                "SELECT key FROM langgraph_durable_effects WHERE thread_id = 'abandoned'"
            ).fetchall() == [(shared,)]
