"""A contender for the race tests: takes a run (or a thread) when the test says go.

    python tests/crash/race_worker.py DSN GRAPH_NAME

Reads commands on stdin, one a line, and answers each with one JSON line on stdout:

- `claim KEY`: wait at the barrier KEY, then `RunRegistry.claim` the oldest run of the
  graph and, if it got one, run it with `Worker.execute`:
  `{"won": run_id or null, "status": ..., "claim": [start, end]}`;
- `exclusive KEY THREAD HOLD`: wait at the barrier KEY, then
  `with runs.exclusive(THREAD): graph.invoke(None, config)`; node "c" waits at the barrier
  HOLD before it returns: `{"ran": true, "log": [...]}` or `{"busy": message}`.

The barrier is a Postgres advisory lock the test holds: every contender blocks on
`pg_advisory_lock_shared(KEY)` until the test, having seen all of them wait (in
`pg_locks`), lets go; they then start at once. `claim` times are `time.monotonic()`
(CLOCK_MONOTONIC, one clock for every process on the machine).
"""

from __future__ import annotations

import json
import operator
import sys
import time
from typing import Annotated, Any

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import (
    DurablePostgresSaver,
    GraphVersion,
    RunRegistry,
    ThreadBusyError,
    Worker,
)

NODES = ("a", "b", "c", "d")


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def barrier(dsn: str, key: int) -> None:
    """Wait until the test lets go of advisory lock `key`."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock_shared(%s)", (key,))
        conn.execute("SELECT pg_advisory_unlock_shared(%s)", (key,))


def build(saver: DurablePostgresSaver, dsn: str, name: str) -> GraphVersion:
    def node(label: str) -> Any:
        def run(state: State, config: RunnableConfig) -> State:
            hold = (config.get("configurable") or {}).get("hold_key")
            if label == "c" and hold is not None:
                barrier(dsn, int(hold))
            return {"log": [label]}

        return run

    builder = StateGraph(State)
    previous = START
    for label in NODES:
        builder.add_node(label, node(label))
        builder.add_edge(previous, label)
        previous = label
    builder.add_edge(previous, END)
    return GraphVersion(name, "1", builder.compile(checkpointer=saver))


def main() -> int:
    dsn, name = sys.argv[1], sys.argv[2]
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        graph = build(saver, dsn, name)
        runs = RunRegistry(saver)
        worker = Worker(saver, [graph], lease_seconds=30)
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            command, *args = line.split()
            answer: dict[str, Any]
            if command == "claim":
                barrier(dsn, int(args[0]))
                start = time.monotonic()
                run = runs.claim([graph], owner=worker.worker_id, lease_seconds=30)
                end = time.monotonic()
                answer = {"won": None, "claim": [start, end]}
                if run is not None:
                    done = worker.execute(run)
                    answer.update(won=run.run_id, status=done.status.value)
            elif command == "exclusive":
                key, thread, hold = args
                barrier(dsn, int(key))
                try:
                    with runs.exclusive(thread) as config:
                        configurable = {**config["configurable"], "hold_key": int(hold)}
                        result = graph.graph.invoke(None, {**config, "configurable": configurable})
                    answer = {"ran": True, "log": result["log"]}
                except ThreadBusyError as exc:
                    answer = {"busy": str(exc)}
            else:
                answer = {"error": f"unknown command {command!r}"}
            print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
