"""What `prune(strategy="keep_latest")` keeps, against upstream's `PostgresSaver.prune`.

Upstream keeps, per namespace, the latest checkpoint (plus the parent it reads its pending
sends from when it predates format v4) with its writes and the blobs it names; a subgraph
call's namespace ("node:<task id>") goes whole once the root checkpoint the call started
from is saved and no longer kept, while a call from the kept root checkpoint (a subgraph
waiting at an interrupt) keeps its latest, as does a `checkpointer=True` subgraph's
namespace. Each scenario runs on one thread per saver in one database, each saver prunes
its own, and the rows left must have the same shape (namespaces without their task ids).
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Annotated, Any, TypedDict

import psycopg
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.constants import TASKS
from langgraph.graph import START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt
from psycopg import sql
from psycopg.rows import dict_row

from langgraph_durable import AsyncDurablePostgresSaver, DurablePostgresSaver
from langgraph_durable._sql import QUERIES
from langgraph_durable.checkpoint._retention import keep_latest_plan
from langgraph_durable.checkpoint._saver import _prune_namespace

Graph = CompiledStateGraph[Any, Any, Any, Any]
TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    answers: Annotated[list[str], operator.add]


def plain_graph(checkpointer: BaseCheckpointSaver[Any]) -> Graph:
    """Each turn calls a plain subgraph (no checkpointer of its own): one call namespace."""
    sub = StateGraph(State)
    sub.add_node("inner", lambda s: {"log": ["inner"]})
    sub.add_edge(START, "inner")
    graph = StateGraph(State)
    graph.add_node("sub", sub.compile())
    graph.add_edge(START, "sub")
    return graph.compile(checkpointer=checkpointer)


def persistent_graph(checkpointer: BaseCheckpointSaver[Any]) -> Graph:
    """The subgraph keeps its own state across calls (`checkpointer=True`): namespace "sub"."""
    sub = StateGraph(State)
    sub.add_node("inner", lambda s: {"log": ["inner"]})
    sub.add_edge(START, "inner")
    graph = StateGraph(State)
    graph.add_node("sub", sub.compile(checkpointer=True))
    graph.add_edge(START, "sub")
    return graph.compile(checkpointer=checkpointer)


def ask(state: State) -> State:
    return {"answers": [str(interrupt("ok?"))]}


def interrupting_graph(checkpointer: BaseCheckpointSaver[Any]) -> Graph:
    """root -> sub -> deep -> ask: the interrupt is two plain subgraphs down."""
    deep = StateGraph(State)
    deep.add_node("before", lambda s: {"log": ["before"]})
    deep.add_node("ask", ask)
    deep.add_edge(START, "before")
    deep.add_edge("before", "ask")
    sub = StateGraph(State)
    sub.add_node("deep", deep.compile())
    sub.add_edge(START, "deep")
    graph = StateGraph(State)
    graph.add_node("sub", sub.compile())
    graph.add_edge(START, "sub")
    return graph.compile(checkpointer=checkpointer)


def cfg(thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread}}


def shape(dsn: str, thread: str) -> dict[str, list[tuple[str, int]]]:
    """Rows per table and namespace, namespaces without task ids ("sub:1f0...|deep:..." is
    "sub|deep"), so threads of two savers compare."""
    found: dict[str, list[tuple[str, int]]] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in TABLES:
            query = sql.SQL(
                "SELECT checkpoint_ns, count(*) FROM {} WHERE thread_id = %s GROUP BY 1"
            ).format(sql.Identifier(table))
            rows = conn.execute(query, (thread,)).fetchall()
            counts: dict[str, int] = {}
            for ns, count in rows:
                bare = "|".join(part.split(":", 1)[0] for part in ns.split("|"))
                counts[bare] = counts.get(bare, 0) + count
            found[table] = sorted(counts.items())
    return found


@contextmanager
def both(dsn: str) -> Iterator[tuple[PostgresSaver, DurablePostgresSaver]]:
    with (
        PostgresSaver.from_conn_string(dsn) as upstream,
        DurablePostgresSaver.from_conn_string(dsn) as ours,
    ):
        ours.setup()
        upstream.setup()
        yield upstream, ours


def test_keep_latest_deletes_ended_subgraph_calls_as_upstream_does(fresh_db_dsn: str) -> None:
    """Ten turns, each calling a plain subgraph, leave one checkpoint and its blobs (one per
    channel), as upstream's prune does; before, each call's namespace stayed with its
    checkpoint and blobs, and `list` showed 11 checkpoints."""
    with both(fresh_db_dsn) as (upstream, ours):
        for saver, thread in ((upstream, "up"), (ours, "ours")):
            graph = plain_graph(saver)
            for turn in range(10):
                graph.invoke({"log": [str(turn)]}, cfg(thread), durability="sync")
            assert [ns for ns, _ in shape(fresh_db_dsn, thread)["checkpoints"]] == ["", "sub"]
            before = graph.get_state(cfg(thread)).values
            saver.prune([thread])
            assert graph.get_state(cfg(thread)).values == before
        assert shape(fresh_db_dsn, "ours") == shape(fresh_db_dsn, "up")
        assert shape(fresh_db_dsn, "ours")["checkpoints"] == [("", 1)]
        assert shape(fresh_db_dsn, "ours")["checkpoint_blobs"] == [("", 2)]  # log, answers
        assert len(list(ours.list(None))) == len(list(upstream.list(None))) == 2
        assert len(list(ours.list(cfg("ours")))) == 1
        turns = [
            plain_graph(saver).invoke({"log": ["more"]}, cfg(thread), durability="sync")
            for saver, thread in ((upstream, "up"), (ours, "ours"))
        ]
        assert turns[0] == turns[1]


async def test_aprune_deletes_ended_subgraph_calls(fresh_db_dsn: str) -> None:
    async with AsyncDurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        await saver.setup()
        graph = plain_graph(saver)
        for turn in range(3):
            await graph.ainvoke({"log": [str(turn)]}, cfg("a"), durability="sync")
        before = (await graph.aget_state(cfg("a"))).values
        await saver.aprune(["a"])
        assert shape(fresh_db_dsn, "a") == {
            "checkpoints": [("", 1)],
            "checkpoint_blobs": [("", 2)],
            "checkpoint_writes": [],
        }
        assert (await graph.aget_state(cfg("a"))).values == before


def test_keep_latest_keeps_a_persistent_subgraph_s_latest(fresh_db_dsn: str) -> None:
    """A `checkpointer=True` subgraph's namespace has no task id: its latest checkpoint is
    its state for the next call, so it stays (as upstream keeps it), and the next turn goes
    on exactly as on an unpruned thread."""
    with both(fresh_db_dsn) as (upstream, ours):
        for saver, threads in ((upstream, ("up",)), (ours, ("ours", "control"))):
            graph = persistent_graph(saver)
            for thread in threads:
                for turn in range(3):
                    graph.invoke({"log": [str(turn)]}, cfg(thread), durability="sync")
            saver.prune([threads[0]])
        assert shape(fresh_db_dsn, "ours") == shape(fresh_db_dsn, "up")
        assert shape(fresh_db_dsn, "ours")["checkpoints"] == [("", 1), ("sub", 1)]
        graph = persistent_graph(ours)
        pruned = graph.invoke({"log": ["3"]}, cfg("ours"), durability="sync")
        control = graph.invoke({"log": ["3"]}, cfg("control"), durability="sync")
        assert pruned == control


def test_a_thread_interrupted_inside_nested_subgraphs_resumes_after_prune(
    fresh_db_dsn: str,
) -> None:
    """The calls waiting at the interrupt started from the root's latest checkpoint: their
    latest checkpoints and the interrupt's writes stay, earlier turns' calls go, and the
    thread resumes exactly as an unpruned one does."""
    with both(fresh_db_dsn) as (upstream, ours):
        for saver, threads in ((upstream, ("up",)), (ours, ("ours", "control"))):
            graph = interrupting_graph(saver)
            for thread in threads:
                graph.invoke({"log": ["t1"]}, cfg(thread), durability="sync")
                graph.invoke(Command(resume="yes"), cfg(thread), durability="sync")
                graph.invoke({"log": ["t2"]}, cfg(thread), durability="sync")
            saver.prune([threads[0]])
        assert shape(fresh_db_dsn, "ours") == shape(fresh_db_dsn, "up")
        left = shape(fresh_db_dsn, "ours")["checkpoints"]
        assert left == [("", 1), ("sub", 1), ("sub|deep", 1)]
        graph = interrupting_graph(ours)
        for thread in ("ours", "control"):
            state = graph.get_state(cfg(thread), subgraphs=True)
            assert [i.value for i in state.interrupts] == ["ok?"]
        pruned = graph.invoke(Command(resume="again"), cfg("ours"), durability="sync")
        control = graph.invoke(Command(resume="again"), cfg("control"), durability="sync")
        assert pruned == control
        assert pruned["answers"][-1] == "again"


def put_blob(
    saver: DurablePostgresSaver, config: RunnableConfig, version: int, root: str | None
) -> RunnableConfig:
    """A checkpoint after `config` whose channel `big` (a blob) is at `version`, from a
    subgraph call that started from root checkpoint `root`."""
    checkpoint = empty_checkpoint()
    checkpoint["ts"] = datetime.now(timezone.utc).isoformat()
    checkpoint["channel_values"] = {"big": {"payload": [version] * 5}}
    checkpoint["channel_versions"] = {"big": str(version)}
    metadata: Any = {"parents": {"": root}} if root else {}
    return saver.put(config, checkpoint, metadata, {"big": str(version)})


def test_a_call_whose_root_is_not_saved_yet_keeps_its_latest(fresh_db_dsn: str) -> None:
    """Runs save in the background, so a call's checkpoints can commit before the root
    checkpoint it started from: such a call is not over, and keeps its latest."""
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        saver.setup()
        root = put_blob(saver, {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, 1, None)
        call: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": "sub:x"}}
        unsaved = str(uuid.uuid4())
        latest = put_blob(saver, put_blob(saver, call, 1, unsaved), 2, unsaved)
        saver.prune(["t"])
        assert shape(fresh_db_dsn, "t")["checkpoints"] == [("", 1), ("sub", 1)]
        found = saver.get_tuple(call)
        assert found is not None
        assert (
            found.config["configurable"]["checkpoint_id"]
            == (latest["configurable"]["checkpoint_id"])
        )
        assert saver.get_tuple(root) is not None


def test_an_ended_call_keeps_a_checkpoint_committed_after_the_heads_were_read(
    fresh_db_dsn: str,
) -> None:
    """Deleting an ended call's namespace is bounded by the head read, like any other
    namespace: a checkpoint committed into it meanwhile (a replay of the old root step)
    stays, with its writes and the blob only it names, and loses its deleted parent."""
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        saver.setup()
        root_ns: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        old_root = put_blob(saver, root_ns, 1, None)
        put_blob(saver, old_root, 2, None)
        call: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": "sub:x"}}
        old_id = old_root["configurable"]["checkpoint_id"]
        head = put_blob(saver, put_blob(saver, call, 1, old_id), 2, old_id)
        with psycopg.connect(fresh_db_dsn, row_factory=dict_row) as conn, conn.transaction():
            conn.execute(QUERIES["lock_thread"], {"thread_id": "t"})
            heads = conn.execute(QUERIES["thread_heads"], {"thread_id": "t"}).fetchall()
            plan = keep_latest_plan(heads)
            assert [(p.checkpoint_ns, len(p.kept)) for p in plan] == [("sub:x", 0), ("", 1)]
            newest = put_blob(saver, head, 3, old_id)
            saver.put_writes(newest, [("ch", "v")], "task")
            for namespace in plan:
                _prune_namespace(conn, "t", namespace)
        assert shape(fresh_db_dsn, "t") == {
            "checkpoints": [("", 1), ("sub", 1)],
            "checkpoint_blobs": [("", 1), ("sub", 1)],
            "checkpoint_writes": [("sub", 1)],
        }
        found = saver.get_tuple(call)
        assert found is not None
        assert found.checkpoint["channel_values"]["big"] == {"payload": [3] * 5}
        assert found.pending_writes == [("task", "ch", "v")]
        assert found.parent_config is None


# -- checkpoints older than format v4 --------------------------------------------------------


def old_thread(dsn: str, thread: str, *, sends: bool) -> RunnableConfig:
    """Three checkpoints of format v3 written by upstream; the middle one holds two pending
    sends as writes (if `sends`), which the latest reads as its own. Returns the latest."""
    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
        upstream = PostgresSaver(conn)
        config: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        for step in range(3):
            checkpoint = empty_checkpoint()
            checkpoint["v"] = 3
            checkpoint["channel_values"] = {"big": [step] * 5}
            checkpoint["channel_versions"] = {"big": str(step + 1)}
            metadata: Any = {"source": "loop", "step": step}
            config = upstream.put(config, checkpoint, metadata, {"big": str(step + 1)})
            if step == 1 and sends:
                upstream.put_writes(config, [(TASKS, "send one"), (TASKS, "send two")], "task")
    return config


@pytest.mark.parametrize("sends", [True, False])
def test_keep_latest_keeps_the_parent_an_old_checkpoint_reads_its_sends_from(
    fresh_db_dsn: str, sends: bool
) -> None:
    """Before format v4 a checkpoint's pending sends were its parent's writes: upstream keeps
    that parent (with its writes and blobs), so the latest still shows the sends. Before,
    ours deleted it and the sends were lost. A parent without sends goes."""
    with both(fresh_db_dsn) as (upstream, ours):
        views = {}
        for saver, thread in ((upstream, "up"), (ours, "ours")):
            latest = old_thread(fresh_db_dsn, thread, sends=sends)
            before = ours.get_tuple(latest)
            saver.prune([thread])
            after = ours.get_tuple(latest)
            assert before is not None
            assert after is not None
            assert after.checkpoint == before.checkpoint
            assert after.parent_config == (before.parent_config if sends else None)
            views[thread] = after
        assert shape(fresh_db_dsn, "ours") == shape(fresh_db_dsn, "up")
        left = {thread: view.checkpoint["channel_values"] for thread, view in views.items()}
        assert left["ours"] == left["up"]
        expected = ["send one", "send two"] if sends else None
        assert views["ours"].checkpoint["channel_values"].get(TASKS) == expected
        assert shape(fresh_db_dsn, "ours")["checkpoints"] == [("", 2 if sends else 1)]
