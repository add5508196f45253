"""Async concurrency on one event loop: many `ainvoke` runs in flight, as in an agent server.

    python benchmarks/bench_async.py [--dsn DSN] [--levels 16,64,256] [--seconds 3]
        [--gc 50000,50,100]

N coroutines on one loop each run the 10-node graph of `durability_modes.py` back to back,
every run on a thread id of its own (`astream(stream_mode="updates")`, which is `ainvoke`
with a timestamp per finished step). Every saver has `POOL_SIZE` (4) connections: ours
(`AsyncDurablePostgresSaver.from_conn_string(max_connections=4)`), upstream's
`AsyncPostgresSaver` on an `AsyncConnectionPool` of 4, and upstream's
`AsyncPostgresSaver.from_conn_string` (one connection), each in a database of its own
schema; a no-op saver that stores nothing gives the ceiling (LangGraph's own work on one
loop). Measured: completed steps per second over a fixed window after a ramp-up (until
every runner finished one run), and the 99th percentile of step latency (time from the
previous step of the same run, or from its start, to a step's update) over every step of
each runner's runs after its first that started before the window closed. Savers
alternate within each round; medians over rounds. `--gc 50000,50,100` measures with the
collector's thresholds set so (`SERVER_GC_THRESHOLDS`, the README's setting for many runs
on one loop).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

from bench_common import POOL_SIZE, UPSTREAM_KWARGS, Stats, gc_thresholds, scratch_database
from bench_steps import NoopSaver
from durability_modes import graph_builder
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg_pool import AsyncConnectionPool

from langgraph_durable import AsyncDurablePostgresSaver

SAVERS = ("ours", "upstream_pool", "upstream_single", "noop")


@dataclass(frozen=True)
class AsyncResult:
    """Steps per second and p99 step latency (ms), one sample per round."""

    steps_per_s: list[float]
    p99_ms: list[float]
    cpu_ms_per_step: list[float]

    def rate(self) -> Stats:
        return Stats.of(self.steps_per_s)

    def p99(self) -> float:
        return statistics.median(self.p99_ms)


@asynccontextmanager
async def async_saver(name: str, dsn: str, setup: bool) -> AsyncIterator[Any]:
    """The async saver `name` ("ours", "upstream_single", "upstream_pool", "noop"), each
    with `POOL_SIZE` connections but upstream's `from_conn_string` (one)."""
    if name == "noop":
        yield NoopSaver()
    elif name == "ours":
        async with AsyncDurablePostgresSaver.from_conn_string(
            dsn, max_connections=POOL_SIZE
        ) as saver:
            if setup:
                await saver.setup()
            yield saver
    elif name == "upstream_single":
        async with AsyncPostgresSaver.from_conn_string(dsn) as theirs:
            if setup:
                await theirs.setup()
            yield theirs
    else:
        async with AsyncConnectionPool(
            dsn, min_size=POOL_SIZE, max_size=POOL_SIZE, kwargs=UPSTREAM_KWARGS, open=False
        ) as pool:
            theirs = AsyncPostgresSaver(pool)  # type: ignore[arg-type]  # dict-row connections
            if setup:
                await theirs.setup()
            yield theirs


async def _round(
    graph: Any, concurrency: int, seconds: float, mode: str
) -> tuple[float, float, float]:
    """(steps/s, p99 step latency in ms, CPU ms of this process per step) with
    `concurrency` runs in flight.

    Every runner has a run in flight from start to end, so the load never changes. The
    ramp-up lasts until every runner has finished its first run, and throughput counts the
    steps finished within the window after it. The p99 is over every step of each
    runner's later runs that started before the window closed, each followed to its end
    while the other runners keep the load up. Counting only the steps that end within a
    window about one run long instead would drop or keep the first steps of runs (which
    wait for more statements: the read and the input's checkpoint) depending on where
    the window falls: with runs in lockstep, the slower saver's never fell inside it.
    """
    stop = False
    counting = False
    steps = 0
    latencies: list[float] = []
    warm = 0
    closed = False  # the window is over: runs starting now are not counted
    warmed, drained = asyncio.Event(), asyncio.Event()
    in_flight = 0  # counted runs not finished yet

    async def runner() -> None:
        try:
            await run_back_to_back()
        except BaseException:
            warmed.set()  # a failed run must not leave the round waiting: gather raises it
            drained.set()
            raise

    async def run_back_to_back() -> None:
        nonlocal steps, warm, in_flight
        first = True
        while not stop:
            counted = not first and not closed
            if counted:
                in_flight += 1
            config = {"configurable": {"thread_id": str(uuid.uuid4())}}
            mine: list[float] = []
            last = time.perf_counter()
            async for _ in graph.astream({}, config, durability=mode, stream_mode="updates"):
                now = time.perf_counter()
                if counting:
                    steps += 1
                mine.append((now - last) * 1000)
                last = now
            if counted:
                latencies.extend(mine)
                in_flight -= 1
                if not in_flight and closed:
                    drained.set()
            if first:
                first, warm = False, warm + 1
                if warm == concurrency:
                    warmed.set()

    tasks = [asyncio.create_task(runner()) for _ in range(concurrency)]
    await warmed.wait()
    if any(task.done() for task in tasks):  # a runner failed
        await all_or_none(tasks)
    counting = True
    began, cpu = time.perf_counter(), time.process_time()
    await asyncio.sleep(seconds)
    counting, closed = False, True
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu
    counted_steps = steps
    if in_flight:
        await drained.wait()  # or a runner failed: `all_or_none` raises it
    stop = True
    await all_or_none(tasks)
    if not latencies:
        return 0.0, 0.0, 0.0
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return counted_steps / elapsed, p99, cpu * 1000 / max(1, counted_steps)


