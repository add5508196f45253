"""A process of `bench_runs.py`: runs a benchmark graph directly, or as a run registry worker.

    python benchmarks/bench_runs_worker.py DSN

It prints `ready` once imported, then obeys one command per line on stdin:

- `direct GRAPH K`: opens a saver, invokes GRAPH K times on fresh threads
  (`durability="sync"`), closes the saver (its connections end, so their statistics reach
  `pg_stat_database`) and prints the invoke times as JSON `{"ms": [...]}`;
- `work GRAPH LEASE IDLE_WAIT`: opens a saver and runs a `Worker` for GRAPH until killed
  (the driver SIGKILLs it); prints `working` first.

GRAPH is `steps` (the 10-node, 10-channel graph of `durability_modes.py`, run as
`bench_steps` version 1) or `slow:NODES:MS` (a linear graph of NODES nodes that each sleep
MS milliseconds, run as `bench_slow` version 1). Both phases open the saver the same way
(`from_conn_string`, a pool of at most `POOL_SIZE` connections), so direct and registry runs use
the same saver.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from typing import Any

from bench_common import POOL_SIZE
from durability_modes import graph_builder
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import DurablePostgresSaver, GraphVersion, Worker


class Slow(TypedDict, total=False):
    done: int


def slow_builder(nodes: int, ms: float) -> StateGraph[Any, Any, Any, Any]:
    """A linear graph of `nodes` nodes, each sleeping `ms` milliseconds (a "multi-step run")."""
    builder = StateGraph(Slow)
    for i in range(nodes):

        def node(state: Slow, i: int = i) -> Slow:
            time.sleep(ms / 1000)
            return {"done": i + 1}

        builder.add_node(f"s{i}", node)
        builder.add_edge(START if i == 0 else f"s{i - 1}", f"s{i}")
    builder.add_edge(f"s{nodes - 1}", END)
    return builder


def graph_version(spec: str, saver: DurablePostgresSaver) -> GraphVersion:
    """The graph named by `spec` (see the module docstring), compiled with `saver`."""
    if spec == "steps":
        return GraphVersion("bench_steps", "1", graph_builder().compile(checkpointer=saver))
    kind, nodes, ms = spec.split(":")
    if kind != "slow":
        raise SystemExit(f"unknown graph {spec!r}")
    builder = slow_builder(int(nodes), float(ms))
    return GraphVersion("bench_slow", "1", builder.compile(checkpointer=saver))


def direct(dsn: str, spec: str, count: int) -> None:
    times: list[float] = []
    with DurablePostgresSaver.from_conn_string(dsn, max_connections=POOL_SIZE) as saver:
        graph = graph_version(spec, saver).graph
        for _ in range(count):
            config: Any = {"configurable": {"thread_id": str(uuid.uuid4())}}
            start = time.perf_counter()
            graph.invoke({}, config, durability="sync")
            times.append((time.perf_counter() - start) * 1000)
    print(json.dumps({"ms": times}), flush=True)


def work(dsn: str, spec: str, lease: float, idle_wait: float) -> None:
    with DurablePostgresSaver.from_conn_string(dsn, max_connections=POOL_SIZE) as saver:
        graph = graph_version(spec, saver)
        worker = Worker(saver, [graph], lease_seconds=lease, idle_wait=idle_wait)
        print("working", flush=True)
        worker.run_forever()


def main() -> int:
    dsn = sys.argv[1]
    print("ready", flush=True)
    for line in sys.stdin:
        command, *args = line.split()
        if command == "direct":
            direct(dsn, args[0], int(args[1]))
        elif command == "work":
            work(dsn, args[0], float(args[1]), float(args[2]))
        else:
            raise SystemExit(f"unknown command {line!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
