"""Per-step cost of each durability mode, ours against upstream's PostgresSaver, same run.

    python benchmarks/durability_modes.py [--dsn DSN] [--runs 30] [--quick]

A 10-node linear graph with 10 channels (each node writes one channel and reads all) is
invoked on fresh threads; the time of one invoke divided by its 10 steps is the per-step
cost. Upstream runs on its pool (`PostgresSaver(ConnectionPool)`), its fastest setup. The
no-checkpointer time is the graph's own cost. Prints a markdown table with ratios.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, StateGraph
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool
from typing_extensions import TypedDict

from langgraph_durable import DurablePostgresSaver
from langgraph_durable.embedded import resolve_dsn

NODES = 10


class State(TypedDict, total=False):
    c0: str
    c1: str
    c2: str
    c3: str
    c4: str
    c5: str
    c6: str
    c7: str
    c8: str
    c9: str


def graph_builder() -> StateGraph[Any, Any, Any, Any]:
    builder = StateGraph(State)
    for i in range(NODES):

        def node(state: State, i: int = i) -> dict[str, str]:
            return {f"c{i}": f"value {i} after {len(state)} channels " * 4}

        builder.add_node(f"n{i}", node)
        builder.add_edge(START if i == 0 else f"n{i - 1}", f"n{i}")
    builder.add_edge(f"n{NODES - 1}", END)
    return builder


@contextmanager
def upstream_saver(dsn: str) -> Iterator[BaseCheckpointSaver[Any]]:
    kwargs: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    with ConnectionPool(dsn, max_size=10, kwargs=kwargs, open=True) as pool:
        saver = PostgresSaver(pool)  # type: ignore[arg-type]
        saver.setup()
        yield saver


@contextmanager
def durable_saver(dsn: str, **options: Any) -> Iterator[BaseCheckpointSaver[Any]]:
    with DurablePostgresSaver.from_conn_string(dsn, **options) as saver:
        saver.setup()
        yield saver


def per_step_ms(invoke: Callable[[], Any], runs: int) -> float:
    invoke()  # warm up caches, pools and prepared plans
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        invoke()
        samples.append((time.perf_counter() - start) * 1000 / NODES)
    return statistics.median(samples)


def measure(dsn: str, runs: int) -> list[tuple[str, str, float]]:
    results: list[tuple[str, str, float]] = []
    plain = graph_builder().compile()
    results.append(("none", "-", per_step_ms(lambda: plain.invoke({}), runs)))
    savers: list[tuple[str, Callable[[], Any]]] = [
        ("upstream PostgresSaver", lambda: upstream_saver(dsn)),
        ("DurablePostgresSaver", lambda: durable_saver(dsn)),
        ("DurablePostgresSaver(async_commit)", lambda: durable_saver(dsn, async_commit=True)),
    ]
    for mode in ("sync", "async", "exit"):
        for name, open_saver in savers:
            with open_saver() as saver:
                graph = graph_builder().compile(checkpointer=saver)

                def invoke(graph: Any = graph, mode: str = mode) -> Any:
                    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
                    return graph.invoke({}, config, durability=mode)

                results.append((name, mode, per_step_ms(invoke, runs)))
    return results


def table(results: list[tuple[str, str, float]]) -> str:
    upstream = {mode: ms for name, mode, ms in results if name.startswith("upstream")}
    lines = [
        f"Machine: {platform.machine()}, {platform.system()}, Python {platform.python_version()}",
        "",
        "| saver | durability | ms per step | ratio to upstream |",
        "|---|---|---:|---:|",
    ]
    for name, mode, ms in results:
        ratio = f"{ms / upstream[mode]:.2f}x" if mode in upstream else "-"
        lines.append(f"| {name} | {mode} | {ms:.3f} | {ratio} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="2 runs: checks that it works")
    args = parser.parse_args()
    dsn, embedded = resolve_dsn(args.dsn)
    try:
        print(table(measure(dsn, 2 if args.quick else args.runs)))
    finally:
        if embedded is not None:
            embedded.stop()


if __name__ == "__main__":
    main()