async def all_or_none(tasks: list[asyncio.Task[None]]) -> None:
    """Waits for every runner; if one failed, cancels the others (their saver is about to
    be closed under them) and raises its error."""
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def _measure(
    dsns: dict[str, str], levels: tuple[int, ...], seconds: float, rounds: int, mode: str
) -> dict[tuple[str, int], AsyncResult]:
    samples: dict[tuple[str, int], tuple[list[float], list[float], list[float]]] = {
        (name, level): ([], [], []) for name in dsns for level in levels
    }
    async with AsyncExitStack() as stack:
        graphs = {}
        for name, dsn in dsns.items():
            setup = name not in ("upstream_single", "noop")  # shares upstream_pool's database
            saver = await stack.enter_async_context(async_saver(name, dsn, setup))
            graphs[name] = graph_builder().compile(checkpointer=saver)
        for graph in graphs.values():  # warm up: pools, prepared statements
            await _round(graph, max(levels), min(1.0, seconds), mode)
        names = list(graphs)
        for round_ in range(rounds):
            for level in levels:
                for name in names if round_ % 2 == 0 else reversed(names):
                    gc.collect()  # every round starts without the last one's garbage
                    measured = await _round(graphs[name], level, seconds, mode)
                    for kept, value in zip(samples[(name, level)], measured, strict=True):
                        kept.append(value)
    return {key: AsyncResult(*lists) for key, lists in samples.items()}


def async_concurrency(
    upstream_dsn: str,
    ours_dsn: str,
    levels: tuple[int, ...],
    seconds: float,
    rounds: int,
    mode: str = "sync",
    gc_setting: tuple[int, int, int] | None = None,
) -> dict[tuple[str, int], AsyncResult]:
    """Results keyed by (saver, concurrent runs); savers "ours", "upstream_pool",
    "upstream_single" (the two share `upstream_dsn`) and "noop" (`NoopSaver`: stores
    nothing, the ceiling for any saver on one loop). `gc_setting`: the collector's
    thresholds while measuring (None: as the process has them)."""
    dsns = {
        "ours": ours_dsn,
        "upstream_pool": upstream_dsn,
        "upstream_single": upstream_dsn,
        "noop": "",
    }
    with gc_thresholds(gc_setting):
        return asyncio.run(_measure(dsns, levels, seconds, rounds, mode))


def _main() -> None:
    from langgraph_durable.embedded import resolve_dsn

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dsn")
    parser.add_argument("--levels", default="16,64,256")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mode", default="sync")
    parser.add_argument("--only", default=",".join(SAVERS), help="savers to run")
    parser.add_argument(
        "--gc",
        help="the collector's thresholds while measuring, as for gc.set_threshold: "
        "50000,50,100 (default: Python's)",
    )
    args = parser.parse_args()
    levels = tuple(int(x) for x in args.levels.split(","))
    thresholds = None
    if args.gc:
        try:
            parts = tuple(int(x) for x in args.gc.split(","))
        except ValueError:
            parts = ()
        if len(parts) != 3 or min(parts) < 0:
            parser.error("--gc takes three whole numbers, as 50000,50,100")
        thresholds = (parts[0], parts[1], parts[2])
    dsn, embedded = resolve_dsn(args.dsn)
    chosen = args.only.split(",")
    try:
        with (
            scratch_database(dsn, "async_upstream") as upstream_dsn,
            scratch_database(dsn, "async_ours") as ours_dsn,
        ):
            dsns = {
                name: {"ours": ours_dsn, "noop": ""}.get(name, upstream_dsn)
                for name in SAVERS
                if name in chosen
            }
            if "upstream_single" in dsns and "upstream_pool" not in dsns:
                dsns = {"upstream_pool": upstream_dsn, **dsns}
            with gc_thresholds(thresholds):
                found = asyncio.run(_measure(dsns, levels, args.seconds, args.rounds, args.mode))
    finally:
        if embedded is not None:
            embedded.stop()
    show: Callable[[list[float]], str] = lambda v: (  # noqa: E731
        f"{statistics.median(v):,.0f} ({min(v):,.0f}-{max(v):,.0f})"
    )
    print(
        f"durability={args.mode}, pool {POOL_SIZE}, {args.rounds} rounds of {args.seconds} s, "
        f"GC thresholds {thresholds or 'Python default'}"
    )
    for (name, level), result in found.items():
        print(
            f"{name:16s} {level:4d} runs: steps/s {show(result.steps_per_s)}, "
            f"p99 step {result.p99():.1f} ms ({min(result.p99_ms):.1f}-{max(result.p99_ms):.1f}), "
            f"CPU/step {statistics.median(result.cpu_ms_per_step):.2f} ms",
            file=sys.stdout,
        )


if __name__ == "__main__":
    _main()
