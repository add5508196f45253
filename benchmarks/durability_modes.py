"""Per-step cost of each durability mode, ours against upstream's PostgresSaver, same run.

    python benchmarks/durability_modes.py [--dsn DSN] [--runs 30] [--quick]

A 10-node linear graph with 10 channels (each node writes one channel and reads all) is
invoked on fresh threads; the time of one invoke divided by its 10 steps is the per-step
cost. Upstream runs in both of its setups, one connection
(`PostgresSaver.from_conn_string`, as its README shows) and a `ConnectionPool`; each mode's
ratios are against the faster of the two in that mode, which the table names. The savers
take turns in a shuffled order on every repetition, so drift falls on all alike. The
no-checkpointer time is the graph's own cost. Prints a markdown table with ratios;
`benchmarks/run.py` measures the same rows with more runs, beside its floors.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
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


UPSTREAM_SINGLE = "upstream PostgresSaver (one connection)"
UPSTREAM_POOL = "upstream PostgresSaver (pool)"
OURS = "DurablePostgresSaver"
OURS_ASYNC_COMMIT = "DurablePostgresSaver(async_commit)"
SAVERS = (UPSTREAM_SINGLE, UPSTREAM_POOL, OURS, OURS_ASYNC_COMMIT)
MODES = ("sync", "async", "exit")


@contextmanager
def upstream_single(dsn: str) -> Iterator[BaseCheckpointSaver[Any]]:
    """Upstream as its README opens it: one connection, its calls behind one lock."""
    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
        yield saver


@contextmanager
def upstream_pool(dsn: str) -> Iterator[BaseCheckpointSaver[Any]]:
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


def invoker(graph: Any, mode: str | None) -> Callable[[], Any]:
    """One invoke of `graph` on a new thread (`mode` None: a graph without a checkpointer)."""

    def invoke() -> Any:
        config = {"configurable": {"thread_id": str(uuid.uuid4())}}
        if mode is None:  # no checkpointer: LangGraph takes no durability then
            return graph.invoke({}, config)
        return graph.invoke({}, config, durability=mode)

    return invoke


def _ms_per_step(invoke: Callable[[], Any]) -> float:
    start = time.perf_counter()
    invoke()
    return (time.perf_counter() - start) * 1000 / NODES


def measure(dsn: str, runs: int, seed: int = 0) -> list[tuple[str, str, float]]:
    """Median ms per step as (saver, mode, ms): "none" (no checkpointer, mode "-") and
    every saver of `SAVERS` in every mode of `MODES`, each invoked `runs` times, all taking
    turns in a shuffled order on every repetition (after one warm-up invoke each)."""
    openers: dict[str, Callable[[], Any]] = {
        UPSTREAM_SINGLE: lambda: upstream_single(dsn),
        UPSTREAM_POOL: lambda: upstream_pool(dsn),
        OURS: lambda: durable_saver(dsn),
        OURS_ASYNC_COMMIT: lambda: durable_saver(dsn, async_commit=True),
    }
    with ExitStack() as stack:
        invokes = {("none", "-"): invoker(graph_builder().compile(), None)}
        for name in SAVERS:
            graph = graph_builder().compile(checkpointer=stack.enter_context(openers[name]()))
            for mode in MODES:
                invokes[(name, mode)] = invoker(graph, mode)
        for invoke in invokes.values():  # warm up: caches, pools, prepared statements
            invoke()
        samples: dict[tuple[str, str], list[float]] = {key: [] for key in invokes}
        order = list(invokes)
        shuffle = random.Random(seed).shuffle
        for _ in range(runs):
            shuffle(order)
            for key in order:
                samples[key].append(_ms_per_step(invokes[key]))
    return [(name, mode, statistics.median(found)) for (name, mode), found in samples.items()]


def fastest_upstream(results: list[tuple[str, str, float]]) -> dict[str, tuple[str, float]]:
    """Per mode, the faster of upstream's two setups: (its name, ms per step)."""
    best: dict[str, tuple[str, float]] = {}
    for name, mode, ms in results:
        if name in (UPSTREAM_SINGLE, UPSTREAM_POOL) and (mode not in best or ms < best[mode][1]):
            best[mode] = (name, ms)
    return best


def table(results: list[tuple[str, str, float]]) -> str:
    best = fastest_upstream(results)
    lines = [
        f"Machine: {platform.machine()}, {platform.system()}, Python {platform.python_version()}",
        "",
        "| saver | durability | ms per step | ratio to upstream's faster setup |",
        "|---|---|---:|---:|",
    ]
    for name, mode, ms in results:
        ratio = f"{ms / best[mode][1]:.2f}x" if mode in best else "-"
        lines.append(f"| {name} | {mode} | {ms:.3f} | {ratio} |")
    lines.append("")
    lines.append(
        "Upstream's faster setup: "
        + "; ".join(
            f"{mode}: {name.removeprefix('upstream PostgresSaver (').removesuffix(')')}"
            for mode, (name, _) in best.items()
        )
        + "."
    )
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
