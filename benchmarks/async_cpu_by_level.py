"""Where the CPU per step goes as async runs on one loop rise from 16 to 256: a fixed
amount of work, levels alternating in one process.

    python benchmarks/async_cpu_by_level.py [--dsn DSN] [--levels 16,256] [--runs 512]
        [--alternations 6]

`bench_async.py` counts steps over a time window, so its CPU per step moves with the
machine's speed from one round to the next. Here every measurement runs the same number of
graph runs (`--runs` in total, split over the level's concurrent runners) with our saver
and with the no-op saver (LangGraph's own work), levels and savers alternating in one
process, and reports the process CPU (user + system) per step. The difference between the
two savers at a level is the saver's own CPU per step (with psycopg and the pool); if it
stays flat while the no-op saver's rises, the fall in steps/s from 16 to 256 runs is
LangGraph's own when the process is CPU-bound.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import statistics
import uuid
from typing import Any

from bench_async import POOL
from bench_common import scratch_database
from bench_steps import NoopSaver
from durability_modes import graph_builder

from langgraph_durable import AsyncDurablePostgresSaver


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _steps(graph: Any, runners: int, runs_each: int) -> int:
    """Runs `runners` coroutines of `runs_each` runs back to back; the steps completed."""
    done = 0

    async def runner() -> None:
        nonlocal done
        for _ in range(runs_each):
            config = {"configurable": {"thread_id": str(uuid.uuid4())}}
            async for _ in graph.astream({}, config, durability="sync", stream_mode="updates"):
                done += 1

    await asyncio.gather(*(runner() for _ in range(runners)))
    return done


async def cpu_by_level(
    dsn: str, levels: tuple[int, ...], runs: int, alternations: int
) -> dict[tuple[str, int], list[float]]:
    """CPU ms per step keyed by (saver, level), one sample per alternation."""
    samples: dict[tuple[str, int], list[float]] = {}
    async with AsyncDurablePostgresSaver.from_conn_string(dsn, max_connections=POOL) as saver:
        await saver.setup()
        graphs = {
            "ours": graph_builder().compile(checkpointer=saver),
            "noop": graph_builder().compile(checkpointer=NoopSaver()),
        }
        for graph in graphs.values():  # warm up: connections, prepared statements, imports
            await _steps(graph, max(levels), 1)
        for turn in range(alternations):
            order = levels if turn % 2 == 0 else tuple(reversed(levels))
            for name, graph in graphs.items():
                for level in order:
                    gc.collect()
                    began = _cpu_seconds()
                    steps = await _steps(graph, level, max(1, runs // level))
                    spent = _cpu_seconds() - began
                    samples.setdefault((name, level), []).append(1000 * spent / steps)
                    print(
                        f"  {turn + 1}/{alternations} {name} {level} runs: "
                        f"{1000 * spent / steps:.3f} ms CPU per step",
                        flush=True,
                    )
    return samples


def _main() -> None:
    from langgraph_durable.embedded import resolve_dsn

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dsn")
    parser.add_argument("--levels", default="16,256")
    parser.add_argument("--runs", type=int, default=512, help="graph runs per measurement")
    parser.add_argument("--alternations", type=int, default=6)
    args = parser.parse_args()
    levels = tuple(int(x) for x in args.levels.split(","))
    dsn, embedded = resolve_dsn(args.dsn)
    try:
        with scratch_database(dsn, "async_cpu") as scratch:
            found = asyncio.run(cpu_by_level(scratch, levels, args.runs, args.alternations))
    finally:
        if embedded is not None:
            embedded.stop()
    median = {key: statistics.median(values) for key, values in found.items()}
    print(f"\nCPU ms per step, median of {args.alternations} (range):")
    print("| runs on one loop | ours | LangGraph alone (no-op saver) | the saver's own |")
    print("|---:|---:|---:|---:|")
    for level in levels:
        ours, noop = found[("ours", level)], found[("noop", level)]
        print(
            f"| {level} | {median[('ours', level)]:.3f} ({min(ours):.3f}-{max(ours):.3f}) "
            f"| {median[('noop', level)]:.3f} ({min(noop):.3f}-{max(noop):.3f}) "
            f"| {median[('ours', level)] - median[('noop', level)]:.3f} |"
        )


if __name__ == "__main__":
    _main()
