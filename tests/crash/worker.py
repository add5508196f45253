"""A worker process for crash tests: runs a linear graph with a parallel pair in the middle.

    python tests/crash/worker.py DSN THREAD MODE FLAVOR [--resume] [--kill-in NODE]
        [--threads N --connections C]

Every node first records itself in `crash_node_runs` on its own autocommit connection: that
table is the outside world, and it survives the worker's death. `--kill-in NODE` makes that
node SIGKILL the process after recording itself; `p2` (parallel to `p1`) can instead wait
for `p1`'s writes to be committed before dying (`--kill-in p2-after-p1-writes`). Saver
crash points come from `LANGGRAPH_DURABLE_CRASH_AT`.

`--threads N` runs N threads (`THREAD-0` ... `THREAD-{N-1}`) at once, on `--connections`
connections: with fewer connections than runs, puts wait and go together in one statement
(checkpoint/_combining.py), and `put:after_commit` counts those statements; resumed, a
run that never saved a checkpoint is sent its input again.

Exit codes: 0 finished, 3 EmptyInputError (nothing was saved: send the input again).
"""

from __future__ import annotations

import argparse
import asyncio
import operator
import os
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any

import psycopg
from langgraph.errors import EmptyInputError
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import AsyncDurablePostgresSaver, DurablePostgresSaver

NODES = ["n1", "n2", "p1", "p2", "n3", "n4", "n5"]


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    p1_out: str


CREATE_RUNS = (
    "CREATE TABLE IF NOT EXISTS crash_node_runs ("
    " thread_id TEXT NOT NULL, node TEXT NOT NULL, pid INT NOT NULL,"
    " at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())"
)


def record(dsn: str, thread: str, node: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO crash_node_runs (thread_id, node, pid) VALUES (%s, %s, %s)",
            (thread, node, os.getpid()),
        )


def wait_for_p1_writes(dsn: str, thread: str) -> None:
    """Block until p1's write is committed: a real signal, not a sleep of a guessed length."""
    deadline = time.monotonic() + 30
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT 1 FROM checkpoint_writes WHERE thread_id = %s AND channel = 'p1_out'",
                (thread,),
            ).fetchone()
            if row:
                return
            time.sleep(0.01)
    raise TimeoutError("p1's write never committed")


def build(dsn: str, thread: str, kill_in: str | None) -> StateGraph[Any, Any, Any, Any]:
    def make(node: str) -> Any:
        def run(state: State) -> dict[str, Any]:
            record(dsn, thread, node)
            if kill_in == node:
                os.kill(os.getpid(), signal.SIGKILL)
            if node == "p2" and kill_in == "p2-after-p1-writes":
                wait_for_p1_writes(dsn, thread)
                os.kill(os.getpid(), signal.SIGKILL)
            update: dict[str, Any] = {"log": [node]}
            if node == "p1":
                update["p1_out"] = "done"
            return update

        return run

    builder = StateGraph(State)
    for node in NODES:
        builder.add_node(node, make(node))
    builder.add_edge(START, "n1")
    builder.add_edge("n1", "n2")
    builder.add_edge("n2", "p1")
    builder.add_edge("n2", "p2")
    builder.add_edge(["p1", "p2"], "n3")
    builder.add_edge("n3", "n4")
    builder.add_edge("n4", "n5")
    builder.add_edge("n5", END)
    return builder


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("dsn")
    parser.add_argument("thread")
    parser.add_argument("mode", choices=["sync", "async", "exit"])
    parser.add_argument("flavor", choices=["sync", "async"])
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--kill-in")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--connections", type=int, default=10)
    args = parser.parse_args()
    threads = [f"{args.thread}-{i}" for i in range(args.threads)] if args.threads else [args.thread]
    graphs = {thread: build(args.dsn, thread, args.kill_in) for thread in threads}
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute(CREATE_RUNS)  # once, here: runs creating it at once can collide
    payload = None if args.resume else {"log": []}
    # With several runs, a resumed run that never saved a checkpoint gets its input again,
    # as its caller would do; one run alone reports it (exit code 3).
    several = bool(args.threads)
    try:
        if args.flavor == "sync":
            with DurablePostgresSaver.from_conn_string(
                args.dsn, max_connections=args.connections
            ) as saver:
                saver.setup()

                def invoke(thread: str) -> None:
                    graph = graphs[thread].compile(checkpointer=saver)
                    config: Any = {"configurable": {"thread_id": thread}}
                    try:
                        graph.invoke(payload, config, durability=args.mode)
                    except EmptyInputError:
                        if not several:
                            raise
                        graph.invoke({"log": []}, config, durability=args.mode)

                with ThreadPoolExecutor(len(threads)) as pool:
                    for done in [pool.submit(invoke, thread) for thread in threads]:
                        done.result()
        else:

            async def run() -> None:
                async with AsyncDurablePostgresSaver.from_conn_string(
                    args.dsn, max_connections=args.connections
                ) as saver:
                    await saver.setup()

                    async def ainvoke(thread: str) -> None:
                        graph = graphs[thread].compile(checkpointer=saver)
                        config: Any = {"configurable": {"thread_id": thread}}
                        try:
                            await graph.ainvoke(payload, config, durability=args.mode)
                        except EmptyInputError:
                            if not several:
                                raise
                            await graph.ainvoke({"log": []}, config, durability=args.mode)

                    await asyncio.gather(*(ainvoke(thread) for thread in threads))

            asyncio.run(run())
    except EmptyInputError:
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
