"""A worker process for the SIGTERM tests: `run_forever` as the README shows it.

    python tests/crash/sigterm_worker.py DSN GRAPH_NAME [--async [--sync-nodes]]
        [--effect | --parallel | --loop-sync-effect]

The graph's only node says it has started (NOTIFY on `sigterm_test`, from a connection of
its own, with the run's thread id) and then waits for ever, like a long model call: only
SIGTERM can end the execution. The worker installs nothing of its own: what SIGTERM does
is `run_forever`'s handler.

With `--effect`, the node calls an `@effect` instead, whose receiver says it has started
(the same NOTIFY), waits until the test says `release` (NOTIFY on `sigterm_release`), then
acts (a row in `sigterm_receiver`) and answers: SIGTERM lands while the call is under way.
The worker's log goes to stdout, one message per line, so the test can see the handler's.
With `--parallel`, two branches each call such an effect `BRANCH_CALLS` times in turn
(`parallel_build`): SIGTERM lands while both have a call under way. `--sync-nodes`
gives the async worker's graph sync nodes and effects (LangGraph runs them in threads).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from typing import Any

import psycopg
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from psycopg_pool import ConnectionPool
from typing_extensions import TypedDict

from langgraph_durable import (
    AsyncDurablePostgresSaver,
    AsyncWorker,
    DurablePostgresSaver,
    EffectJournal,
    GraphVersion,
    Worker,
    effect,
)


class State(TypedDict, total=False):
    log: list[str]


def started(dsn: str) -> None:
    thread_id = get_config()["configurable"]["thread_id"]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_notify('sigterm_test', %s)", (thread_id,))


RECEIVER = """CREATE TABLE IF NOT EXISTS sigterm_receiver (
    thread_id TEXT NOT NULL, label TEXT NOT NULL DEFAULT '')"""


def released_then_acted(dsn: str, label: str = "") -> str:
    """The receiver: started (NOTIFY with the thread id, and `:label` if given), waits
    for the test's `release`, then acts."""
    thread_id = get_config()["configurable"]["thread_id"]
    said = f"{thread_id}:{label}" if label else thread_id
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("LISTEN sigterm_release")
        conn.execute("SELECT pg_notify('sigterm_test', %s)", (said,))
        for _ in conn.notifies(stop_after=1):
            pass
        conn.execute(
            "INSERT INTO sigterm_receiver (thread_id, label) VALUES (%s, %s)", (thread_id, label)
        )
    return f"sent for {thread_id}"


BRANCH_CALLS = 3
"""Effect calls each parallel branch makes, one after another (`--parallel`)."""


def parallel_build(
    saver: Any, name: str, dsn: str, flavour: str, sync_nodes: bool = False
) -> GraphVersion:
    """Two branches, each calling an effect `BRANCH_CALLS` times in turn, each receiver
    waiting for the test's `release`: SIGTERM lands while both have a call under way."""

    def key(branch: str, n: int) -> str:
        return f"sigterm:{get_config()['configurable']['thread_id']}:{branch}:{n}"

    @effect(name="sigterm.branch", key=key)
    def call(branch: str, n: int) -> str:
        return released_then_acted(dsn, f"{branch}:{n}")

    @effect(name="sigterm.branch", key=key)
    async def acall(branch: str, n: int) -> str:
        return await asyncio.to_thread(released_then_acted, dsn, f"{branch}:{n}")

    def branch(label: str) -> Any:
        def node(state: State) -> State:
            for n in range(BRANCH_CALLS):
                call(label, n)
            return {}

        async def anode(state: State) -> State:
            for n in range(BRANCH_CALLS):
                await acall(label, n)
            return {}

        return node if flavour == "sync" or sync_nodes else anode

    builder = StateGraph(State)
    for label in ("left", "right"):
        builder.add_node(label, branch(label))
        builder.add_edge(START, label)
        builder.add_edge(label, END)
    return GraphVersion(name, "1", builder.compile(checkpointer=saver))


