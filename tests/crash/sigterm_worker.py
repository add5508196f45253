"""A worker process for the SIGTERM test: `run_forever` as the README shows it.

    python tests/crash/sigterm_worker.py DSN GRAPH_NAME [--async]

The graph's only node says it has started (NOTIFY on `sigterm_test`, from a connection of
its own, with the run's thread id) and then waits for ever, like a long model call: only
SIGTERM can end the execution. The worker installs nothing of its own: what SIGTERM does
is `run_forever`'s handler.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import Any

import psycopg
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import (
    AsyncDurablePostgresSaver,
    AsyncWorker,
    DurablePostgresSaver,
    GraphVersion,
    Worker,
)


class State(TypedDict, total=False):
    log: list[str]


def started(dsn: str) -> None:
    thread_id = get_config()["configurable"]["thread_id"]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_notify('sigterm_test', %s)", (thread_id,))


def build(saver: Any, name: str, node: Any) -> GraphVersion:
    builder = StateGraph(State)
    builder.add_node("long", node)
    builder.add_edge(START, "long")
    builder.add_edge("long", END)
    return GraphVersion(name, "1", builder.compile(checkpointer=saver))


def sync_worker(dsn: str, name: str) -> None:
    def long(state: State) -> State:
        started(dsn)
        threading.Event().wait()  # for ever: ended only by SIGTERM
        return {"log": ["never"]}

    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        Worker(saver, [build(saver, name, long)], lease_seconds=600).run_forever()


async def async_worker(dsn: str, name: str) -> None:
    async def long(state: State) -> State:
        await asyncio.to_thread(started, dsn)
        await asyncio.Event().wait()  # for ever: ended only by SIGTERM
        return {"log": ["never"]}

    async with AsyncDurablePostgresSaver.from_conn_string(dsn) as saver:
        graph = build(saver, name, long)
        await AsyncWorker(saver, [graph], lease_seconds=600).arun_forever()


if __name__ == "__main__":
    dsn, name = sys.argv[1], sys.argv[2]
    if "--async" in sys.argv[3:]:
        asyncio.run(async_worker(dsn, name))
    else:
        sync_worker(dsn, name)
    print("run_forever returned")
