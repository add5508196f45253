"""A worker process for the migration crash test: version "2" of a graph, which moves runs
of version "1" forward with a migration hook.

    python tests/crash/migration_worker.py DSN GRAPH_NAME

The hook logs each of its executions in `migration_calls`, on its own autocommit
connection (the outside world: it survives the worker), then writes the thread's state
twice (`update_state`, as the README's example does once). The test kills the worker with
`LANGGRAPH_DURABLE_CRASH_AT=run:after_migration_hook` (after the hook, before the run is
recorded as version "2") or `test:between_migration_updates` (inside the hook, between
its two updates). `run_forever` returns at SIGTERM.
"""

from __future__ import annotations

import operator
import os
import sys
from typing import Annotated, Any

import psycopg
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import DurablePostgresSaver, GraphVersion, Worker, _crashpoints

WORLD = "CREATE TABLE IF NOT EXISTS migration_calls (thread_id TEXT NOT NULL, pid INT NOT NULL)"


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def main(dsn: str, name: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(WORLD)

    def hook(graph: Any, config: Any) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO migration_calls (thread_id, pid) VALUES (%s, %s)",
                (config["configurable"]["thread_id"], os.getpid()),
            )
        graph.update_state(config, {"log": ["migrated"]})
        _crashpoints.reached("test:between_migration_updates")
        graph.update_state(config, {"log": ["migrated again"]})

    builder = StateGraph(State)
    builder.add_node("a", lambda s: {"log": ["a"]})
    builder.add_edge(START, "a")
    builder.add_edge("a", END)
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        graph = GraphVersion(name, "2", builder.compile(checkpointer=saver), migrations={"1": hook})
        Worker(saver, [graph], lease_seconds=1, idle_wait=0.2).run_forever()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    print("run_forever returned", flush=True)
