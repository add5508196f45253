"""What-ifs for the sync per-step target, measured without changing the package.

    python benchmarks/what_if.py [--dsn DSN] [--runs 150]

1. Per-step time (10-node graph, `durability="sync"`) of variants of our saver,
   interleaved with upstream and with LangGraph on a no-op checkpointer:
   - `write_linger=0`: no parking, so every step commits twice in series (the task's
     writes, then the checkpoint, which waits for them): the path before parking;
   - `async_commit=True`: the checkpoint commits asynchronously, so parking is off and the
     writes commit on their own, synchronously;
   - `all async`: also the pool's sessions default to `synchronous_commit = off`, so no
     commit waits for a WAL flush: what is left is round trips and Python.
2. The wall time of single statements on one pooled connection: our `put_checkpoint` (with
   and without the step's parked writes) and `insert_writes` statements with the parameters
   of a real step, against a one-row INSERT (the commit floor) and `SELECT 1` (the round
   trip).
"""

from __future__ import annotations

import argparse
import itertools
import random
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from bench_common import Stats, ours, scratch_database, timed_ms, upstream
from bench_steps import NoopSaver
from durability_modes import NODES, graph_builder
from psycopg import Connection
from psycopg.rows import DictRow
from psycopg_pool import ConnectionPool

from langgraph_durable import DurablePostgresSaver
from langgraph_durable._db import CONNECTION_KWARGS
from langgraph_durable._sql import put_checkpoint_statement
from langgraph_durable.checkpoint import _core
from langgraph_durable.embedded import resolve_dsn


@contextmanager
def _saver_on_async_sessions(dsn: str, **options: Any) -> Iterator[DurablePostgresSaver]:
    pool: ConnectionPool[Connection[DictRow]] = ConnectionPool(
        dsn,
        min_size=1,
        max_size=10,
        kwargs={**CONNECTION_KWARGS, "options": "-c synchronous_commit=off"},
        connection_class=Connection[DictRow],
    )
    with pool:
        yield DurablePostgresSaver(pool, **options)


def commit_modes(upstream_dsn: str, ours_dsn: str, runs: int) -> dict[str, Stats]:
    """ms per step of each variant, keyed by its label."""
    with ExitStack() as stack:
        savers: dict[str, Any] = {
            "upstream PostgresSaver": stack.enter_context(upstream(upstream_dsn, 10)),
            "ours": stack.enter_context(ours(ours_dsn, 10)),
            "ours, write_linger=0": stack.enter_context(ours(ours_dsn, 10, write_linger=0)),
            "ours, async_commit=True": stack.enter_context(ours(ours_dsn, 10, async_commit=True)),
            "ours, all async": stack.enter_context(
                _saver_on_async_sessions(ours_dsn, async_commit=True)
            ),
            "LangGraph with a no-op checkpointer": NoopSaver(),
        }
        invokers: dict[str, Callable[[], Any]] = {}
        for label, saver in savers.items():
            graph = graph_builder().compile(checkpointer=saver)

            def invoke(graph: Any = graph) -> Any:
                config = {"configurable": {"thread_id": str(uuid.uuid4())}}
                return graph.invoke({}, config, durability="sync")

            invokers[label] = invoke
        for warm in invokers.values():
            for _ in range(5):
                warm()
        samples: dict[str, list[float]] = {label: [] for label in invokers}
        order = list(invokers)
        shuffler = random.Random(3)
        for _ in range(runs):
            shuffler.shuffle(order)
            for label in order:
                samples[label].append(timed_ms(invokers[label]) / NODES)
    return {label: Stats.of(values) for label, values in samples.items()}


def statements(dsn: str, runs: int) -> dict[str, Stats]:
    """ms per statement on one connection, keyed by label."""
    captured: dict[str, Any] = {}
    with ours(dsn, 2, write_linger=0) as saver:  # the writes get a statement of their own
        # put hands its statement's parameters to its combiner
        combiner = saver._combiner
        store_checkpoint, store_writes = combiner.store, saver._store_writes

        def keep_checkpoint(params: dict[str, Any]) -> None:
            captured.setdefault("checkpoint", params)
            store_checkpoint(params)

        def keep_writes(query: Any, params: dict[str, Any]) -> None:
            captured.setdefault("writes", (query, params))
            store_writes(query, params)

        combiner.store = keep_checkpoint  # type: ignore[method-assign]
        saver._store_writes = keep_writes  # type: ignore[method-assign]
        graph_builder().compile(checkpointer=saver).invoke(
            {}, {"configurable": {"thread_id": "capture"}}, durability="sync"
        )
        pool: ConnectionPool[Connection[DictRow]] = saver.conn  # type: ignore[assignment]
        counter = itertools.count()
        writes_query, writes_params = captured["writes"]
        with pool.connection() as conn:

            def put(params: dict[str, Any]) -> Any:
                """The statement our saver sends for these parameters."""
                return conn.execute(*put_checkpoint_statement(params))

            conn.execute("CREATE TABLE bench_floor (key TEXT PRIMARY KEY, payload BYTEA)")
            calls: dict[str, Callable[[], Any]] = {
                "SELECT 1 (round trip)": lambda: conn.execute("SELECT 1"),
                "one-row INSERT + commit (floor)": lambda: conn.execute(
                    "INSERT INTO bench_floor VALUES (%s, %s)", (f"k{next(counter)}", b"x" * 64)
                ),
                "put_checkpoint statement": lambda: put(
                    {**captured["checkpoint"], "thread_id": f"t{next(counter)}"}
                ),
                "put_checkpoint carrying the step's writes": lambda: put(
                    {
                        **captured["checkpoint"],
                        **_core.parked_write_params([writes_params]),
                        "thread_id": f"t{next(counter)}",
                    }
                ),
                "put_checkpoint, synchronous_commit off": lambda: put(
                    {
                        **captured["checkpoint"],
                        "thread_id": f"t{next(counter)}",
                        "synchronous_commit": "off",
                    }
                ),
                "insert_writes statement": lambda: conn.execute(
                    writes_query, {**writes_params, "thread_id": f"t{next(counter)}"}
                ),
            }
            for call in calls.values():
                for _ in range(20):
                    call()
            samples: dict[str, list[float]] = {label: [] for label in calls}
            order = list(calls)
            shuffler = random.Random(4)
            for _ in range(runs):
                shuffler.shuffle(order)
                for label in order:
                    samples[label].append(timed_ms(calls[label]))
    return {label: Stats.of(values) for label, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dsn")
    parser.add_argument("--runs", type=int, default=150)
    args = parser.parse_args()
    server, embedded = resolve_dsn(args.dsn)
    try:
        with (
            scratch_database(server, "whatif_upstream") as upstream_dsn,
            scratch_database(server, "whatif_ours") as ours_dsn,
        ):
            modes = commit_modes(upstream_dsn, ours_dsn, args.runs)
            single = statements(ours_dsn, args.runs * 3)
    finally:
        if embedded is not None:
            embedded.stop()
    base = modes["upstream PostgresSaver"].median
    print("| sync per step | ms (p95) | vs upstream |\n|---|---:|---:|")
    for label, stats in modes.items():
        print(f"| {label} | {stats.median:.3f} ({stats.p95:.3f}) | {stats.median / base:.2f}x |")
    print("\n| statement | ms (p95) |\n|---|---:|")
    for label, stats in single.items():
        print(f"| {label} | {stats.median:.3f} ({stats.p95:.3f}) |")


if __name__ == "__main__":
    main()