def effect_node(dsn: str, flavour: str) -> Any:
    key = lambda: f"sigterm:{get_config()['configurable']['thread_id']}"  # noqa: E731
    if flavour == "sync":

        @effect(name="sigterm.notify", key=key)
        def notify() -> str:
            return released_then_acted(dsn)

        return lambda state: {"log": [notify()]}

    @effect(name="sigterm.notify", key=key)
    async def anotify() -> str:
        return await asyncio.to_thread(released_then_acted, dsn)

    async def node(state: State) -> State:
        return {"log": [await anotify()]}

    return node


def loop_sync_build(saver: Any, name: str, dsn: str, journal: Any) -> GraphVersion:
    """An async node that awaits an async effect (SIGTERM lands while it is under way),
    then calls a sync one on the loop's own thread, with no await in between
    (`--loop-sync-effect`): that call must not wait for a cancel only the loop can run."""

    def key(label: str) -> str:
        return f"sigterm:{get_config()['configurable']['thread_id']}:{label}"

    @effect(name="sigterm.first", key=key)
    async def first(label: str) -> str:
        return await asyncio.to_thread(released_then_acted, dsn, label)

    @effect(name="sigterm.second", key=key, journal=journal)
    def second(label: str) -> str:
        thread_id = get_config()["configurable"]["thread_id"]
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO sigterm_receiver (thread_id, label) VALUES (%s, %s)",
                (thread_id, label),
            )
        return "sent"

    async def node(state: State) -> State:
        await first("first")
        second("second")  # no await before it: the deferred cancel cannot run first
        return {}

    return build(saver, name, node)


def build(saver: Any, name: str, node: Any) -> GraphVersion:
    builder = StateGraph(State)
    builder.add_node("long", node)
    builder.add_edge(START, "long")
    builder.add_edge("long", END)
    return GraphVersion(name, "1", builder.compile(checkpointer=saver))


def sync_worker(dsn: str, name: str, mode: str) -> None:
    def long(state: State) -> State:
        started(dsn)
        threading.Event().wait()  # for ever: ended only by SIGTERM
        return {"log": ["never"]}

    node = effect_node(dsn, "sync") if mode == "effect" else long
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        graph = parallel_build(saver, name, dsn, "sync") if mode == "parallel" else None
        graph = graph or build(saver, name, node)
        Worker(saver, [graph], lease_seconds=600).run_forever()


async def async_worker(dsn: str, name: str, mode: str, sync_nodes: bool = False) -> None:
    async def long(state: State) -> State:
        await asyncio.to_thread(started, dsn)
        await asyncio.Event().wait()  # for ever: ended only by SIGTERM
        return {"log": ["never"]}

    node = effect_node(dsn, "async") if mode == "effect" else long
    async with AsyncDurablePostgresSaver.from_conn_string(dsn) as saver:
        graph = (
            parallel_build(saver, name, dsn, "async", sync_nodes) if mode == "parallel" else None
        )
        if mode == "loop-sync-effect":
            pool = ConnectionPool(dsn, min_size=1, max_size=2, kwargs={"autocommit": True})
            graph = loop_sync_build(saver, name, dsn, EffectJournal(pool))
        graph = graph or build(saver, name, node)
        await AsyncWorker(saver, [graph], lease_seconds=600).arun_forever()


if __name__ == "__main__":
    dsn, name, options = sys.argv[1], sys.argv[2], sys.argv[3:]
    modes = [m for m in ("parallel", "effect", "loop-sync-effect") if f"--{m}" in options]
    mode = modes[0] if modes else ""
    if mode:
        logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(message)s")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(RECEIVER)
    if "--async" in options:
        asyncio.run(async_worker(dsn, name, mode, "--sync-nodes" in options))
    else:
        sync_worker(dsn, name, mode)
    print("run_forever returned", flush=True)
