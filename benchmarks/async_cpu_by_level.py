"""Where the CPU per step goes as async runs on one loop rise from 16 to 256: a fixed
amount of work, levels and savers alternating in one process.

    python benchmarks/async_cpu_by_level.py [--dsn DSN] [--levels 16,256] [--runs 1024]
        [--alternations 6]

`bench_async.py` counts steps over a time window, so its CPU per step moves with the
machine's speed from one round to the next. Here every measurement runs the same number of
graph runs (`--runs` in total, split evenly over the level's concurrent runners) with our
saver and with the no-op saver (LangGraph's own work); each turn measures every level and
both savers, and reverses both orders on the next turn. Reported per level: the process
CPU (user + system) per step of each saver, ours over the no-op saver (the difference
taken within each turn, so drift between turns cancels), and ours' steps/s and cores busy
(CPU seconds per second: at about 1 the process is bound by its CPU, so steps/s follows
CPU per step).

What "over the no-op saver" holds: the saver's Python, psycopg and the pool, and also the
event loop's work that exists only because runs wait on the database (the no-op saver's
runs never wait). The counts include each run's first steps (the read, the input's
checkpoint) at every level alike; at 256 runners each runner does `--runs / 256` runs
(4 by default), in waves that start together, so that level is closer to a burst than
to `bench_async.py`'s steady window.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
import uuid
from dataclasses import dataclass
from typing import Any

from bench_common import POOL_SIZE, scratch_database
from bench_steps import NoopSaver
from durability_modes import graph_builder

from langgraph_durable import AsyncDurablePostgresSaver

SAVERS = ("ours", "noop")


@dataclass(frozen=True)
class Sample:
    """One measurement: process CPU ms per step and steps per second of wall time."""

    cpu_ms_per_step: float
    steps_per_s: float

    @property
    def cores(self) -> float:
        """CPU seconds per second of wall time: how busy the process kept the machine."""
        return self.steps_per_s * self.cpu_ms_per_step / 1000


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


async def _measure(graph: Any, level: int, runs: int) -> Sample:
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    steps = await _steps(graph, level, runs // level)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return Sample(1000 * cpu / steps, steps / wall)


async def cpu_by_level(
    dsn: str, levels: tuple[int, ...], runs: int, alternations: int
) -> dict[tuple[str, int], list[Sample]]:
    """Samples keyed by (saver, level), one per turn, in turn order."""
    samples: dict[tuple[str, int], list[Sample]] = {}
    async with AsyncDurablePostgresSaver.from_conn_string(dsn, max_connections=POOL_SIZE) as saver:
        await saver.setup()
        graphs = {
            "ours": graph_builder().compile(checkpointer=saver),
            "noop": graph_builder().compile(checkpointer=NoopSaver()),
        }
        for graph in graphs.values():  # warm up: connections, prepared statements, imports
            await _steps(graph, max(levels), 1)
        for turn in range(alternations):
            forward = turn % 2 == 0
            for level in levels if forward else tuple(reversed(levels)):
                for name in SAVERS if forward else tuple(reversed(SAVERS)):
                    sample = await _measure(graphs[name], level, runs)
                    samples.setdefault((name, level), []).append(sample)
                    print(
                        f"  {turn + 1}/{alternations} {name} {level} runs: "
                        f"{sample.cpu_ms_per_step:.3f} ms CPU per step, "
                        f"{sample.steps_per_s:,.0f} steps/s",
                        flush=True,
                    )
    return samples


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def table(found: dict[tuple[str, int], list[Sample]], levels: tuple[int, ...]) -> str:
    """Markdown: per level, medians (ranges) over the turns."""
    lines = [
        "| runs on one loop | ours, CPU ms per step | no-op saver | ours over the no-op, "
        "per turn | ours, steps/s | ours, cores busy |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for level in levels:
        ours, noop = found[("ours", level)], found[("noop", level)]
        over = [a.cpu_ms_per_step - b.cpu_ms_per_step for a, b in zip(ours, noop, strict=True)]
        rates = [s.steps_per_s for s in ours]
        lines.append(
            f"| {level} | {_spread([s.cpu_ms_per_step for s in ours])} "
            f"| {_spread([s.cpu_ms_per_step for s in noop])} | {_spread(over)} "
            f"| {statistics.median(rates):,.0f} ({min(rates):,.0f}-{max(rates):,.0f}) "
            f"| {_spread([s.cores for s in ours])} |"
        )
    return "\n".join(lines)


def _main() -> None:
    from langgraph_durable.embedded import resolve_dsn

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dsn")
    parser.add_argument("--levels", default="16,256")
    parser.add_argument("--runs", type=int, default=1024, help="graph runs per measurement")
    parser.add_argument(
        "--alternations",
        type=int,
        default=6,
        help="turns; an even number lets each saver and level go first equally often",
    )
    args = parser.parse_args()
    levels = tuple(int(x) for x in args.levels.split(","))
    if args.runs <= 0:
        parser.error("--runs must be positive")
    uneven = [level for level in levels if level <= 0 or args.runs % level]
    if uneven:
        parser.error(
            f"--runs {args.runs} must be a multiple of every level (not of {uneven}), so that "
            "each level does the same work"
        )
    if args.alternations < 1:
        parser.error("--alternations must be at least 1")
    dsn, embedded = resolve_dsn(args.dsn)
    try:
        with scratch_database(dsn, "async_cpu") as scratch:
            found = asyncio.run(cpu_by_level(scratch, levels, args.runs, args.alternations))
    finally:
        if embedded is not None:
            embedded.stop()
    print(f"\n{args.runs} runs per measurement; median (range) of {args.alternations} turns:\n")
    print(table(found, levels))


if __name__ == "__main__":
    _main()
