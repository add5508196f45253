"""Per-step cost of each durability mode, and throughput with concurrent threads.

Both use the 10-node, 10-channel graph of `durability_modes.py`. Samples of all savers and
modes are interleaved (a shuffled order in every repetition), so a burst of load from other
processes hits them alike instead of skewing whichever ran at that moment.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import ExitStack
from typing import Any

from bench_common import POOL_SIZE, Stats, ours, timed_ms, upstream, upstream_single
from bench_effects import FLOOR_INSERT, FLOOR_TABLE
from durability_modes import NODES, graph_builder, invoker
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from psycopg.rows import tuple_row

from langgraph_durable import DurablePostgresSaver
from langgraph_durable._sql import put_checkpoint_statement
from langgraph_durable.checkpoint import _core

MODES = ("sync", "async", "exit")


class NoopSaver(BaseCheckpointSaver[str]):
    """Stores nothing: what LangGraph's checkpointing costs with a saver that costs nothing,
    the floor for any saver."""

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return None

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        return iter(())

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        configurable = config["configurable"]
        return {
            "configurable": {
                "thread_id": configurable["thread_id"],
                "checkpoint_ns": configurable.get("checkpoint_ns", ""),
                "checkpoint_id": checkpoint["id"],
            }
        }

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        return None

    # The async methods, so that the no-op saver is the ceiling on one event loop too.

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return None

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        return
        yield

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        return None


class OneCommitSaver(NoopSaver):
    """Stores nothing but commits one single-row INSERT per checkpoint, synchronously: the
    floor for any saver that makes each step durable before the next one starts."""

    def __init__(self, pool: Any) -> None:
        super().__init__()
        self._pool = pool
        with pool.connection() as conn:
            conn.execute(FLOOR_TABLE)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        with self._pool.connection() as conn:
            conn.execute(FLOOR_INSERT, (checkpoint["id"], b"x" * 64))
        return super().put(config, checkpoint, metadata, new_versions)


class StatementOnlySaver(NoopSaver):
    """Runs our real `put_checkpoint` statement, with the parameters of a real step (its
    checkpoint row and the parent's write rows, as a put that took them parked sends them)
    captured once and reused: what storing upstream's row format costs in one statement,
    with no saver Python around it. The floor for a drop-in saver."""

    def __init__(self, saver: DurablePostgresSaver) -> None:
        super().__init__()
        self._pool: Any = saver.conn
        self._template = self._capture(saver.conn)

    @staticmethod
    def _capture(pool: Any) -> dict[str, Any]:
        """The parameters of the last step of one real run, writes included.

        Captured with parking off, so that every write has a statement of its own and the
        step's write rows are found whatever the machine's load: with parking on, writes no
        put takes within the linger are stored alone and their thread stops parking for its
        next 64 checkpoints, so under load no put of the run might carry any.
        """
        capturing = DurablePostgresSaver(pool, write_linger=0)
        checkpoints: list[dict[str, Any]] = []
        writes: list[dict[str, Any]] = []
        # put hands its statement's parameters to its combiner
        combiner = capturing._combiner
        store_checkpoint, store_writes = combiner.store, capturing._store_writes

        def keep_checkpoint(params: dict[str, Any]) -> None:
            checkpoints.append(dict(params))
            store_checkpoint(params)

        def keep_writes(query: Any, params: dict[str, Any]) -> None:
            writes.append(dict(params))
            store_writes(query, params)

        combiner.store = keep_checkpoint  # type: ignore[method-assign]
        capturing._store_writes = keep_writes  # type: ignore[method-assign]
        graph_builder().compile(checkpointer=capturing).invoke(
            {}, {"configurable": {"thread_id": str(uuid.uuid4())}}, durability="sync"
        )
        for params in reversed(checkpoints):
            parents = [w for w in writes if w["checkpoint_id"] == params["parent_checkpoint_id"]]
            if parents:
                return {**params, **_core.parked_write_params(parents)}
        raise RuntimeError("the captured run stored no writes against a checkpoint's parent")

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        params = {
            **self._template,
            "thread_id": config["configurable"]["thread_id"],
            "checkpoint_id": checkpoint["id"],
        }
        with self._pool.connection() as conn:
            conn.cursor(row_factory=tuple_row).execute(*put_checkpoint_statement(params))
        return super().put(config, checkpoint, metadata, new_versions)


def per_step(
    upstream_dsn: str, ours_dsn: str, runs: int, warmup: int
) -> dict[tuple[str, str], Stats]:
    """ms per step of one invoke on a fresh thread, keyed by (saver, mode).

    Each saver writes to a database of its own, with its own schema (our extra indexes
    would slow upstream's inserts down).

    Upstream is measured in both setups, "upstream_single" (`from_conn_string`) and
    "upstream_pool", on the same database. The saver "none" (no checkpointer) is keyed with
    mode "-"; "noop" is `NoopSaver`,
    "one_commit" is `OneCommitSaver` and "statement_only" `StatementOnlySaver` (both on
    our saver's pool and database; the latter in every mode, the floor of each).
    """
    with ExitStack() as stack:
        mine = stack.enter_context(ours(ours_dsn, 10))
        savers: dict[str, BaseCheckpointSaver[Any]] = {
            "upstream_single": stack.enter_context(upstream_single(upstream_dsn)),
            "upstream_pool": stack.enter_context(upstream(upstream_dsn, 10, setup=False)),
            "ours": mine,
            "ours_async_commit": stack.enter_context(ours(ours_dsn, 10, async_commit=True)),
        }
        invokers: dict[tuple[str, str], Callable[[], Any]] = {
            ("none", "-"): invoker(graph_builder().compile(), None),
            ("noop", "sync"): invoker(graph_builder().compile(checkpointer=NoopSaver()), "sync"),
            ("one_commit", "sync"): invoker(
                graph_builder().compile(checkpointer=OneCommitSaver(mine.conn)), "sync"
            ),
        }
        statement_only = graph_builder().compile(checkpointer=StatementOnlySaver(mine))
        for mode in MODES:
            invokers[("statement_only", mode)] = invoker(statement_only, mode)
        for name, saver in savers.items():
            graph = graph_builder().compile(checkpointer=saver)
            for mode in MODES:
                invokers[(name, mode)] = invoker(graph, mode)
        for invoke in invokers.values():
            for _ in range(warmup):
                invoke()
        samples: dict[tuple[str, str], list[float]] = {key: [] for key in invokers}
        order = list(invokers)
        shuffler = random.Random(7)
        for _ in range(runs):
            shuffler.shuffle(order)
            for key in order:
                samples[key].append(timed_ms(invokers[key]) / NODES)
    return {key: Stats.of(values) for key, values in samples.items()}


def _rate(invoke: Callable[[], Any], threads: int, seconds: float) -> float:
    """Invokes per second with `threads` Python threads invoking back to back."""
    stop = threading.Event()
    counts = [0] * threads
    start = threading.Barrier(threads + 1)

    def worker(i: int) -> None:
        start.wait()
        while not stop.is_set():
            invoke()
            counts[i] += 1

    workers = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(threads)]
    for w in workers:
        w.start()
    start.wait()
    time.sleep(min(1.0, seconds / 4))  # ramp up: every thread is mid-invoke from here on
    begin, done_before = time.perf_counter(), sum(counts)
    time.sleep(seconds)
    # A rate needs invokes to count: on a loaded machine a short window may see none
    # finish (a rate of 0 that no ratio can use), so it lasts until as many invokes as
    # threads have finished in it (or every worker has died of an error).
    while sum(counts) - done_before < threads and any(w.is_alive() for w in workers):
        time.sleep(0.01)
    end, done_after = time.perf_counter(), sum(counts)
    stop.set()
    for w in workers:
        w.join()
    return (done_after - done_before) / (end - begin)


def throughput(
    upstream_dsn: str,
    ours_dsn: str,
    levels: tuple[int, ...],
    seconds: float,
    rounds: int,
    pool_size: int = POOL_SIZE,
) -> dict[tuple[str, int], Stats]:
    """Invokes per second (durability "sync"), keyed by (saver, threads).

    Upstream in both setups: "upstream_single" (`from_conn_string`, one connection) and
    "upstream_pool" (a pool of `pool_size`), on the same database.

    Each LangGraph thread (thread_id) is run from its own Python thread; each saver writes
    to a database of its own. "noop" (`NoopSaver`) is the ceiling for any saver in one
    process: LangGraph's own work, which holds the GIL. Every round
    measures each saver at each level once, alternating which saver goes first; the median
    over rounds is reported.
    """
    with ExitStack() as stack:
        savers = {
            "upstream_single": stack.enter_context(upstream_single(upstream_dsn)),
            "upstream_pool": stack.enter_context(upstream(upstream_dsn, pool_size, setup=False)),
            "ours": stack.enter_context(ours(ours_dsn, pool_size)),
        }
        invokers = {
            name: invoker(graph_builder().compile(checkpointer=saver), "sync")
            for name, saver in {**savers, "noop": NoopSaver()}.items()
        }
        for invoke in invokers.values():  # warm up pools (to full size) and plans
            _rate(invoke, max(levels), min(1.0, seconds))
        samples: dict[tuple[str, int], list[float]] = {
            (name, level): [] for name in invokers for level in levels
        }
        names = list(invokers)
        for round_ in range(rounds):
            for level in levels:
                for name in names if round_ % 2 == 0 else reversed(names):
                    samples[(name, level)].append(_rate(invokers[name], level, seconds))
    return {key: Stats.of(values) for key, values in samples.items()}
